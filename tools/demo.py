"""The main job: compile a small model on this machine's default device, check it, time it.

    hatch run demo                 # default backend (inductor), default device
    hatch run demo -- --backend aot_eager --device cpu

Prints the compile time (first call), eager and compiled per-call medians, and the largest
difference from eager. Exits non-zero if the compiled result disagrees with eager.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import torch

import ember

# Tolerances per dtype for comparing compiled output with eager.
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float16: dict(rtol=1e-2, atol=1e-3),
              torch.bfloat16: dict(rtol=2e-2, atol=1e-2)}


class Block(torch.nn.Module):
    """A small MLP block with LayerNorm and GELU: elementwise and normalization work to fuse."""

    def __init__(self, width: int = 256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return x + torch.sigmoid(h) * h


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, x, device: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn(x)
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--mode", default=None, help="e.g. reduce-overhead (CUDA graphs)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = Block().to(args.device).eval()
    compiled = ember.compile(model, backend=args.backend, mode=args.mode)
    x = torch.randn(args.batch, 256, device=args.device)

    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sync(args.device)
        t0 = time.perf_counter()
        out = compiled(x)
        sync(args.device)
        compile_s = time.perf_counter() - t0
        for w in caught:
            print(f"warning: {w.message}")
        fresh = torch.randn_like(x)  # check on inputs the compile did not see
        expected, got = model(fresh), compiled(fresh)
        ok = torch.allclose(got, expected, **TOLERANCES[x.dtype])
        max_diff = (got - expected).abs().max().item()
        for _ in range(5):
            model(x), compiled(x)
        eager_ms = median_ms(model, x, args.device, args.reps)
        ember_ms = median_ms(compiled, x, args.device, args.reps)

    print(f"ember {ember.__version__}, torch {torch.__version__}, device {args.device}, "
          f"backend {args.backend}, mode {args.mode}")
    print(f"model: LayerNorm -> Linear(256, 1024) -> GELU -> Linear(1024, 256) -> sigmoid gate, batch {args.batch}")
    print(f"compile (first call): {compile_s:.2f} s")
    print(f"eager:    {eager_ms:.3f} ms/call (median of {args.reps})")
    print(f"ember:    {ember_ms:.3f} ms/call (median of {args.reps}); speedup {eager_ms / ember_ms:.2f}x")
    print(f"max |ember - eager| = {max_diff:.2e}: {'OK' if ok else 'MISMATCH'} "
          f"(rtol={TOLERANCES[x.dtype]['rtol']}, atol={TOLERANCES[x.dtype]['atol']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
