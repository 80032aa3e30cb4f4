"""Dynamic shapes, side by side (issue #18): static against dynamic kernels, and how many compiles a
sweep of shapes costs, for ember and torch.compile in one process on the same inputs.

    python tools/dynamic_bench.py [--device cuda] [--models bert,gpt2] [--out DIR]

Per model (Hugging Face BERT-base and GPT-2 configs, random weights, inference, no dropout):
1. speed at the seeds' shape (BERT b8 s128, GPT-2 b4 s512): eager, ember static (dynamic=False),
   ember dynamic (dynamic=True, compiled first at another shape), and torch.compile both ways;
   the figure of merit is ember dynamic / ember static (issue #18: within 10 %).
2. a sweep of (batch, sequence) shapes with dynamic=None: graphs compiled, and the largest
   difference from eager (float32; tolerance 1e-3 relative to the output's scale).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for src in sorted((ROOT / "packages").glob("*/src")):
    sys.path.insert(0, str(src))

import ember  # noqa: E402

SEED_SHAPES = {"bert": (8, 128), "gpt2": (4, 512)}
SWEEP = [(1, 7), (2, 16), (3, 33), (4, 64), (5, 100), (8, 128), (6, 64), (7, 7)]


def build(name: str, device: str) -> tuple[torch.nn.Module, int]:
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    if name == "bert":
        cfg = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = BertModel(cfg)
    else:
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        model = GPT2Model(cfg)
    return model.to(device).eval(), cfg.vocab_size


def ids(vocab: int, batch: int, seq: int, device: str, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=gen).to(device)


def output(model, x):
    return model(input_ids=x).last_hidden_state


def timed(fn, x, device: str, reps: int = 30, warmup: int = 5) -> float:
    """Median milliseconds of one call (after `warmup` calls)."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        times = []
        for _ in range(reps):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn(x)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def graphs_of(compiled) -> int:
    return ember.compile_record(compiled).graphs


def speed_rows(name: str, device: str, with_tc: bool, rounds: int = 12) -> dict:
    """Every variant compiled and warmed first, then timed in interleaved rounds (each round: a
    few calls of every variant in turn), so that drift of a shared host's load falls on all
    variants alike; each figure is the median over the rounds."""
    model, vocab = build(name, device)
    batch, seq = SEED_SHAPES[name]
    x = ids(vocab, batch, seq, device, 0)
    warm = ids(vocab, max(batch // 2, 2), seq // 2 + 3, device, 1)
    variants = {"eager": lambda t: output(model, t)}
    ember.reset()
    static = ember.compile(copy.deepcopy(model), dynamic=False)  # each variant its own module
    variants["ember_static"] = lambda t: output(static, t)
    timed(variants["ember_static"], x, device, reps=1)
    dynamic = ember.compile(copy.deepcopy(model), dynamic=True)
    with torch.no_grad():
        output(dynamic, warm)  # compiled at another shape: the seed shape reuses it
    variants["ember_dynamic"] = lambda t: output(dynamic, t)
    timed(variants["ember_dynamic"], x, device, reps=1)
    row = {"model": name, "shape": f"b{batch} s{seq}", "ember_dynamic_graphs": graphs_of(dynamic)}
    if with_tc:
        tc_static = torch.compile(copy.deepcopy(model), dynamic=False)
        variants["tc_static"] = lambda t: output(tc_static, t)
        timed(variants["tc_static"], x, device, reps=1)
        tc_dynamic = torch.compile(copy.deepcopy(model), dynamic=True)
        with torch.no_grad():
            output(tc_dynamic, warm)
        variants["tc_dynamic"] = lambda t: output(tc_dynamic, t)
        timed(variants["tc_dynamic"], x, device, reps=1)
    per_round: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for label, fn in variants.items():
            per_round[label].append(timed(fn, x, device, reps=5, warmup=1))
    row.update({f"{label}_ms": statistics.median(ts) for label, ts in per_round.items()})
    row["dynamic_over_static"] = row["ember_static_ms"] / row["ember_dynamic_ms"]
    return row


def sweep_rows(name: str, device: str) -> dict:
    model, vocab = build(name, device)
    ember.reset()
    compiled = ember.compile(model)  # dynamic=None: static first, then dynamic once a size changes
    worst = 0.0
    with torch.no_grad():
        for i, (batch, seq) in enumerate(SWEEP):
            x = ids(vocab, batch, seq, device, 10 + i)
            want, got = output(model, x), output(compiled, x)
            worst = max(worst, ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item())
    return {"model": name, "shapes": len(SWEEP), "graphs_compiled": graphs_of(compiled),
            "max_rel_error": worst, "ok": worst < 1e-3}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="bert,gpt2")
    p.add_argument("--no-torch-compile", dest="tc", action="store_false")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    results = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
               "torch": torch.__version__, "sweep": [], "speed": []}
    for name in args.models.split(","):
        results["sweep"].append(sweep_rows(name, args.device))
        print(json.dumps(results["sweep"][-1]), flush=True)
        if not args.skip_speed:
            results["speed"].append(speed_rows(name, args.device, args.tc))
            print(json.dumps(results["speed"][-1]), flush=True)
    print("\n| model | shape | eager ms | ember static | ember dynamic | dynamic/static speed | tc static | tc dynamic |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results["speed"]:
        print(f"| {r['model']} | {r['shape']} | {r['eager_ms']:.2f} | {r['ember_static_ms']:.2f} | "
              f"{r['ember_dynamic_ms']:.2f} | {r['dynamic_over_static']:.2f} | "
              f"{r.get('tc_static_ms', float('nan')):.2f} | {r.get('tc_dynamic_ms', float('nan')):.2f} |")
    print("\n| model | shapes | graphs compiled (dynamic=None) | max rel. error | ok |")
    print("|---|---|---|---|---|")
    for r in results["sweep"]:
        print(f"| {r['model']} | {r['shapes']} | {r['graphs_compiled']} | {r['max_rel_error']:.1e} | {r['ok']} |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "dynamic_bench.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
