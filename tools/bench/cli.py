"""Command line: parse, run the suite, write the table, JSON, markdown and PNG.

    python tools/bench.py --suite cpu --out bench-out
    python tools/bench.py --suite seeds --device cuda --quick --out bench-out
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from bench import png, report
from bench.measure import RunConfig
from bench.models import MODELS, SUITES
from bench.runner import Options, Progress, run_suite

QUICK_BUDGET_S = 500.0  # the whole seeds suite inside 9 minutes, start-up and reporting included
# Per suite: one (variant, phase) past this is reported as a timeout. The CPU suites are meant to
# take well under a minute per model; torch.compile's inductor needs minutes for simple_fn on a
# 2-core machine (ARCHITECTURE.md, "Known pitfalls"), which the cpu suite then shows as a timeout.
VARIANT_TIMEOUT = {"seeds": 600.0, "cpu": 120.0, "tiny": 120.0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="cpu", choices=sorted(SUITES), help="model suite (default: cpu)")
    p.add_argument("--models", help="comma-separated model names; overrides --suite (see --list)")
    p.add_argument("--list", action="store_true", help="list suites and models, then exit")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"])
    p.add_argument("--backends", default="inductor",
                   help="ember backends, comma-separated (default: inductor; e.g. eager,aot_eager,inductor)")
    p.add_argument("--mode", default=None, help="compile mode for ember and torch.compile alike")
    p.add_argument("--train-step", default="model", choices=["model", "whole"],
                   help="train phase: compile the model (default; loss and SGD step eager) or the "
                        "whole step (zero_grad, forward, loss, backward, SGD step) for both compilers")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"],
                   help="the training step's optimizer (default: SGD with momentum)")
    p.add_argument("--phases", default="infer,train",
                   help="infer, train or both (default: both; train = forward, loss, backward, SGD step)")
    p.add_argument("--no-torch-compile", dest="torch_compile", action="store_false",
                   help="skip the torch.compile reference")
    p.add_argument("--torch-backend", default="inductor", help="torch.compile's backend (default: inductor)")
    p.add_argument("--quick", action="store_true",
                   help=f"fewer reps (warm-up 2, 3-30 timed calls) and a {QUICK_BUDGET_S:.0f} s budget")
    p.add_argument("--warmup", type=int, help="warm-up calls")
    p.add_argument("--reps", type=int, help="timed calls (fixed count instead of time-adaptive)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float,
                   help="seconds for the whole suite, shared among models (0: none; --quick: "
                        f"{QUICK_BUDGET_S:.0f})")
    p.add_argument("--variant-timeout", type=float,
                   help="seconds for one (variant, phase), compile included "
                        f"(default: {', '.join(f'{k} {v:.0f}' for k, v in VARIANT_TIMEOUT.items())})")
    p.add_argument("--model-timeout", type=float, default=1800.0, help="seconds for one model (default 1800)")
    p.add_argument("--tf32", action="store_true", help="torch.set_float32_matmul_precision('high')")
    p.add_argument("--warm-cache", action="store_true",
                   help="run each model a second time, in a new process on the compile caches the first run "
                        "filled: cold and warm first-call seconds side by side")
    p.add_argument("--user-cache", dest="cold_cache", action="store_false",
                   help="use the user's compile caches instead of fresh ones")
    p.add_argument("--out", type=Path, help="folder for results.json, results.md, speedups.png and logs")
    p.add_argument("--json", type=Path, help="write JSON here")
    p.add_argument("--markdown", type=Path, help="write the markdown table here")
    p.add_argument("--png", type=Path, help="write the speedup bar chart here")
    p.add_argument("--no-live", action="store_true", help="progress as plain lines, even on a terminal")
    return p.parse_args(argv)


def _split(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in s.split(",") if x.strip())


def options_from(args: argparse.Namespace) -> Options:
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    models = _split(args.models) if args.models else SUITES[args.suite]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s): {', '.join(unknown)} (see --list)")
    phases = _split(args.phases)
    if not phases or set(phases) - {"infer", "train"}:
        raise SystemExit("--phases takes infer, train or infer,train")
    run = RunConfig.quick() if args.quick else RunConfig()
    if args.warmup is not None:
        run = replace(run, warmup=args.warmup)
    if args.reps is not None:
        run = replace(run, min_reps=args.reps, max_reps=args.reps)
    budget = args.budget if args.budget is not None else (QUICK_BUDGET_S if args.quick else None)
    budget = budget or None  # 0: no budget
    return Options(models=models, device=args.device, dtype=args.dtype, phases=phases,
                   backends=_split(args.backends), mode=args.mode, train_step=args.train_step, optimizer=args.optimizer, torch_compile=args.torch_compile,
                   torch_backend=args.torch_backend, run=run, seed=args.seed,
                   variant_timeout=args.variant_timeout or VARIANT_TIMEOUT.get(args.suite, 600.0), model_timeout=args.model_timeout,
                   budget=budget, tf32=args.tf32, cold_cache=args.cold_cache,
                   warm_cache=args.warm_cache)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _run(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} logical cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} logical cores)"


def collect_meta(args: argparse.Namespace, opts: Options, argv: list[str]) -> dict:
    # The GPU's name from nvidia-smi: the parent never initializes CUDA (the workers own the GPU).
    gpu = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    gpu = gpu.splitlines()[0] if gpu else None
    repo = Path(__file__).resolve().parents[2]
    commit = _run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    versions = {d: _version(d) for d in ("torch", "triton", "torchvision", "timm", "transformers", "ember")}
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python tools/bench.py " + shlex.join(argv),
        "suite": args.suite if not args.models else "custom",
        "device": opts.device,
        "device_name": (gpu.split(",")[0] if gpu and opts.device.startswith("cuda") else _cpu_name()),
        "host": platform.node(), "cpu": _cpu_name(), "gpu": gpu,
        "python": platform.python_version(),
        **{k: v for k, v in versions.items()},
        "git": (commit + (" (dirty)" if dirty else "")) if commit else None,
        "dtype": opts.dtype, "mode": opts.mode or "default", "train_step": opts.train_step, "optimizer": opts.optimizer, "backends": ",".join(opts.backends),
        "torch_compile_backend": opts.torch_backend if opts.torch_compile else None,
        "run": asdict(opts.run), "budget_s": opts.budget,
    }


def _finite(value):
    """JSON has no inf or nan: write them as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.list:
        for suite, names in SUITES.items():
            print(f"{suite}: {', '.join(names)}")
        print()
        for name, spec in MODELS.items():
            req = f"  [needs {', '.join(spec.requires)}]" if spec.requires else ""
            print(f"{name:28} {spec.description}{req}")
        return 0
    opts = options_from(args)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        args.json = args.json or args.out / "results.json"
        args.markdown = args.markdown or args.out / "results.md"
        args.png = args.png or args.out / "speedups.png"
        work_dir = args.out / "logs"
    else:
        work_dir = Path(tempfile.mkdtemp(prefix="ember-bench-"))
    meta = collect_meta(args, opts, argv)
    print(f"bench: {len(opts.models)} model(s) on {meta['device_name']}; variants: "
          f"{', '.join(v['name'] for v in opts.variants())}; phases: {','.join(opts.phases)}; "
          f"logs in {work_dir}", file=sys.stderr)

    # SIGTERM (a time limit) unwinds like Ctrl-C, so the running worker is killed with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    progress = Progress(live=False if args.no_live else None)
    records = run_suite(opts, work_dir, progress)
    variants = [v["name"] for v in opts.variants()]
    rows = report.build_rows(records, variants)
    gms = report.geomeans(rows)

    print()
    print(report.terminal_table(rows, gms))
    if args.png:
        groups, series = report.chart_groups(rows)
        title = f"speedup over eager, {opts.device} {opts.dtype} ({meta['date']})"
        args.png.parent.mkdir(parents=True, exist_ok=True)
        args.png.write_bytes(png.bar_chart(groups, series, title))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        png_ref = os.path.relpath(args.png, args.markdown.parent) if args.png else None
        args.markdown.write_text(report.markdown(meta, rows, gms, png_ref))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {"meta": meta, "models": records, "rows": rows, "geomeans": gms}
        args.json.write_text(json.dumps(_finite(doc), indent=1, default=str))
    written = [str(p) for p in (args.json, args.markdown, args.png) if p]
    if written:
        print(f"\nwrote {', '.join(written)}", file=sys.stderr)
    return 0
