"""The documents' whole training step under ember.compile (issue 17): `make_train` below,
compiled with the default backend (inductor) and backend="eager", on an MLP, a small CNN with
BatchNorm and a transformer block, with SGD (momentum), Adam and AdamW: after five steps the
parameters, gradients, buffers and optimizer state equal eager's (float32; the compiled update
computes the same formulas in another order: rtol=1e-4, atol=1e-5).
"""
import copy
import pathlib
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_training import MLP  # noqa: E402  (the same model as the per-module training tests)

TOL = dict(rtol=1e-4, atol=1e-5)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # No bias before BatchNorm (as real CNNs): its gradient is rounding noise, which Adam
        # normalizes into full-size steps of noise that no two orders of summation agree on.
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class TransformerBlock(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        # bias=False: the attention's key bias has a zero gradient (softmax ignores it), and Adam
        # turns that rounding noise into full-size steps (as with a bias before BatchNorm).
        self.layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.0,
                                                      batch_first=True, bias=False)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


MODELS = {"mlp": (MLP, (16, 32)), "cnn": (SmallCNN, (4, 3, 8, 8)), "transformer": (TransformerBlock, (4, 6, 32))}
OPTIMIZERS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
}

# issue 17's other optimizers, on every model under the inductor (the three above also run under
# capture alone and in the mixed-precision tests)
# RMSprop and Adagrad divide by the root of the squared gradients: an entry whose gradient is
# rounding noise (the attention's) moves by about lr times the noise's sign, so one entry in
# thousands is off by more than float32 rounding after five steps (7e-5 measured with RMSprop at
# lr=1e-2 on the transformer; at 1e-2 capture alone already differs from eager by 1e-3 there, the
# dynamics amplify each rounding): lr=1e-3 for RMSprop, rtol=1e-3, atol=1e-4.
ADAPTIVE_TOL = dict(rtol=1e-3, atol=1e-4)
MORE_OPTIMIZERS = {
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-3, momentum=0.5),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=5e-2),
}
ALL_OPTIMIZERS = {**OPTIMIZERS, **MORE_OPTIMIZERS}


def make_train(opt):
    """The documents' training step, over this test's optimizer."""
    def train(mod, data):
        opt.zero_grad(True)
        pred = mod(data[0])
        loss = torch.nn.CrossEntropyLoss()(pred, data[1])
        loss.backward()
        opt.step()
    return train


def batches(shape, n, device="cpu"):
    return [(torch.randn(shape, device=device), torch.randint(0, 10, (shape[0],), device=device))
            for _ in range(n)]


def assert_same_training_state(model, opt, ref_model, ref_opt, tol=TOL):
    for (name, p), q in zip(ref_model.named_parameters(), model.parameters()):
        torch.testing.assert_close(q, p, **tol, msg=lambda m: f"parameter {name}: {m}")
        torch.testing.assert_close(q.grad, p.grad, **tol, msg=lambda m: f"grad of {name}: {m}")
    for (name, b), c in zip(ref_model.named_buffers(), model.buffers()):
        torch.testing.assert_close(c, b, **tol, msg=lambda m: f"buffer {name}: {m}")
    for p, q in zip(ref_model.parameters(), model.parameters()):
        want, got = ref_opt.state[p], opt.state[q]
        assert set(got) == set(want)
        for key in want:
            torch.testing.assert_close(got[key], want[key], **tol, msg=lambda m: f"optimizer state {key}: {m}")


def run_both(model_name, opt_name, backend, steps=5, make_step=make_train, device="cpu", mode=None,
             tol=TOL, options=None):
    make, shape = MODELS[model_name]
    ref_model = make().to(device)
    model = copy.deepcopy(ref_model)
    make_opt = ALL_OPTIMIZERS[opt_name]
    ref_opt, opt = make_opt(ref_model.parameters()), make_opt(model.parameters())
    step = ember.compile(make_step(opt), backend=backend, mode=mode, options=options)
    ref_step = make_step(ref_opt)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="ember")  # a fallback to eager fails the test
        for data in batches(shape, steps, device):
            ref_step(ref_model, data)
            step(model, data)
    assert_same_training_state(model, opt, ref_model, ref_opt, tol)
    return model, opt, step


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_documents_training_step_matches_eager(model_name, opt_name, backend):
    run_both(model_name, opt_name, backend)


