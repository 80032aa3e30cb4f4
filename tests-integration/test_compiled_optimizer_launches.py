"""Compiled optimizer steps on the Triton path (issues 16 and 17): horizontal fusion (Note
[horizontal fusion] in ember_inductor/horizontal.py) launches the many independent per-parameter
updates together, and the parameters and state still equal eager's.

Run on CPU tensors through the inductor's Triton backend (its kernels under Triton's
interpreter), also through the default backend (C++ on CPU) and backend="eager". Parameters of
several shapes, among them a 0-d one and a non-contiguous one (a transposed view). Three steps,
each with new gradients, are compared with eager (pure elementwise float32: rtol=1e-5,
atol=1e-6). The launches of a step are counted in the wrapper of the graph that runs it: at most
ceil(parameters / COMBO_MAX_PARTS) + 1, where without horizontal fusion there was one or more
per parameter.
"""
import math
import re

import pytest
import torch

import ember
from ember_inductor.horizontal import COMBO_MAX_PARTS

pytestmark = pytest.mark.usefixtures("no_fallback")  # a fallback would make a test vacuous
TOL = dict(rtol=1e-5, atol=1e-6)
TRITON = {"options": {"backend": "triton"}}
BACKENDS = {"triton": TRITON, "inductor": {}, "eager": {"backend": "eager"}}
SHAPES = [(16, 16), (), (7,), (5, 3), (33,), (2, 3, 4), (9,), (4, 4)]
LAUNCH = re.compile(r"^\s+(?:\w+ = )?((?:kernel|combo)\d+)(?:_c)?\(", re.M)


def parameters() -> list[torch.Tensor]:
    ps = [torch.randn(s) for s in SHAPES]
    ps.append(torch.randn(6, 4).t())  # non-contiguous
    return ps


def launches(compiled) -> list[int]:
    """Kernel launches in the wrapper of each graph `compiled` ran, in compile order."""
    report = ember.compile_report(compiled)
    return [len(LAUNCH.findall(g.stage("generated source").text)) for g in report.graphs]


def sgd_momentum(params, grads, bufs, lr: float, momentum: float):
    torch._foreach_mul_(bufs, momentum)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-lr)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_foreach_sgd_step(backend):
    params, bufs = parameters(), [torch.randn(s) for s in SHAPES] + [torch.randn(6, 4).t()]
    ref_params, ref_bufs = [p.clone() for p in params], [b.clone() for b in bufs]
    step = ember.compile(sgd_momentum, **BACKENDS[backend])
    for _ in range(3):
        grads = [torch.randn_like(p) for p in params]
        step(params, grads, bufs, 0.01, 0.9)
        sgd_momentum(ref_params, grads, ref_bufs, 0.01, 0.9)
        for got, want in zip(params + bufs, ref_params + ref_bufs):
            torch.testing.assert_close(got, want, **TOL)
    if backend == "triton":
        n = launches(step)
        # Without horizontal fusion: 18 kernels here (a parameter's and its momentum buffer's
        # update apart). Each buffer's new value is now written where the graph computes it (Note
        # [outputs realized where they are computed]) and its parameter's update, of the same
        # shape, fuses into that kernel: 9 independent kernels, one combined launch (it was two:
        # the parameters' updates, then the buffers' that overwrite what the first read).
        assert n == [1], n


OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": lambda ps, **kw: torch.optim.AdamW(ps, weight_decay=0.1, **kw)}
# (backend, optimizer, foreach): the Triton path for each kind of step; the C++ and eager
# backends once (test_training_step.py runs them on models)
ADAM_CASES = [("triton", "adam", True), ("triton", "adam", False), ("triton", "adamw", True),
              ("inductor", "adam", True), ("eager", "adamw", False)]


@pytest.mark.parametrize("backend,name,foreach", ADAM_CASES,
                         ids=[f"{b}-{n}-{'foreach' if f else 'for-loop'}" for b, n, f in ADAM_CASES])
def test_adam_step(backend, name, foreach):
    make = OPTIMIZERS[name]
    ref = [torch.nn.Parameter(p) for p in parameters()]
    mine = [torch.nn.Parameter(p.detach().clone()) for p in ref]
    opt_ref, opt_mine = make(ref, lr=0.01, foreach=foreach), make(mine, lr=0.01, foreach=foreach)

    def step_fn():
        opt_mine.step()
    step = ember.compile(step_fn, **BACKENDS[backend])
    for _ in range(3):
        for p, q in zip(ref, mine):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        opt_ref.step()
        step()
        for p, q in zip(ref, mine):
            torch.testing.assert_close(q, p, **TOL)
            for key, value in opt_ref.state[p].items():
                torch.testing.assert_close(opt_mine.state[q][key], value, **TOL)
    if backend == "triton":
        # every graph: the first step's (it also creates the state) and the later steps'
        n = launches(step)
        bound = math.ceil(len(ref) / COMBO_MAX_PARTS) + 1  # [1, 2] here; [14, 11] before
        assert n and all(k <= bound for k in n), (n, bound)


def test_combo_kernels_option_off_launches_per_parameter():
    """The bound above means something: without combining, the SGD step launches a kernel per
    parameter of its own shape."""
    params, bufs = parameters(), [torch.randn(s) for s in SHAPES] + [torch.randn(6, 4).t()]
    step = ember.compile(sgd_momentum, options={"backend": "triton", "combo_kernels": False})
    step(params, [torch.randn_like(p) for p in params], bufs, 0.01, 0.9)
    assert launches(step)[0] >= len(set(SHAPES)), launches(step)


def clip_by_total_norm(params):
    """clip_grad_norm_'s arithmetic: per-tensor norms, their norm, every tensor scaled."""
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(params)))
    torch._foreach_mul_(params, torch.clamp(1.0 / (total + 1e-6), max=1.0))
    return total


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_clip_by_total_norm(backend):
    """Per-tensor reductions are combined too. Before, this graph failed on the Triton path (a
    0-d norm loaded under a lane mask by torch.stack's kernel: Triton refuses a block mask on a
    scalar pointer) and ran eagerly."""
    params = parameters()
    ref = [p.clone() for p in params]
    step = ember.compile(clip_by_total_norm, **BACKENDS[backend])
    for _ in range(2):
        torch.testing.assert_close(step(params), clip_by_total_norm(ref), rtol=1e-5, atol=1e-6)
        for got, want in zip(params, ref):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        params = [p * 3 for p in params]
        ref = [p.clone() for p in params]
    if backend == "triton":
        n = launches(step)
        # the norms (9 reductions: one launch), their total, the scaling (9 kernels: one launch);
        # 16 kernels without horizontal fusion
        assert n == [3], n
