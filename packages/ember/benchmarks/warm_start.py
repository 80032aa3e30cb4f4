"""Warm start, measured: the first compiled call of a model in a fresh process, cold (empty
caches) and warm (a second fresh process on the caches the first filled).

    python packages/ember/benchmarks/warm_start.py                         # CPU, a few small models
    python packages/ember/benchmarks/warm_start.py --device cuda --models resnet50,bert

Each (model, cold|warm) runs in its own subprocess (imports are not counted; the model is built
before the clock starts, and so is `startup s`: torch's FakeTensorMode importing torch._dynamo on
first use, which capture pays in any process). Reported per run: `first s`, the wall seconds of the first call (a
training step: forward, loss, backward; `--phase infer`: one forward under no_grad), `compile s`,
what the compile record counts as compiling (each graph's backend compile and, in training, the
backward's), `steady s`, the second call, `err`, the first call's results (the output, or the
loss and every gradient) against eager's on the same inputs (per tensor |got - eager| / |eager|
in the 2-norm, the largest), `vs cold`, the warm process's results against the cold one's
(largest elementwise difference over the tensor's largest value: kernels loaded from the cache
must compute what the built ones did), and the warm-start cache counters of the process.
The models are tools/bench's (`resnet50` and `bert` name resnet50_b32 and bert_base_b8_s128).
Note [warm start] in ember/warm_start.py says what is cached.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ALIASES = {"resnet50": "resnet50_b32", "bert": "bert_base_b8_s128", "gpt2": "gpt2_b4_s512", "mlp": "mlp_b512"}
CPU_MODELS = "mlp_b512,small_resnet_b16,transformer_block_b8_s128"


def child(model: str, device: str, phase: str) -> dict:
    import torch  # noqa: PLC0415 (the child's imports happen before its clock starts)

    import ember  # noqa: PLC0415
    from bench.models import MODELS  # noqa: PLC0415

    # torch's FakeTensorMode imports torch._dynamo on first use (seconds without .pyc files):
    # torch's start-up cost, paid by capture in any process, cold or warm; timed apart.
    start = time.perf_counter()
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415
    FakeTensorMode()
    startup = time.perf_counter() - start
    torch.manual_seed(0)  # the same weights in the cold and the warm process (`vs cold`)
    work = MODELS[model].build(torch.device(device), torch.float32)
    phase = phase if phase in work.phases else "infer"
    gen = torch.Generator(device=device).manual_seed(0)
    batch = work.make_batch(gen, phase)
    fn = work.fn
    if isinstance(fn, torch.nn.Module):
        fn.train(phase == "train")
    compiled = ember.compile(fn)

    def call(f=compiled):
        """One training step (forward, loss, backward) or one forward; the results to compare."""
        if phase == "train":
            loss = work.loss(f(*batch.args, **batch.kwargs), batch)
            loss.backward()
            params = [p for p in fn.parameters() if p.grad is not None]
            got = [loss.detach(), *(p.grad.clone() for p in params)]
            for p in params:
                p.grad = None
        else:
            with torch.no_grad():
                out = f(*batch.args, **batch.kwargs)
            got = [out if isinstance(out, torch.Tensor) else out[0]]
        if device == "cuda":
            torch.cuda.synchronize()
        return got

    # The reference, eager, before the clock starts: a warm-loaded kernel that computes the wrong
    # thing must show up here, not only as a faster first call.
    ref = call(fn)
    start = time.perf_counter()
    got = call()
    first = time.perf_counter() - start
    # norm-wise, per tensor (a gradient that is ~0 everywhere makes elementwise ratios meaningless)
    err = max(float((g.double() - r.double()).norm() / r.double().norm().clamp_min(1e-30))
              for g, r in zip(got, ref, strict=True))
    # the warm process against the cold one's results (same kernels, loaded rather than built)
    saved = Path(os.environ["EMBER_CACHE_DIR"]) / f"results-{model}-{phase}.pt"
    vs_cold = None
    if saved.exists():
        cold = torch.load(saved)
        vs_cold = max(float((g.cpu().double() - c.double()).abs().max() / c.double().abs().max().clamp_min(1e-30))
                      for g, c in zip(got, cold, strict=True))
    else:
        torch.save([g.cpu() for g in got], saved)
    start = time.perf_counter()
    call()
    steady = time.perf_counter() - start
    record = ember.compile_record(compiled)
    compile_s = record.seconds("backend") + record.seconds("autograd", "backward_compile")
    return {"model": model, "phase": phase, "first_s": first, "compile_s": compile_s, "steady_s": steady, "err": err,
            "vs_cold": vs_cold,
            "startup_s": startup,
            "graphs": record.graphs, "cache": ember.cache_stats()}


def _num(x) -> str:
    return f"{'-':>8}" if x is None else f"{x:8.1e}"


def run(model: str, device: str, phase: str, cache: str, timeout: float) -> dict:
    env = {**os.environ, "EMBER_CACHE_DIR": cache, "EMBER_WARM_START": "1",
           "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tools"), *sys.path])}
    proc = subprocess.run([sys.executable, __file__, "--child", model, "--device", device, "--phase", phase],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"model": model, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=None, help=f"comma-separated (default on CPU: {CPU_MODELS})")
    p.add_argument("--device", default="cpu")
    p.add_argument("--phase", default="train", choices=("train", "infer"))
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.device, args.phase)))
        return
    models = [ALIASES.get(m, m) for m in (args.models or CPU_MODELS).split(",") if m]
    rows = []
    print(f"{'model':28} {'phase':5} {'run':4} {'startup s':>9} {'first s':>8} {'compile s':>9} {'steady s':>8} {'err':>8} {'vs cold':>8}  cache")
    for model in models:
        with tempfile.TemporaryDirectory(prefix="ember-warm-") as cache:
            for label in ("cold", "warm"):
                r = run(model, args.device, args.phase, cache, args.timeout)
                r["run"] = label
                rows.append(r)
                if "error" in r:
                    print(f"{model:28} {'':5} {label:4} error: {r['error']}")
                    continue
                hits = {k: v.get("hit", 0) for k, v in r["cache"].items()}
                print(f"{model:28} {r['phase']:5} {label:4} {r['startup_s']:9.2f} {r['first_s']:8.2f} {r['compile_s']:9.2f} "
                      f"{r['steady_s']:8.3f} {r['err']:8.1e} {_num(r['vs_cold'])}  hits {hits}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