@pytest.mark.parametrize("opt_name", list(MORE_OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_documents_training_step_more_optimizers(model_name, opt_name):
    run_both(model_name, opt_name, "inductor", tol=TOL if opt_name.startswith("sgd") else ADAPTIVE_TOL)


@pytest.mark.parametrize("model_name,opt_name", [("mlp", "adam"), ("mlp", "sgd_nesterov"), ("cnn", "sgd_momentum")])
def test_documents_training_step_through_triton_interpreter(model_name, opt_name):
    """The GPU code path (Triton kernels, the optimizer's horizontally fused) run by Triton's
    interpreter on CPU tensors: forward, backward and update all compiled."""
    *_, step = run_both(model_name, opt_name, "inductor", options={"backend": "triton"})
    report = ember.compile_report(step)
    assert len(report.graphs) == 3  # forward (its backward with it), the first step, the steady step
    for g in report.graphs:  # every kernel is Triton's (the C++ backend's would be `extern "C"`)
        kernels = g.stage("generated source").kernels
        assert kernels and all("tl." in source for _, source in kernels), [name for name, _ in kernels]


@pytest.mark.parametrize("opt_name", list(ALL_OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_explain_one_break_every_model_and_optimizer(model_name, opt_name):
    make, shape = MODELS[model_name]
    model = make()
    report = ember.explain(make_train(ALL_OPTIMIZERS[opt_name](model.parameters())))(model, batches(shape, 1)[0])
    assert report.graph_break_count == 1 and "loss.backward()" in str(report.break_reasons[0]), str(report)
    assert report.graph_count == 2


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_documents_training_step_on_cuda(model_name, opt_name, mode):
    """The same step on the GPU (Triton kernels; with CUDA graphs under reduce-overhead). cuDNN
    convolutions run in TF32 by default in eager and ember alike, hence the wider tolerance."""
    run_both(model_name, opt_name, "inductor", device="cuda", mode=mode, tol=dict(rtol=1e-3, atol=1e-4))


def test_explain_shows_one_break_at_backward():
    """zero_grad, the loss module built in the function and the optimizer step are captured:
    the one break is loss.backward(), which runs the compiled forward's backward graph."""
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    report = ember.explain(make_train(opt))(model, batches((16, 32), 1)[0])
    assert report.graph_break_count == 1, str(report)
    (reason,) = report.break_reasons
    assert reason.kind == "data_dependent" and "loss.backward()" in str(reason), str(report)
    assert report.graph_count == 2
    assert F.cross_entropy in report.ops_per_graph[0]


def compiled_graphs(compiled):
    """The graphs captured for a compiled function (its frames and resume functions)."""
    return compiled._ember_state.session.stats.graphs


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_lr_scheduler_does_not_recompile_each_step(backend):
    """lr changes every step (a Python float in param_groups): it is a graph input, not a
    constant. 20 steps compile the step twice at most (the first creates Adam's state)."""
    ref_model = MLP()
    model = copy.deepcopy(ref_model)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ref_model, model)]
    scheds = [torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8) for o in opts]
    ref_step, step = make_train(opts[0]), ember.compile(make_train(opts[1]), backend=backend)
    _twenty_scheduled_steps(ref_step, step, ref_model, model, scheds)
    assert_same_training_state(model, opts[1], ref_model, opts[0])
    assert opts[1].param_groups[0]["lr"] == opts[0].param_groups[0]["lr"] < 1e-3
    graphs = compiled_graphs(step)
    assert len(graphs) <= 3, f"{len(graphs)} graphs compiled: forward once, the step at most twice"
    assert [b.kind for b in step._ember_state.session.stats.breaks] == ["data_dependent"]  # backward only


def _twenty_scheduled_steps(ref_step, step, ref_model, model, scheds):
    """20 steps of eager's and the compiled train step on the same batches, each scheduler
    stepped after both."""
    for data in batches((16, 32), 20):
        ref_step(ref_model, data)
        step(model, data)
        for s in scheds:
            s.step()


SCHEDULERS = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20),
    # cycles SGD's momentum and Adam's betas[0] too, each step (Note [lifted hyperparameters])
    "one_cycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=20),
}


