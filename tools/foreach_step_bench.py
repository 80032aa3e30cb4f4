"""A foreach SGD-momentum step (three in-place foreach ops over many parameters) compiled by ember
and by torch.compile, against eager, on CUDA (docs/performance.md, "a foreach SGD step compiled").

    python tools/foreach_step_bench.py

Per case: median milliseconds of one step (50 calls after 5 warm-up calls) for eager, ember and
torch.compile (default mode), the largest difference of ember's parameters from eager's after the
first step, and any warning ember gave (a fallback would say so).
"""
from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for src in sorted((ROOT / "packages").glob("*/src")):
    sys.path.insert(0, str(src))

import ember  # noqa: E402

CASES = [(50, (1024, 1024)), (200, (256, 256))]


def step(params, grads, bufs, lr: float, momentum: float):
    torch._foreach_mul_(bufs, momentum)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-lr)


def timed(fn, args, reps: int = 50) -> float:
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    for n, shape in CASES:
        params, grads, bufs = ([torch.randn(shape, device="cuda") for _ in range(n)] for _ in range(3))
        ref_params, ref_bufs = [t.clone() for t in params], [t.clone() for t in bufs]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = ember.compile(step)
            compiled(params, grads, bufs, 0.01, 0.9)
        step(ref_params, grads, ref_bufs, 0.01, 0.9)
        error = max((a - b).abs().max().item() for a, b in zip(params, ref_params))
        args = (params, grads, bufs, 0.01, 0.9)
        row = {"parameters": f"{n} of {shape[0]}x{shape[1]}", "eager_ms": timed(step, args),
               "ember_ms": timed(compiled, args), "tc_ms": timed(torch.compile(step), args),
               "max_error_first_step": error, "ember_warnings": [str(w.message)[:120] for w in caught]}
        print(row, flush=True)


if __name__ == "__main__":
    main()
