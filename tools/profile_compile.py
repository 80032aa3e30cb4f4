"""Where a cold compile's time goes: cProfile over the first call of an ember-compiled
tools/bench model (inference), by cumulative and by own time, with fresh caches. Usage
(repository root, packages on PYTHONPATH, a CUDA device):

    python tools/profile_compile.py --out DIR --model gpt2_b4_s512 --mode max-autotune-no-cudagraphs
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2_b4_s512")
    ap.add_argument("--mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="ember-cold-")  # cold: empty ember and Triton caches
    os.environ["EMBER_CACHE_DIR"] = cache
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    import ember
    from profile_kernels import build
    model, batches = build(args.model)
    fn = ember.compile(model, mode=None if args.mode == "default" else args.mode)
    prof = cProfile.Profile()
    start = time.perf_counter()
    with torch.no_grad():
        prof.enable()
        fn(*batches[0].args, **batches[0].kwargs)
        torch.cuda.synchronize()
        prof.disable()
    seconds = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    text.write(f"{args.model} {args.mode}: first call {seconds:.1f} s\n")
    for key in ("cumulative", "tottime"):
        pstats.Stats(prof, stream=text).sort_stats(key).print_stats(args.top)
    (args.out / f"compile_{args.model}_{args.mode}.txt").write_text(text.getvalue())
    print(text.getvalue()[:6000])


if __name__ == "__main__":
    main()