# every scheduler under the inductor; capture alone with the one that changes more than lr
SCHEDULED = [(s, o, "inductor") for s in SCHEDULERS for o in ("sgd_momentum", "adam")]
SCHEDULED += [("one_cycle", o, "eager") for o in ("sgd_momentum", "adam")]


@pytest.mark.parametrize("sched_name,opt_name,backend", SCHEDULED)
def test_scheduled_step_compiles_at_most_twice(sched_name, opt_name, backend):
    """The documents' step behind StepLR, CosineAnnealingLR and OneCycleLR, 20 steps: the step
    compiles at most twice (its first call creates the optimizer's state; a hyperparameter that
    changed since is a graph input from then on) and the training state equals eager's."""
    ref_model = MLP()
    model = copy.deepcopy(ref_model)
    opts = [OPTIMIZERS[opt_name](m.parameters()) for m in (ref_model, model)]
    scheds = [SCHEDULERS[sched_name](o) for o in opts]
    ref_step, step = make_train(opts[0]), ember.compile(make_train(opts[1]), backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="ember")  # the recompile limit, a fallback
        _twenty_scheduled_steps(ref_step, step, ref_model, model, scheds)
    assert_same_training_state(model, opts[1], ref_model, opts[0])
    assert opts[1].param_groups[0]["lr"] == opts[0].param_groups[0]["lr"]
    graphs = compiled_graphs(step)
    assert len(graphs) <= 3, f"{len(graphs)} graphs compiled: forward once, the step at most twice"
    assert [b.kind for b in step._ember_state.session.stats.breaks] == ["data_dependent"]


def test_lifted_momentum_guards_its_comparisons():
    """SGD branches on `momentum != 0`: a lifted momentum answers from its value and guards the
    answer, so a momentum set to 0 recompiles into the plain SGD step (no buffer update)."""
    ref_model = MLP()
    model = copy.deepcopy(ref_model)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (ref_model, model)]
    ref_step, step = make_train(opts[0]), ember.compile(make_train(opts[1]))
    for i, data in enumerate(batches((16, 32), 6)):
        for o in opts:
            o.param_groups[0]["momentum"] = [0.9, 0.8, 0.7, 0.0, 0.0, 0.6][i]
        ref_step(ref_model, data)
        step(model, data)
        assert_same_training_state(model, opts[1], ref_model, opts[0])


def test_gradient_accumulation_across_calls():
    """Two compiled forward+backward calls accumulate into .grad before one compiled step."""
    def accumulate(mod, data):
        loss = torch.nn.CrossEntropyLoss()(mod(data[0]), data[1]) / 2
        loss.backward()

    ref_model = MLP()
    model = copy.deepcopy(ref_model)
    ref_opt, opt = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ref_model, model))
    compiled = ember.compile(accumulate)

    def update(o):
        o.step()
        o.zero_grad()
    compiled_update = ember.compile(update)
    for i, data in enumerate(batches((16, 32), 6)):
        accumulate(ref_model, data)
        compiled(model, data)
        if i % 2 == 1:
            for p, q in zip(ref_model.parameters(), model.parameters()):
                torch.testing.assert_close(q.grad, p.grad, **TOL)
            update(ref_opt)
            compiled_update(opt)
    for p, q in zip(ref_model.parameters(), model.parameters()):
        torch.testing.assert_close(q, p, **TOL)
        assert q.grad is None and p.grad is None


