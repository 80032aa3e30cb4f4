"""torch.optim and torch.nn layers built inside a captured function (Note [optimizer steps]).

Each case runs eagerly and captured on twins of one model, over several calls, and compares
parameters, gradients and optimizer state; graphs are checked by verify_graph (Recorder).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import ember_capture
from capture_helpers import Recorder


def twins(make_opt):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    twin = copy.deepcopy(model)
    return (model, make_opt(model.parameters())), (twin, make_opt(twin.parameters()))


def assert_same_state(a, b, tol=None):
    tol = tol or dict(rtol=1e-5, atol=1e-6)
    (model, opt), (twin, twin_opt) = a, b
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, **tol)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad)
        assert set(opt.state[p]) == set(twin_opt.state[q])
        for k, v in opt.state[p].items():
            torch.testing.assert_close(twin_opt.state[q][k], v, **tol)


def test_loss_module_built_in_the_function_is_captured():
    rec = Recorder()

    def loss_of(pred, y):
        return torch.nn.CrossEntropyLoss(label_smoothing=0.1)(pred, y) + torch.nn.ReLU()(pred).mean()

    captured = ember_capture.capture(loss_of, rec)
    for _ in range(3):
        pred, y = torch.randn(6, 4), torch.randint(0, 4, (6,))
        torch.testing.assert_close(captured(pred, y), loss_of(pred, y))
    assert len(rec.graphs) == 1 and F.cross_entropy in rec.ops(0)
    assert ember_capture.explain(loss_of, pred, y).graph_break_count == 0


def test_module_with_parameters_built_in_the_function_breaks_and_stays_right():
    def fresh_layer(x):
        torch.manual_seed(1)
        return torch.nn.Linear(4, 2)(x)

    report = ember_capture.explain(fresh_layer, torch.randn(3, 4))
    assert report.graph_break_count >= 1
    captured = ember_capture.capture(fresh_layer, Recorder())
    x = torch.randn(3, 4)
    torch.testing.assert_close(captured(x), fresh_layer(x))


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_is_captured(set_to_none):
    eager, ours = twins(lambda ps: torch.optim.SGD(ps, lr=0.1))

    def step(model, opt, x):
        opt.zero_grad(set_to_none)
        return model(x).square().mean()

    rec = Recorder()
    captured = ember_capture.capture(step, rec)
    for _ in range(3):
        x = torch.randn(5, 8)
        step(*eager, x).backward()
        captured(*ours, x).backward()
        assert_same_state(eager, ours)
    assert ember_capture.explain(step, *ours, x).graph_break_count == 0


OPTIMIZERS = {
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "adam_amsgrad_maximize": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, maximize=True),
    "adamw_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_step_is_one_graph_with_state_as_inputs(name):
    eager, ours = twins(OPTIMIZERS[name])
    rec = Recorder()

    def step(opt):
        opt.step()

    captured = ember_capture.capture(step, rec)
    for _ in range(4):
        x = torch.randn(5, 8)
        for model, opt in (eager, ours):
            model.zero_grad()
            model(x).square().mean().backward()
        step(eager[1])
        captured(ours[1])
        assert_same_state(eager, ours)
    assert len(rec.graphs) == 2  # the first step creates the state (installed after its graph)
    sources = [n.meta["source"] for n in rec.graphs[1].graph.nodes if n.op == "placeholder"]
    assert any(".state.get(" in s for s in sources) and any("['lr']" in s for s in sources)


@pytest.mark.parametrize("make", [lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.9, 0.999))],
                         ids=["sgd_momentum", "adam_betas"])
def test_step_changes_that_are_not_lifted_recompile_once(make):
    """Hyperparameters other than lr are guarded by value until one changes; from the recompile
    that change causes, it is an input (Note [lifted hyperparameters]), as lr (a float) always is.
    SGD's `if momentum != 0` is guarded: momentum 0 is one more recompile."""
    eager, ours = twins(make)
    rec = Recorder()
    captured = ember_capture.capture(lambda opt: opt.step(), rec)
    momenta = [None, None, None, 0.5, 0.6, 0.7, 0.8, 0.0, 0.0]
    for i, momentum in enumerate(momenta):
        x = torch.randn(5, 8)
        for model, opt in (eager, ours):
            model.zero_grad()
            model(x).square().mean().backward()
            group = opt.param_groups[0]
            group["lr"] = 0.1 / (i + 1)
            if momentum is not None:
                if "betas" in group:
                    group["betas"] = (momentum, 0.999)
                else:
                    group["momentum"] = momentum
        eager[1].step()
        captured(ours[1])
        # a lifted beta1 is a float64 tensor: `1 - beta1` reaches lerp_ as a tensor, not a double
        # rounded by the kernel, which moves exp_avg by an ulp (rtol=1e-4, atol=1e-5)
        assert_same_state(eager, ours, dict(rtol=1e-4, atol=1e-5))
        graphs = [1, 2, 2, 3, 3, 3, 3][i] if i < 7 else None
        if graphs is not None:
            assert len(rec.graphs) == graphs, (i, len(rec.graphs))
    # first step, steady step, the first new momentum; SGD: `momentum != 0` turned False
    assert len(rec.graphs) == (4 if "momentum" in eager[1].param_groups[0] else 3)


def test_optimizer_with_hooks_or_closure_runs_natively():
    eager, ours = twins(lambda ps: torch.optim.SGD(ps, lr=0.1))
    calls = []
    ours[1].register_step_post_hook(lambda *a: calls.append(1))
    eager[1].register_step_post_hook(lambda *a: None)
    captured = ember_capture.capture(lambda opt: opt.step(), Recorder())
    x = torch.randn(2, 8)
    for model, opt in (eager, ours):
        model(x).sum().backward()
    eager[1].step()
    captured(ours[1])
    assert calls == [1]
    assert_same_state(eager, ours)
    report = ember_capture.explain(lambda opt: opt.step(), ours[1])
    assert [r.kind for r in report.break_reasons] == ["optimizer_hooks"]


class HalvingSGD(torch.optim.SGD):
    """A user optimizer whose step reads tensor data (`.item()`): not recordable."""

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad.abs().max().item() > 0.5:
                    p.grad.mul_(0.5)
        return super().step()


def test_optimizer_step_that_needs_tensor_data_breaks_and_stays_right():
    eager, ours = twins(lambda ps: HalvingSGD(ps, lr=0.1, momentum=0.9))
    captured = ember_capture.capture(lambda opt: opt.step(), Recorder())
    for _ in range(3):
        x = torch.randn(5, 8) * 4
        for model, opt in (eager, ours):
            model.zero_grad()
            model(x).square().mean().backward()
        eager[1].step()
        captured(ours[1])
        assert_same_state(eager, ours)
    report = ember_capture.explain(lambda opt: opt.step(), ours[1])
    assert report.graph_break_count == 1 and report.break_reasons[0].kind == "data_dependent"


def test_is_compiling_answers_true_under_capture():
    """As under torch.compile: torch.compiler.is_compiling() and the deprecated
    torch._utils.is_compiling() are True in captured code (no graph break)."""
    def f(x):
        if torch.compiler.is_compiling() and torch._utils.is_compiling():
            return x + 1
        return x - 1

    x = torch.randn(3)
    torch.testing.assert_close(ember_capture.capture(f, Recorder())(x), x + 1)
    assert ember_capture.explain(f, x).graph_break_count == 0
