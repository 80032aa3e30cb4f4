"""Where a training step's time goes, eager vs ember vs torch.compile, side by side (CUDA).

For each case (a tools/bench model) and each step kind (`model`: the compiler gets the model, the
loss, backward and an eager AdamW step run around it; `whole`: the compiler gets the documents'
whole step, zero_grad + forward + loss + backward + AdamW step) every variant is compiled, warmed
up, timed (host ms until the step returns, wall ms with a synchronize, median over steps) and
profiled with torch.profiler over a few steps: GPU busy ms per step, kernels per step, the top
kernels by GPU time and the top host ops by self CPU time. ember's step is also run under cProfile
(own time). Written under --out: `CASE.KIND.md` per case and `summary.md`. Usage (repository
root, packages on PYTHONPATH):

    python tools/profile_train.py --out DIR --cases resnet50_b32,bert_base_b8_s128 --kinds model,whole
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
from bench.models import MODELS  # noqa: E402
from profile_kernels import kernel_table, short  # noqa: E402

import ember  # noqa: E402

DEVICE = torch.device("cuda")


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def make_step(work, model, kind: str, variant: str):
    """The step function of one variant, `step(batch)`: the compiler gets the model (`model`) or
    this whole function (`whole`)."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    compile_ = {"eager": lambda f: f, "ember": ember.compile, "tc": torch.compile}[variant]
    fn = compile_(model) if kind == "model" else model

    def train(b):
        opt.zero_grad(set_to_none=True)
        loss = work.loss(fn(*b.args, **b.kwargs), b)
        loss.backward()
        opt.step()
        return loss
    return compile_(train) if kind == "whole" else train


def run_variant(work, batches, kind: str, variant: str, steps: int, prof_steps: int) -> dict:
    model = work.fn
    model.train()
    step = make_step(work, model, kind, variant)
    t0 = time.perf_counter()
    step(batches[0])
    sync()
    first = time.perf_counter() - t0
    for i in range(3):
        step(batches[i % 2])
    sync()
    host, wall = [], []
    for i in range(steps):
        sync()
        t0 = time.perf_counter()
        step(batches[i % 2])
        t1 = time.perf_counter()
        sync()
        host.append((t1 - t0) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(prof_steps):
            step(batches[i % 2])
        sync()
    kernels = kernel_table(prof, prof_steps)
    host_ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:25]
    cp = None
    if variant == "ember":
        pr = cProfile.Profile()
        for i in range(prof_steps):
            pr.enable()
            step(batches[i % 2])
            pr.disable()
            sync()
        text = io.StringIO()
        st = pstats.Stats(pr, stream=text)
        st.sort_stats("tottime").print_stats(30)
        st.sort_stats("cumulative").print_stats(40)
        cp = text.getvalue()
    return {"first_s": first, "host": statistics.median(host), "wall": statistics.median(wall),
            "busy": sum(v[0] for v in kernels.values()), "n": sum(v[1] for v in kernels.values()),
            "kernels": kernels, "host_ops": [(e.key, e.self_cpu_time_total / prof_steps / 1e3,
                                               e.count / prof_steps) for e in host_ops], "cprofile": cp}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="resnet50_b32,bert_base_b8_s128")
    ap.add_argument("--kinds", default="model,whole")
    ap.add_argument("--variants", default="eager,ember,tc")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--prof-steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--budget", type=float, default=1e9, help="seconds; skip cases past it")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of the script")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(a.device)
    a.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    summary = ["| case | step | variant | first s | host ms/step | wall ms/step | x eager | GPU busy ms | kernels/step |",
               "|:--|:--|:--|--:|--:|--:|--:|--:|--:|"]
    for kind in a.kinds.split(","):
        for name in a.cases.split(","):
            if time.perf_counter() - start > a.budget:
                summary.append(f"| {name} | {kind} | skipped (budget) | | | | | | |")
                continue
            work = MODELS[name].build(DEVICE, torch.float32)
            gen = torch.Generator(device=DEVICE).manual_seed(0)
            batches = [work.make_batch(gen, "train") for _ in range(2)]
            state = {k: v.clone() for k, v in work.fn.state_dict().items()}
            lines = [f"# {name}, {kind} step (AdamW), default mode", ""]
            eager_wall = None
            for variant in a.variants.split(","):
                work.fn.load_state_dict(state)
                torch.manual_seed(0)
                try:
                    r = run_variant(work, batches, kind, variant, a.steps, a.prof_steps)
                except Exception as exc:  # noqa: BLE001 (report and go on)
                    lines += [f"## {variant}: error {type(exc).__name__}: {exc}", ""]
                    print(f"{name} {kind} {variant}: error {exc}", flush=True)
                    continue
                if variant == "eager":
                    eager_wall = r["wall"]
                ratio = f"{eager_wall / r['wall']:.2f}" if eager_wall else "-"
                summary.append(f"| {name} | {kind} | {variant} | {r['first_s']:.1f} | {r['host']:.2f} | "
                               f"{r['wall']:.2f} | {ratio} | {r['busy']:.2f} | {r['n']:.0f} |")
                print(summary[-1], flush=True)
                lines += [f"## {variant}: wall {r['wall']:.3f} ms, host {r['host']:.3f} ms, GPU busy "
                          f"{r['busy']:.3f} ms, {r['n']:.0f} kernels per step", "",
                          "| ms/step | % | n/step | kernel |", "|--:|--:|--:|:--|"]
                for k, (ms, n) in sorted(r["kernels"].items(), key=lambda kv: -kv[1][0])[: a.top]:
                    lines.append(f"| {ms:.4f} | {100 * ms / max(r['busy'], 1e-9):.1f} | {n:.0f} | {short(k)} |")
                lines += ["", "| host self ms/step | n/step | op |", "|--:|--:|:--|"]
                for key, ms, n in r["host_ops"]:
                    lines.append(f"| {ms:.3f} | {n:.0f} | {short(key)} |")
                lines.append("")
                if r["cprofile"]:
                    lines += ["```text", r["cprofile"], "```", ""]
                torch._dynamo.reset()  # benchmark only: drop torch.compile's caches between variants
                ember.reset()
                del r
            (a.out / f"{name}.{kind}.md").write_text("\n".join(lines))
            del work, batches, state
            if DEVICE.type == "cuda":
                torch.cuda.empty_cache()
    (a.out / "summary.md").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
