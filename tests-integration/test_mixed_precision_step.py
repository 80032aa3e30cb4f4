"""Mixed precision in a compiled training step (issue 17): a CPU bfloat16 autocast region and a
``torch.amp.GradScaler`` in the step, compiled with backend="eager" (capture alone),
"aot_eager" and "inductor" (C++), against the same step run eagerly.

GradScaler is inlined and its decision to skip ``optimizer.step()`` on inf/NaN gradients is a
masked update in the graph, not a break (Note [GradScaler steps] in ember_capture/amp.py): the
step breaks once, at ``backward()``. One step of each run makes every gradient non-finite (the
loss times 1e38, a tensor argument), so the scaler skips the optimizer and backs off its scale.

Tolerances. Exact, under every backend: the scaler's scale (float32) and growth tracker
(int32), which hold powers of two and counts; the optimizer's step counts; which gradients are
non-finite; and a skipped step, which leaves every parameter and state tensor bit for bit as it
was. The float32 parameters, gradients, buffers and optimizer state come from a bfloat16
forward, and are compared normwise (|got - want| / |want| per tensor, finite entries): a
compiled update that differs from eager's in the last float32 bit (Adam's bias correction from
a tensor step count) moves a weight across a bfloat16 rounding boundary in the next forward,
and Adam turns that gradient noise into steps of up to lr in near-zero-gradient entries, so an
elementwise tolerance would be arbitrary. Capture alone and aot_eager run eager's bfloat16
kernels: 1e-2 (measured at most 2.9e-3, the MLP's AdamW gradient). The inductor's C++ bfloat16
matmuls round differently from oneDNN's (one bfloat16 ulp in the activations): 2.5e-1
(measured at most 1.1e-1, the same gradient; 2e-3 on the CNN).
"""
import copy
import pathlib
import sys
import warnings
from collections import defaultdict

import pytest
import torch
import torch.nn.functional as F

import ember

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_training_step import OPTIMIZERS, SmallCNN, compiled_graphs  # noqa: E402
from test_training import MLP  # noqa: E402

BACKENDS = ["eager", "aot_eager", "inductor"]
MODELS = {"mlp": (MLP, (16, 32)), "cnn": (SmallCNN, (4, 3, 8, 8))}
NORMWISE = {"eager": 1e-2, "aot_eager": 1e-2, "inductor": 2.5e-1}
HUGE = 1e38  # the loss times this times the scale overflows float32: every gradient is inf or NaN


def make_step(mod, opt, scaler):
    """The step of the issue, with the loss multiplied by ``boost`` (a 0-d tensor: 1, or HUGE)."""
    def step(x, y, boost):
        opt.zero_grad(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(mod(x).float(), y) * boost
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


class Run:
    """A model, its optimizer, its GradScaler and the step over them."""

    def __init__(self, model, opt_name, enabled=True, growth_interval=2):
        self.model = model
        self.opt = OPTIMIZERS[opt_name](model.parameters())
        self.scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval, enabled=enabled)
        self.step = make_step(self.model, self.opt, self.scaler)


def pair(model_name, opt_name, backend, **scaler_options):
    make, shape = MODELS[model_name]
    ref = Run(make(), opt_name, **scaler_options)
    run = Run(copy.deepcopy(ref.model), opt_name, **scaler_options)
    run.step = ember.compile(run.step, backend=backend)
    return ref, run, shape


def data(shape, n):
    return [(torch.randn(shape), torch.randint(0, 10, (shape[0],))) for _ in range(n)]


def train_both(ref, run, shape, steps, inf_steps=()):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="ember")  # a fallback to eager fails the test
        for i, (x, y) in enumerate(data(shape, steps)):
            boost = torch.tensor(HUGE if i in inf_steps else 1.0)
            ref.step(x, y, boost)
            before = snapshot(run)
            run.step(x, y, boost)
            if i in inf_steps:  # skipped: parameters and optimizer state unchanged, bit for bit
                after = snapshot(run)
                assert list(after) == list(before)
                for what, value in before.items():
                    assert_near(after[what], value, 0, f"{what} after the skipped step {i}")
                assert not any(torch.isfinite(p.grad).all() for p in run.model.parameters())


def assert_near(got, want, tol, what):
    """Exact for integer tensors; for floating ones, the same non-finite entries and a normwise
    relative error of the finite ones at most ``tol`` (0: bit for bit)."""
    assert got.dtype == want.dtype and got.shape == want.shape and got.device == want.device, what
    if not want.is_floating_point() or tol == 0:
        assert torch.equal(got.nan_to_num(), want.nan_to_num()) and torch.equal(got.isnan(), want.isnan()), what
        return
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), finite), f"{what}: other non-finite entries"
    diff, ref = (got[finite] - want[finite]).double().norm(), want[finite].double().norm()
    assert diff <= tol * ref, f"{what}: normwise relative error {diff / ref:.2e} > {tol:.0e}"


def training_state(run):
    """Every tensor the step changes: parameters, gradients, buffers, optimizer state."""
    out = {}
    for name, p in run.model.named_parameters():
        out[name] = p
        if p.grad is not None:
            out[f"grad of {name}"] = p.grad
        for key, value in run.opt.state.get(p, {}).items():
            out[f"optimizer state {key} of {name}"] = value
    for name, b in run.model.named_buffers():
        out[name] = b
    return out