STEP_OPTIONS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "sgd_nesterov_wd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "sgd_foreach_maximize": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.5, foreach=True, maximize=True),
    "sgd_plain": lambda ps: torch.optim.SGD(ps, lr=0.05),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adam_foreach_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True, amsgrad=True),
    "adam_wd_maximize": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1, maximize=True),
    "adam_tensor_lr": lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2)),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "adamw_amsgrad_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, amsgrad=True, foreach=True),
    # foreach nesterov adds the momentum into p.grad in place (the per-parameter path does not):
    # the compiled step takes eager's path (Note [eager's foreach path] in ember_capture/optim.py)
    "sgd_nesterov_foreach": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, foreach=True),
    "sgd_nesterov_foreach_tensor_lr": lambda ps: torch.optim.SGD(ps, lr=torch.tensor(0.05), momentum=0.9,
                                                                 nesterov=True, foreach=True),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2),
    # _foreach_add_(ps, bufs, alpha=-lr) with the lifted lr (Note [scalar arguments])
    "rmsprop_foreach_momentum_wd": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.9, weight_decay=0.1,
                                                                  foreach=True),
    "rmsprop_centered_maximize_tensor_lr": lambda ps: torch.optim.RMSprop(ps, lr=torch.tensor(1e-2), centered=True,
                                                                          maximize=True),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
    "adagrad_foreach_wd_lr_decay": lambda ps: torch.optim.Adagrad(ps, lr=1e-2, weight_decay=0.1, lr_decay=0.01,
                                                                  foreach=True),
    "adagrad_maximize_tensor_lr": lambda ps: torch.optim.Adagrad(ps, lr=torch.tensor(1e-2), maximize=True),
}


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("name", list(STEP_OPTIONS))
def test_optimizer_step_is_captured_and_matches_eager(name, backend):
    """`opt.step()` alone, compiled: no graph break; after three steps (the first creates the
    state) parameters and state equal eager's."""
    compiled_optimizer_steps(name, backend, "cpu")


def compiled_optimizer_steps(name, backend, device, tol=TOL):
    ref_model = MLP().to(device)
    model = copy.deepcopy(ref_model)
    ref_opt, opt = STEP_OPTIONS[name](ref_model.parameters()), STEP_OPTIONS[name](model.parameters())

    def step(o):
        o.step()
    compiled = ember.compile(step, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="ember")  # a fallback to eager fails the test
        for x, y in batches((16, 32), 3, device):
            for m in (ref_model, model):
                m.zero_grad()
                F.cross_entropy(m(x), y).backward()
            step(ref_opt)
            compiled(opt)
    assert_same_training_state(model, opt, ref_model, ref_opt, tol)  # devices and dtypes too
    stats = compiled._ember_state.session.stats
    assert not stats.breaks, [str(b) for b in stats.breaks]
    assert len(stats.graphs) <= 2  # the first step (creates the state), then the steady step


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adam_foreach_amsgrad", "adam_tensor_lr", "adamw"])
def test_optimizer_step_on_cuda_is_compiled(name):
    """On CUDA, Adam's step counts are 0-d CPU tensors (torch.optim's default): the step's
    graph compiles (it fell back to eager: Note [0-d CPU operands] in ember_prims) and the
    counts stay CPU tensors, as in eager."""
    compiled_optimizer_steps(name, "inductor", "cuda", tol=dict(rtol=1e-4, atol=1e-5))


def test_documents_step_under_reduce_overhead():
    """The documents compile the step with mode="reduce-overhead" (CUDA graphs on a GPU; the
    CPU runs the inductor's code as in the default mode)."""
    ref_model = MLP()
    model = copy.deepcopy(ref_model)
    ref_opt, opt = (torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ref_model, model))
    ref_step, step = make_train(ref_opt), ember.compile(make_train(opt), mode="reduce-overhead")
    for data in batches((16, 32), 4):
        ref_step(ref_model, data)
        step(model, data)
    assert_same_training_state(model, opt, ref_model, ref_opt)
    assert [b.kind for b in step._ember_state.session.stats.breaks] == ["data_dependent"]


def test_fullgraph_step_raises_at_backward():
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    strict = ember.compile(make_train(opt), fullgraph=True)
    with pytest.raises(Exception, match="backward"):
        strict(model, batches((16, 32), 1)[0])
