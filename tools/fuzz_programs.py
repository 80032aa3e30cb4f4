"""Differential fuzzing of ember.compile against eager on random tensor programs (long runs).

    python tools/fuzz_programs.py --seeds 200 --start 0            # C++ backend
    python tools/fuzz_programs.py --seeds 20 --triton               # Triton, interpreted on the CPU
    python tools/fuzz_programs.py --seeds 1 --start 17 --minimize   # shrink one failing program
    python tools/fuzz_programs.py --seeds 50 --start 13000 --train  # every float input requires grad
    python tools/fuzz_programs.py --seeds 50 --start 20000          # seeds >= 20000: extended op families

Prints one line per program that did not pass, then a tally by outcome (ok, mismatch, crash,
fallback = ember warned and ran eagerly, eager_error = fresh inputs made eager raise). The
generator and checker are tests-integration/program_fuzz.py.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests-integration"))
import program_fuzz  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--triton", action="store_true", help="options={'backend': 'triton'} (interpreted)")
    ap.add_argument("--minimize", action="store_true", help="shrink and print each failing program")
    ap.add_argument("--show", action="store_true", help="print each failing program")
    ap.add_argument("--train", action="store_true", help="every floating input requires grad (training mode)")
    args = ap.parse_args()
    if args.triton:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    options = {"backend": "triton"} if args.triton else None
    tally: collections.Counter = collections.Counter()
    t0 = time.time()
    for seed in range(args.start, args.start + args.seeds):
        program = program_fuzz.generate(seed, train=args.train)
        try:
            out = program_fuzz.check(program, seed, options)
        except Exception as exc:  # noqa: BLE001 - the checker itself failed: report and go on
            out = program_fuzz.Outcome("harness_error", f"{type(exc).__name__}: {exc}")
        tally[out.kind] += 1
        if out.kind != "ok":
            print(f"seed {seed}: {out.kind}: {out.detail[:300]}", flush=True)
            if out.kind in ("mismatch", "crash") and args.minimize:
                small = program_fuzz.minimize(program, seed, options, out.kind)
                print(small.describe(), flush=True)
                print("  ->", program_fuzz.check(small, seed, options).detail[:500], flush=True)
            elif args.show:
                print(program.describe(), flush=True)
    print(f"{sum(tally.values())} programs in {time.time() - t0:.0f}s: {dict(tally)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
