"""GPU kernel time per kernel name, eager vs ember vs torch.compile, side by side (inference).

For each case (a tools/bench model and a mode) every variant is compiled, warmed up, timed (CUDA
events around each call from an idle GPU, median) and then profiled with torch.profiler over a
few calls; the CUDA kernels are summed by name. Written under --out: `CASE.md` (the top kernels
of each variant, ms per call and launches per call) and `summary.md` (per variant: wall ms per
call, GPU busy ms per call, kernels per call). Usage (repository root, packages on PYTHONPATH):

    python tools/profile_kernels.py --out DIR \
        --cases resnet50_b1:reduce-overhead,resnet50_b32:default,bert_base_b8_s128:default

`--output-code` also writes ember's generated code (EMBER_LOGS=output_code) to
`CASE.ember_code.txt`.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench.models import MODELS  # noqa: E402

import ember  # noqa: E402


def build(name: str):
    work = MODELS[name].build(torch.device("cuda"), torch.float32)
    gen = torch.Generator(device="cuda").manual_seed(0)
    batches = [work.make_batch(gen, "infer") for _ in range(2)]
    work.fn.eval()
    return work.fn, batches


def variant_fn(model, variant: str, mode: str):
    if variant == "eager":
        return model
    if variant == "ember":
        return ember.compile(model, mode=None if mode == "default" else mode)
    return torch.compile(model, mode=None if mode == "default" else mode)


def kernel_table(prof, calls: int):
    per_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        row = per_name[e.name]
        row[0] += e.device_time / 1e3 / calls  # ms per call
        row[1] += 1 / calls
    return dict(per_name)


def run_variant(model, batches, variant: str, mode: str, calls: int, code_path: Path | None):
    buf = io.StringIO() if code_path is not None else None
    if buf is not None:
        os.environ["EMBER_LOGS"] = "output_code,fallback"
    fn = variant_fn(model, variant, mode)
    t0 = time.perf_counter()
    with torch.no_grad(), (contextlib.redirect_stderr(buf) if buf is not None else contextlib.nullcontext()):
        fn(*batches[0].args, **batches[0].kwargs)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        if buf is not None:
            os.environ.pop("EMBER_LOGS", None)
            code_path.write_text(buf.getvalue())
        for i in range(5):
            b = batches[i % 2]
            fn(*b.args, **b.kwargs)
        times = []
        for i in range(30):
            b = batches[i % 2]
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(*b.args, **b.kwargs)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for i in range(calls):
                b = batches[i % 2]
                fn(*b.args, **b.kwargs)
            torch.cuda.synchronize()
    kernels = kernel_table(prof, calls)
    return {"first_s": first, "ms": statistics.median(times), "min_ms": min(times),
            "busy_ms": sum(v[0] for v in kernels.values()), "kernels": sum(v[1] for v in kernels.values()),
            "table": kernels}


def short(name: str, n: int = 90) -> str:
    name = name.replace("|", "/")
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="resnet50_b1:reduce-overhead,resnet50_b32:default,bert_base_b8_s128:default")
    ap.add_argument("--variants", default="eager,ember,tc")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--output-code", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    summary = ["| case | variant | first s | ms/call (median) | min ms | GPU busy ms/call | kernels/call |",
               "|:--|:--|--:|--:|--:|--:|--:|"]
    for case in a.cases.split(","):
        name, mode = case.split(":")
        model, batches = build(name)
        lines = [f"# {name}, mode {mode}, inference, kernel ms per call (calls={a.calls})", ""]
        for variant in a.variants.split(","):
            torch.manual_seed(0)
            code = a.out / f"{name}.{mode}.ember_code.txt" if (a.output_code and variant == "ember") else None
            try:
                r = run_variant(model, batches, variant, mode, a.calls, code)
            except Exception as exc:  # noqa: BLE001 (report and go on with the next variant)
                lines += [f"## {variant}: error {type(exc).__name__}: {exc}", ""]
                print(f"{case} {variant}: error {exc}", flush=True)
                continue
            summary.append(f"| {name} {mode} | {variant} | {r['first_s']:.1f} | {r['ms']:.3f} | {r['min_ms']:.3f} | "
                           f"{r['busy_ms']:.3f} | {r['kernels']:.0f} |")
            print(summary[-1], flush=True)
            lines += [f"## {variant}: {r['ms']:.3f} ms/call, GPU busy {r['busy_ms']:.3f} ms, {r['kernels']:.0f} kernels", "",
                      "| ms/call | % | n/call | kernel |", "|--:|--:|--:|:--|"]
            top = sorted(r["table"].items(), key=lambda kv: -kv[1][0])[: a.top]
            for k, (ms, n) in top:
                lines.append(f"| {ms:.4f} | {100 * ms / max(r['busy_ms'], 1e-9):.1f} | {n:.0f} | {short(k)} |")
            lines.append("")
            torch._dynamo.reset()  # benchmark only: drop torch.compile's caches between variants
        (a.out / f"{name}.{mode}.md").write_text("\n".join(lines))
        del model, batches
        torch.cuda.empty_cache()
    (a.out / "summary.md").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
