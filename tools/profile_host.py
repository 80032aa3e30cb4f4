"""Where the host time of one compiled call goes (inference): cProfile over a few calls of an
ember-compiled tools/bench model, by own time and by cumulative time, plus the host time of a
call (until it returns, the GPU still running) against its wall time. Usage (repository root,
packages on PYTHONPATH):

    python tools/profile_host.py --out DIR --cases resnet50_b32:default,bert_base_b8_s128:default
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_kernels import build  # noqa: E402

import ember  # noqa: E402


def op_tables(model, batches, fn, mode: str, calls: int) -> str:
    """Per variant: torch.profiler's host time per op (self CPU over `calls` calls) and the GPU's busy time."""
    out = []
    variants = {"ember": fn, "tc": torch.compile(model, mode=None if mode == "default" else mode)}
    for label, f in variants.items():
        with torch.no_grad():
            for i in range(4):
                f(*batches[i % 2].args, **batches[i % 2].kwargs)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i in range(calls):
                    f(*batches[i % 2].args, **batches[i % 2].kwargs)
                    torch.cuda.synchronize()
        busy = sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        out.append(f"== {label}: GPU busy {busy / calls / 1e3:.3f} ms/call; host time per op, {calls} calls")
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70)
        out.append(table)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="resnet50_b1:reduce-overhead,resnet50_b32:default,bert_base_b8_s128:default")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ops", action="store_true",
                    help="also torch.profiler's host time per op (self CPU), ember and torch.compile")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    summary = ["| case | host ms/call (returns) | wall ms/call |", "|:--|--:|--:|"]
    for case in a.cases.split(","):
        name, mode = case.split(":")
        model, batches = build(name)
        fn = ember.compile(model, mode=None if mode == "default" else mode)
        with torch.no_grad():
            for i in range(6):
                fn(*batches[i % 2].args, **batches[i % 2].kwargs)
            torch.cuda.synchronize()
            host, wall = [], []
            for i in range(a.calls):
                b = batches[i % 2]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(*b.args, **b.kwargs)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                host.append((t1 - t0) * 1e3)
                wall.append((time.perf_counter() - t0) * 1e3)
            prof = cProfile.Profile()
            for i in range(a.calls):
                b = batches[i % 2]
                prof.enable()
                fn(*b.args, **b.kwargs)
                prof.disable()
                torch.cuda.synchronize()
        if a.ops:
            (a.out / f"ops_{name}.{mode}.txt").write_text(op_tables(model, batches, fn, mode, a.calls))
        summary.append(f"| {name} {mode} | {statistics.median(host):.3f} | {statistics.median(wall):.3f} |")
        print(summary[-1], flush=True)
        text = io.StringIO()
        st = pstats.Stats(prof, stream=text)
        text.write(f"# {name} {mode}: {a.calls} calls\n")
        st.sort_stats("tottime").print_stats(35)
        st.sort_stats("cumulative").print_stats(45)
        (a.out / f"host_{name}.{mode}.txt").write_text(text.getvalue())
        del fn, model, batches
        torch.cuda.empty_cache()
    (a.out / "host_summary.md").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