def assert_same_state(run, ref, tol):
    got, want = training_state(run), training_state(ref)
    assert list(got) == list(want)
    for what in want:
        exact = what.startswith("optimizer state step")
        assert_near(got[what], want[what], 0 if exact else tol, what)
    assert run.scaler.is_enabled() == ref.scaler.is_enabled()
    if not ref.scaler.is_enabled():
        return
    assert_near(run.scaler._scale, ref.scaler._scale, 0, "scale")
    assert_near(run.scaler._growth_tracker, ref.scaler._growth_tracker, 0, "growth tracker")
    for s in (ref.scaler, run.scaler):  # update() left a fresh per-optimizer state
        assert type(s._per_optimizer_states) is defaultdict and not s._per_optimizer_states
    assert run.scaler._per_optimizer_states.default_factory is ref.scaler._per_optimizer_states.default_factory


def snapshot(run):
    """Parameters and optimizer state (a skipped step leaves them; the forward moved the buffers)."""
    buffers = dict(run.model.named_buffers())
    return {k: v.clone() for k, v in training_state(run).items() if not k.startswith("grad") and k not in buffers}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_scaled_step_matches_eager(model_name, opt_name, backend):
    """Five good steps and one whose gradients overflow (the third): the scale grows every two
    good steps and halves at the overflow, whose optimizer step is skipped."""
    ref, run, shape = pair(model_name, opt_name, backend)
    train_both(ref, run, shape, steps=6, inf_steps={2})
    assert run.scaler.get_scale() == ref.scaler.get_scale() == 2.0 ** 16 * 2 * 0.5 * 2
    assert_same_state(run, ref, NORMWISE[backend])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam"])
def test_skipped_first_step_creates_no_state(opt_name, backend):
    """The first step overflows: eager never calls optimizer.step(), so the optimizer has no
    state (no momentum buffer, no Adam step count) until the next step creates it."""
    ref, run, shape = pair("mlp", opt_name, backend)
    train_both(ref, run, shape, steps=1, inf_steps={0})
    assert not ref.opt.state and not run.opt.state
    assert_same_state(run, ref, NORMWISE[backend])
    train_both(ref, run, shape, steps=3, inf_steps={1})
    assert ref.opt.state and run.opt.state
    assert_same_state(run, ref, NORMWISE[backend])


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_scaler(backend):
    """GradScaler(enabled=False): scale() returns the loss, step() is optimizer.step()."""
    ref, run, shape = pair("cnn", "adamw", backend, enabled=False)
    train_both(ref, run, shape, steps=5)
    assert_same_state(run, ref, NORMWISE[backend])
    assert [b.kind for b in run.step._ember_state.session.stats.breaks] == ["data_dependent"]


def test_explain_shows_one_break_at_backward():
    """scale, unscale_, the skip decision, the optimizer step and update are captured: the one
    break is backward() (before: GradScaler.scale, .step and .update were three more)."""
    ref = Run(MLP(), "adam")
    x, y = data((16, 32), 1)[0]
    report = ember.explain(ref.step)(x, y, torch.tensor(1.0))
    assert report.graph_break_count == 1, str(report)
    (reason,) = report.break_reasons
    assert reason.kind == "data_dependent" and "backward()" in str(reason), str(report)
    assert report.graph_count == 2
    assert torch._amp_update_scale_ in report.ops_per_graph[1]
    assert torch.where in report.ops_per_graph[1]  # the skippable optimizer step


@pytest.mark.parametrize("backend", BACKENDS)
def test_changing_scale_does_not_recompile(backend):
    """Ten steps with growth_interval=1 (the scale doubles at every good step and halves at
    the two overflows): the scale is a tensor, so after the first two calls (the first makes
    the scaler's scale and Adam's state; the second finds them made) nothing recompiles."""
    ref, run, shape = pair("mlp", "adam", backend, growth_interval=1)
    stats, counts = run.step._ember_state.session.stats, []
    for i in range(10):
        train_both(ref, run, shape, steps=1, inf_steps={0} if i in (4, 7) else ())
        counts.append((len(stats.graphs), stats.recompiles))
    assert run.scaler.get_scale() == ref.scaler.get_scale() == 2.0 ** (16 + 8 - 2)
    assert_same_state(run, ref, NORMWISE[backend])
    assert counts[2:] == [counts[1]] * 8, counts  # (graphs, recompiles) per step: none after the second
    assert counts[1] == (4, 2), counts  # the forward and the step after backward, each compiled twice
    assert [b.kind for b in stats.breaks] == ["data_dependent"] * 2  # backward, in each trace of the frame
    assert all("backward()" in str(b) for b in stats.breaks)


@pytest.mark.parametrize("model_name", list(MODELS))
def test_inductor_bfloat16_step_as_close_to_float64_as_eager(model_name):
    """What the loose normwise bound above stands on: one bfloat16-autocast forward and backward
    through the inductor is as close to a float64 reference as eager's own bfloat16 step is
    (measured 3.6e-3 against eager's 3.4e-3 on the MLP): the compiled steps differ from eager's
    by rounding, which Adam and the scaler's steps then amplify, not by a wrong value."""
    make, shape = MODELS[model_name]
    model = make()
    x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))

    def step(mod, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(mod(x).float(), y)
        loss.backward()

    def grads(fn, mod, dtype=torch.float32):
        mod = copy.deepcopy(mod).to(dtype)
        fn(mod, x.to(dtype), y)
        return [p.grad.double() for p in mod.parameters()]

    exact = grads(lambda m, a, b: F.cross_entropy(m(a), b).backward(), model, torch.float64)
    eager = grads(step, model)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="ember")  # a fallback to eager would make it vacuous
        compiled = grads(ember.compile(step), model)
    for e, c, r in zip(eager, compiled, exact):
        err_eager, err_compiled = ((e - r).norm() / r.norm()).item(), ((c - r).norm() / r.norm()).item()
        assert err_compiled <= 1.5 * err_eager + 1e-6, (err_compiled, err_eager)
