"""Distributed training on several GPUs: eager, torch.compile and ember under DDP and FSDP2.

    torchrun --nproc-per-node 2 tools/dist_bench.py --out DIR [--steps 20] [--budget 420]

Every rank builds the same model from the same seed and trains it on its own shard of fixed
random data (NCCL); each row is one (model, wrapper, compiler). Per row, rank 0 writes one JSON
line to DIR/rows.jsonl as soon as the row ends: median step time (after the first two steps),
compile seconds (first step minus the median), peak memory per GPU (max over ranks), and the loss
after the last step next to eager's loss for the same model and wrapper. One ember DDP step of
GPT-2 is profiled: how much of the NCCL all-reduce time overlaps other kernels (DIR/overlap.json,
and the trace DIR/ember_ddp_gpt2.json). A row that would start after ``--budget`` seconds is
skipped on every rank (the decision is rank 0's, broadcast, so no rank waits in a collective).
Product code is not involved in the timing beyond ``ember.compile``; torch.compile is the
reference (tests and benchmarks may call it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    return GPT2LMHeadModel(cfg)


def _resnet50():
    import torchvision
    return torchvision.models.resnet50()


MODELS = {
    # name: (builder, batch per rank, make inputs, loss)
    "gpt2": (_gpt2, 8, lambda g, b, dev: torch.randint(0, 50257, (b, 256), generator=g).to(dev),
             lambda m, x: m(input_ids=x, labels=x).loss),
    "resnet50": (_resnet50, 32, lambda g, b, dev: torch.randn(b, 3, 224, 224, generator=g).to(dev),
                 lambda m, x: F.cross_entropy(m(x), (x.flatten(1)[:, 0] > 0).long() * 7)),
}


def wrap(model, wrapper: str, compiler: str, name: str):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if wrapper == "ddp":
        model = DDP(model, device_ids=[torch.cuda.current_device()], bucket_cap_mb=25)
    else:
        from torch.distributed.fsdp import fully_shard
        blocks = model.transformer.h if name == "gpt2" else []
        for block in blocks:
            fully_shard(block)
        fully_shard(model)
    if compiler == "ember":
        import ember
        return model, ember.compile(model)
    if compiler == "torch.compile":
        return model, torch.compile(model)
    return model, model


def run_row(name, wrapper, compiler, steps, rank, world):
    build, batch, inputs, loss_fn = MODELS[name]
    dev = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    model = build().to(dev)
    params, fn = wrap(model, wrapper, compiler, name)
    opt = torch.optim.AdamW(params.parameters(), lr=1e-4)
    torch.cuda.reset_peak_memory_stats()
    times, loss = [], None
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = inputs(g, batch, dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = loss_fn(fn, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    loss_t = loss.detach().float().reshape(1)
    dist.all_reduce(loss_t)
    peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**20], device=dev)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    median = statistics.median(times[2:])
    row = dict(model=name, wrapper=wrapper, compiler=compiler, step_ms=1e3 * median,
               compile_s=times[0] - median, peak_mb=peak.item(), loss=loss_t.item() / world)
    return row, fn, opt, inputs, batch, loss_fn


def overlap(trace_events) -> dict:
    """Share of NCCL kernel time during which another (compute) kernel runs on the GPU."""
    kernels = [e for e in trace_events if e.get("cat") == "kernel" and "dur" in e]
    nccl = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" in e["name"].lower()]
    other = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" not in e["name"].lower())
    merged = []
    for s, e in other:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    total = sum(e - s for s, e in nccl)
    hidden = 0.0
    for s, e in nccl:
        for ms, me in merged:
            if me <= s:
                continue
            if ms >= e:
                break
            hidden += min(e, me) - max(s, ms)
    return dict(nccl_kernels=len(nccl), nccl_us=total, hidden_us=hidden,
                hidden_share=hidden / total if total else None, compute_kernels=len(other))


def profile_step(fn, opt, inputs, batch, loss_fn, out, rank):
    from torch.profiler import ProfilerActivity, profile
    dev = torch.device("cuda", torch.cuda.current_device())
    x = inputs(torch.Generator().manual_seed(99 + rank), batch, dev)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loss_fn(fn, x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    if rank == 0:
        path = os.path.join(out, "ember_ddp_gpt2.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        result = overlap(events)
        with open(os.path.join(out, "overlap.json"), "w") as f:
            json.dump(result, f, indent=1)
        print("overlap", result, flush=True)


ROWS = [("gpt2", "ddp", "eager"), ("gpt2", "ddp", "ember"), ("resnet50", "ddp", "eager"),
        ("resnet50", "ddp", "ember"), ("gpt2", "fsdp2", "eager"), ("gpt2", "fsdp2", "ember"),
        ("gpt2", "ddp", "torch.compile"), ("resnet50", "ddp", "torch.compile"),
        ("gpt2", "fsdp2", "torch.compile")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="dist-out")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=420.0)
    ap.add_argument("--rows", default="", help="comma-separated model:wrapper:compiler (default: all)")
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    os.makedirs(args.out, exist_ok=True)
    rows = [tuple(r.split(":")) for r in args.rows.split(",")] if args.rows else ROWS
    start, eager_loss = time.perf_counter(), {}
    for name, wrapper, compiler in rows:
        go = [time.perf_counter() - start < args.budget]
        dist.broadcast_object_list(go, src=0)
        if not go[0]:
            if rank == 0:
                print("skipped (budget)", name, wrapper, compiler, flush=True)
            continue
        row, fn, opt, inputs, batch, loss_fn = run_row(name, wrapper, compiler, args.steps, rank, world)
        if compiler == "eager":
            eager_loss[(name, wrapper)] = row
        base = eager_loss.get((name, wrapper))
        if base is not None:
            row["speedup"] = base["step_ms"] / row["step_ms"]
            row["eager_loss"] = base["loss"]
        if (name, wrapper, compiler) == ("gpt2", "ddp", "ember"):
            profile_step(fn, opt, inputs, batch, loss_fn, args.out, rank)
        if rank == 0:
            row["gpus"] = world
            row["device"] = torch.cuda.get_device_name()
            print(json.dumps(row), flush=True)
            with open(os.path.join(args.out, "rows.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        del fn, opt
        torch.cuda.empty_cache()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
