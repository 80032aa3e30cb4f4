"""Profile a training step of torchvision's resnet50 (eager, then ember) with torch.profiler on
CUDA: wall time per step, GPU busy time per step (sum of kernel times), the host time the step
spends in Python, and the kernels that take the most time. Usage (repository root, packages on
PYTHONPATH): `python tools/profile_step.py [--batch 32] [--out DIR]`."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile

import ember


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (a.batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(f):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(f(x), y).backward()
        opt.step()

    rows = []
    for name, fn in (("eager", model), ("ember", ember.compile(model))):
        t0 = time.perf_counter()
        step(fn)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        for _ in range(3):
            step(fn)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            step(fn)
        host = (time.perf_counter() - t0) / 10  # until the last launch returns
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 10
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.steps):
                step(fn)
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        busy = sum(e.device_time for e in events) / a.steps / 1e3
        n = len(events) / a.steps
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=60)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / f"profile_{name}.txt").write_text(table)
        top = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:12]
        print(f"\n== {name}: top GPU ops per step (ms)")
        for e in top:
            print(f"  {e.device_time_total / a.steps / 1e3:8.3f}  x{e.count // a.steps:<4d} {e.key[:90]}")
        rows.append((name, first, wall * 1e3, host * 1e3, busy, n))
    print("\n| variant | first step s | step ms (wall) | host ms (launches) | GPU busy ms | GPU ops/step |")
    print("|:--|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.0f} |")


if __name__ == "__main__":
    main()
