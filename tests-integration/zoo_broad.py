"""The bench's gpu-broad suite (tools/bench/models.py) through ember on the CPU, at its tiny size
(Note [broad sizes]: the same architectures, small): before a model is timed on the GPU, this
shows that ember computes what eager computes for it.

    python tests-integration/zoo_broad.py [--only NAME,...] [--backend cpp|triton] [--phases inference,training]

Per model and phase, over two calls with fresh inputs (the workload's own batches and loss):
inference (eval(), no_grad: every output) and a training step (train(), dropout at 0: the loss and
every parameter's gradient), each against eager float32 and, for a training step, against eager
float64 beside eager's own float32 error (zoo.py's Check and tolerances: zoo.TOL, zoo.within).
It prints ember's graphs, breaks and recompiles, and any fallback warning (a graph that ran
eagerly fails the check). `--backend triton` compiles Triton kernels, interpreted on the CPU
(TRITON_INTERPRET=1). tests-integration/test_zoo_broad.py runs the same checks as a test (slow;
skipped without torchvision, timm and transformers).
"""
from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import os
import pathlib
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

from bench import models  # noqa: E402
from zoo import TOL, Check, _fallbacks, _worst, flat_tensors, within  # noqa: E402
from zoo_vision import worst  # noqa: E402

NAMES = models.SUITES["gpu-broad"]
CPU = torch.device("cpu")


def available(name: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in models.MODELS[name].requires)


def build(name: str, dtype=torch.float32) -> models.Workload:
    """The tiny workload; a weight matrix initialised to zeros (torchvision's ViT head) gets small
    random values, or every output would be its bias and every gradient before it 0, whatever
    the compiled body computed."""
    torch.manual_seed(0)
    work = models.BROAD_TINY[name](CPU, dtype)
    if isinstance(work.fn, torch.nn.Module):
        with torch.no_grad():
            for p in work.fn.parameters():
                if p.dim() > 1 and not p.any():
                    p.normal_(0, 0.02)
    return work


def _batch(work: models.Workload, phase: str, seed: int, dtype=torch.float32) -> models.Batch:
    b = work.make_batch(torch.Generator().manual_seed(seed), phase)
    conv = (lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
    return models.Batch(tuple(map(conv, b.args)), {k: conv(v) for k, v in b.kwargs.items()}, conv(b.target))


def inference_check(name: str, compile_fn) -> Check:
    work = build(name)
    model = work.fn.eval()
    compiled = compile_fn(model)
    check = Check()
    with torch.no_grad(), _fallbacks(check):
        for call in range(2):
            b = _batch(work, "infer", 100 + call)
            want = flat_tensors(model(*b.args, **b.kwargs))
            got = flat_tensors(compiled(*b.args, **b.kwargs))
            check.error = max(check.error, worst(got, want))
    return check.count(compiled)


def _step(model, fn, loss_fn, b) -> list:
    model.zero_grad(set_to_none=True)
    loss = loss_fn(fn(*b.args, **b.kwargs), b)
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


def training_check(name: str, compile_fn) -> Check:
    work = build(name)
    eager = work.fn.train()
    ref64, mine = copy.deepcopy(eager).double(), copy.deepcopy(eager)
    compiled = compile_fn(mine)
    check = Check(eager_f64=0.0, compiled_f64=0.0)
    with _fallbacks(check):
        for call in range(2):
            b = _batch(work, "train", 200 + call)
            want, got = _step(eager, eager, work.loss, b), _step(mine, compiled, work.loss, b)
            ref = _step(ref64, ref64, work.loss, _batch(work, "train", 200 + call, torch.float64))
            check.error = max(check.error, _worst(got, want))
            check.eager_f64 = max(check.eager_f64, _worst(want, ref))
            check.compiled_f64 = max(check.compiled_f64, _worst(got, ref))
    return check.count(compiled)


CHECKS = {"inference": inference_check, "training": training_check}


def run_check(name: str, phase: str, inductor_backend: str = "cpp") -> Check:
    import ember
    ember.reset()
    options = {"backend": inductor_backend} if inductor_backend != "cpp" else None
    return CHECKS[phase](name, functools.partial(ember.compile, options=options))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="", help="comma-separated model names")
    p.add_argument("--backend", default="cpp", choices=["cpp", "triton"])
    p.add_argument("--phases", default="inference,training")
    args = p.parse_args()
    if args.backend == "triton":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    only = set(filter(None, args.only.split(",")))
    for name in NAMES:
        if (only and name not in only) or not available(name):
            continue
        for phase in args.phases.split(","):
            t0 = time.perf_counter()
            try:
                c = run_check(name, phase, args.backend)
                verdict = "ok" if within(c, "inductor", phase) else "FAIL"
                f64 = f" float64: eager {c.eager_f64:.1e} ember {c.compiled_f64:.1e}" if c.eager_f64 is not None else ""
                detail = (f"error {c.error:.1e} (tol {TOL['inductor', phase]:.0e}){f64} graphs {c.graphs} "
                          f"breaks {len(c.breaks)} recompiles {c.recompiles} fallbacks {len(c.fallbacks)}")
                extra = [f"      break: {b[:300]}" for b in c.breaks] + [f"      fallback: {f[:500]}" for f in c.fallbacks]
            except Exception as e:  # one check's crash is one line
                verdict, detail, extra = "CRASH", f"{type(e).__name__}: {e}"[:500], []
            print(f"{name:28s} {args.backend:6s} {phase:9s} {verdict:5s} {detail} ({time.perf_counter() - t0:.0f}s)",
                  flush=True)
            for line in extra:
                print(line, flush=True)


if __name__ == "__main__":
    main()
