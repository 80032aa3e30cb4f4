"""Cold compile time of ember's GPU (Triton) path, by phase, on any machine (no GPU needed).

    python tools/compile_time.py densenet121_b16 bert_base_b8_s128 ...   # bench models (tools/bench)
    python tools/compile_time.py --scaling                               # 1, 2, 4, 8 repeated blocks
    python tools/compile_time.py --scaling --no-triton --phases infer --cpu-seconds  # per node, per layer
    python tools/compile_time.py resnet50_b1 --phases infer --workers 4 8 --processes

For each model, a fresh ember cache and a first call through `ember.compile(model,
options={"backend": "triton"})` on CPU tensors (inference under no_grad, then a training step:
forward, loss, backward), timed by phase from the compile record (Note [compile record]):

  capture        bytecode -> FX graph (the first call's time before the backend takes a graph)
  autograd       ember_autograd's trace (with the prims decompositions) and partition
  lower+fuse     the inductor's rewrite, plan_layouts, lower, fuse, plan_buffers
  codegen        render (kernel source text) and build (wrapper, launchers)
  triton         Triton's own compile of every generated kernel to a cubin for sm_90 (ptxas ships
                 with Triton): `serial` one after the other, `threads=N` on N threads,
                 `procs=N` in ember's pool of N worker processes (Note [Triton compiled in
                 worker processes]) started for it (their start included), as BuildGroup does
                 at the device's first launch, `warm_procs=N` in that pool started and warm
                 (--processes); `procs_misses=N`: this process's compiles after the pool's that
                 were not cache hits (0: the workers compiled what this process looks up)

The kernels are compiled as BuildGroup compiles them on the device: each launcher's heuristic
config, its arguments specialized as JITFunction.warmup specializes them (16-byte aligned
pointers), one compile per distinct source as each graph's build dedups them. `kernels` counts
the launches the wrappers make, `distinct` the compiles the device does today, `unique` the
sources distinct modulo their name over all graphs of the model (forward and backward).

The kernels do not run: the launchers are replaced by stand-ins that zero the outputs in this tool (under Triton's
interpreter a model's kernels take minutes on a CPU; their outputs do not change what is
compiled), so the externs (convolutions, matrix products) compute on uninitialized buffers.
Inputs are small (batch 1, 64x64 images, 128 tokens): static shapes, so the kernels' structure
does not depend on the size, only the block-size heuristics do. The figures are this machine's:
the device's host is faster, and compiles on more cores.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for src in sorted((ROOT / "packages").glob("*/src")):
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

SM90 = ("cuda", 90, 32)  # an H100/H200: compute capability 9.0, warps of 32

# --------------------------------------------------------------------------- the Triton compile


def _jit_function(source: str, name: str, cache_dir: str):
    from ember_inductor.codegen.triton_runtime import load_module
    return getattr(load_module(source, cache_dir, False), name)


def triton_compile(job: tuple) -> float:
    """Compile one kernel for sm_90 as JITFunction.warmup would on an H100; returns seconds.
    `job` = (source, name, argument dtypes or floats, size hints, launch kwargs, cache dir)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import MockTensor, create_function_from_signature

    source, name, args, hints, kwargs, cache_dir = job
    start = time.perf_counter()
    fn = _jit_function(source, name, cache_dir)
    target = GPUTarget(*SM90)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kw = dict(kwargs, debug=False, instrumentation_mode=triton.knobs.compilation.instrumentation_mode)
    bound, specialization, options = binder(*map(MockTensor.wrap_dtype, args), *hints, **kw)
    options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization, options)
    triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    return time.perf_counter() - start


def _job(launcher, cache_dir: str) -> tuple:
    ks = launcher.kernel_source
    args = [0.5 if a.role == "scalar" else a.dtype for a in ks.kernel.args]
    hints = [ks.kernel.hints[v] for v in ks.kernel.sizevars]
    if hints:
        hints = list(launcher._scalars(hints)[0])
    return (launcher.source, launcher.name, args, hints, launcher.meta["configs"][0].kwargs(), cache_dir)


def _fresh_triton_cache() -> str:
    import triton
    path = tempfile.mkdtemp(prefix="ember-ct-triton-")
    triton.knobs.cache.dir = path
    return path


def _requests(jobs: list) -> list:
    """Each job as ember's worker pool receives it (Note [Triton compiled in worker processes])."""
    from triton.backends.compiler import GPUTarget

    from ember_inductor.codegen.triton_pool import compile_request
    return [compile_request(_jit_function(source, name, cache), [*args, *hints], kwargs, GPUTarget(*SM90))
            for source, name, args, hints, kwargs, cache in jobs]


def _misses(jobs: list) -> int:
    """This process's compiles of `jobs` that were not cache hits (after the pool's)."""
    import triton
    misses = []
    previous = triton.knobs.compilation.listener
    triton.knobs.compilation.listener = lambda **kw: misses.append(not kw["cache_hit"])
    try:
        for job in jobs:
            triton_compile(job)
    finally:
        triton.knobs.compilation.listener = previous
    return sum(misses)


def compile_kernels(jobs: list, workers: list[int], processes: bool) -> dict:
    """Seconds to compile `jobs`: serially, on threads, in ember's worker-process pool."""
    from ember_inductor.codegen.triton_pool import CompilePool, precompile
    out = {}
    if not jobs:
        return out
    _fresh_triton_cache()
    triton_compile(jobs[0])  # loads Triton's CUDA backend (seconds, once per process): not counted
    _fresh_triton_cache()
    per_kernel = [triton_compile(j) for j in jobs]
    out["serial"] = sum(per_kernel)
    out["max_kernel"] = max(per_kernel)
    out["median_kernel"] = statistics.median(per_kernel)
    for n in workers:
        _fresh_triton_cache()
        start = time.perf_counter()
        try:  # CPython 3.11's ast is not thread-safe: Triton's parse on two threads may fail
            with ThreadPoolExecutor(n) as pool:
                list(pool.map(triton_compile, jobs))
            out[f"threads={n}"] = time.perf_counter() - start
        except Exception as e:  # noqa: BLE001
            print(f"# threads={n}: {type(e).__name__}: {e}", file=sys.stderr)
        if processes:
            # the pool as BuildGroup uses it: started for this build (workers' start and warm-up
            # included), then the same pool again, started and warm, on a fresh cache
            for label in ("procs", "warm_procs"):
                cache = _fresh_triton_cache()
                start = time.perf_counter()
                if label == "procs":
                    pool = CompilePool(n)
                stats = precompile(_requests(jobs), cache, n, pool)
                out[f"{label}={n}"] = time.perf_counter() - start
                assert stats["pool"] == len(jobs), stats
                out[f"{label}_misses={n}"] = _misses(jobs)  # this process's compiles after: all hits
            pool.close()
    return out


# --------------------------------------------------------------------------- one cold compile


class _Clock:
    """A compile record listener: the time each step arrived (capture ends at a graph's step)."""

    def __init__(self):
        self.events = []

    def __call__(self, record, step):
        self.events.append((time.perf_counter(), step))


def _no_launch(self, *args):
    """The tool's stand-in for TritonLauncher.__call__: the kernel's outputs are zeros (an index
    a later extern reads, max pooling's, stays in bounds), nothing runs."""
    for a, t in zip(self.kernel_source.kernel.args, args):
        if a.role == "out" and isinstance(t, torch.Tensor):
            t.zero_()


def _code_without_name(source) -> str:
    text = "\n".join(line for line in source.source.splitlines() if not line.startswith("#"))
    return text.replace(f"def {source.name}(", "def _(", 1) + repr(sorted(source.meta.items()))


def measure(fn, run_step, workers, processes, cuda: bool = False, calls: bool = False) -> dict:
    """The phases of one cold first call of `run_step(compiled_fn)` (see the module's doc)."""
    import ember
    from ember_inductor.codegen.triton_launch import TritonLauncher

    compiled = ember.compile(fn, options={"backend": "triton"})
    clock = _Clock()
    record = ember.compile_record(compiled)
    record.listeners.append(clock)
    real_call = TritonLauncher.__call__
    if not cuda:
        TritonLauncher.__call__ = _no_launch
    profile = cProfile.Profile() if calls else None
    try:
        start = time.perf_counter()
        if profile is not None:  # Python calls: a measure of work that a loaded machine does not blur
            profile.runcall(run_step, compiled)
        else:
            run_step(compiled)
        if cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
    finally:
        TritonLauncher.__call__ = real_call
    # capture: from the call's start (or the previous backend compile's end) to a graph's step
    capture, last = 0.0, start
    for t, step in clock.events:
        if step.layer == "capture":
            capture += t - last
        if step.layer == "backend" or (step.layer == "autograd" and step.stage == "backward_compile"):
            last = t
    inductor = {s: record.seconds("inductor", s)
                for s in ("rewrite", "plan_layouts", "lower", "fuse", "plan_buffers", "render", "build")}
    fw_bw = record.seconds("autograd", "forward_compile") + record.seconds("autograd", "backward_compile")
    graphs = [s.artifact for s in record.steps if s.layer == "inductor" and s.stage == "build"]
    row = {
        "first_call": total,
        "capture": capture,
        "autograd": record.seconds("autograd", "trace") + record.seconds("autograd", "partition")
        + fw_bw - sum(inductor.values()),
        "lower+fuse": sum(inductor[s] for s in ("rewrite", "plan_layouts", "lower", "fuse", "plan_buffers")),
        "codegen": inductor["render"] + inductor["build"],
        "graphs": len(graphs),
        "nodes": sum(len(s.artifact.graph.nodes) for s in record.steps
                     if s.layer == "autograd" and s.stage in ("forward_compile", "backward_compile")),
    }
    row.update({f"inductor.{k}": v for k, v in inductor.items()})
    if profile is not None:
        row["kcalls"] = pstats.Stats(profile).total_calls // 1000
    # the device's compiles: per graph, one per distinct launcher (BuildGroup)
    jobs, kernels, unique, cache = [], 0, set(), tempfile.mkdtemp(prefix="ember-ct-src-")
    for g in graphs:
        launchers = g._fn.__globals__ if hasattr(g._fn, "__globals__") else {}
        launchers = {id(v): v for v in launchers.values() if isinstance(v, TritonLauncher)}
        kernels += sum(1 for b in g.kernel_backends if b == "triton")
        for launcher in launchers.values():
            jobs.append(_job(launcher, cache))
            unique.add(_code_without_name(launcher.kernel_source))
    row.update({"kernels": kernels, "distinct": len(jobs), "unique": len(unique)})
    row.update({f"triton.{k}": v for k, v in compile_kernels(jobs, workers, processes).items()})
    return row


# --------------------------------------------------------------------------- workloads


def _small(t):
    """A bench input made small: batch 1, images 64x64, at most 128 tokens."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        return t
    t = t[:1]
    if t.dim() == 4 and t.is_floating_point():
        return torch.randn(1, t.shape[1], 64, 64, dtype=t.dtype)
    if t.dim() == 2 and not t.is_floating_point():
        return t[:, :128].contiguous()
    return t.contiguous()


def bench_workload(name: str, cuda: bool = False):
    """(fn, infer_step, train_step) for a tools/bench model, on small CPU inputs."""
    from bench.models import MODELS
    w = MODELS[name].build(torch.device("cuda" if cuda else "cpu"), torch.float32)
    batch = w.make_batch(torch.Generator("cuda" if cuda else "cpu").manual_seed(0), "train")
    if not cuda:  # the bench's own inputs on the device
        batch.args = tuple(_small(a) for a in batch.args)
        batch.kwargs = {k: _small(v) for k, v in batch.kwargs.items()}
        batch.target = _small(batch.target)
    infer_kwargs = {k: v for k, v in batch.kwargs.items() if k != "labels"}

    def infer(compiled):
        w.fn.eval() if isinstance(w.fn, nn.Module) else None
        with torch.no_grad():
            compiled(*batch.args, **infer_kwargs)

    def train(compiled):
        w.fn.train() if isinstance(w.fn, nn.Module) else None
        w.loss(compiled(*batch.args, **batch.kwargs), batch).backward()

    return w.fn, infer, train if w.loss is not None and "train" in w.phases else None


class DenseLayer(nn.Module):
    """densenet's layer: BN-ReLU-conv1x1-BN-ReLU-conv3x3, its output concatenated to its input."""

    def __init__(self, c_in: int, growth: int = 32):
        super().__init__()
        self.n1, self.c1 = nn.BatchNorm2d(c_in), nn.Conv2d(c_in, 4 * growth, 1, bias=False)
        self.n2, self.c2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats):
        x = torch.cat(feats, 1)
        return self.c2(F.relu(self.n2(self.c1(F.relu(self.n1(x))))))


class DenseStack(nn.Module):
    def __init__(self, blocks: int, c0: int = 64, growth: int = 32):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(c0 + i * growth, growth) for i in range(blocks))

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1).mean()


class TransformerStack(nn.Module):
    def __init__(self, blocks: int, dim: int = 256):
        super().__init__()
        from bench.models import TransformerBlock
        self.blocks = nn.Sequential(*(TransformerBlock(dim) for _ in range(blocks)))

    def forward(self, x):
        return self.blocks(x).mean()


def synthetic_workload(kind: str, blocks: int):
    torch.manual_seed(0)
    model = DenseStack(blocks) if kind == "dense" else TransformerStack(blocks)
    x = torch.randn(1, 64, 16, 16) if kind == "dense" else torch.randn(1, 64, 256)

    def infer(compiled):
        model.eval()
        with torch.no_grad():
            compiled(x)

    def train(compiled):
        model.train()
        compiled(x).backward()

    return model, infer, train


# --------------------------------------------------------------------------- tables

COLUMNS = ("first_call", "capture", "autograd", "lower+fuse", "codegen", "nodes", "graphs", "kernels",
           "distinct", "unique", "triton.serial")


def _fmt(v) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def print_table(rows: list[dict], extra: list[str]) -> None:
    cols = ["model", "phase", *COLUMNS, *extra]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join(":--" if i < 2 else "--:" for i in range(len(cols))) + "|")
    for r in rows:
        print("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="tools/bench model names")
    ap.add_argument("--scaling", nargs="*", choices=("dense", "transformer"), default=None,
                    help="the synthetic blocks repeated 1, 2, 4, 8 times (both kinds when none is named)")
    ap.add_argument("--blocks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--phases", nargs="+", default=["infer", "train"], choices=("infer", "train"))
    ap.add_argument("--workers", type=int, nargs="*", default=[os.cpu_count() or 1],
                    help="thread (and process) pool sizes for the Triton compile")
    ap.add_argument("--processes", action="store_true", help="also time a process pool")
    ap.add_argument("--calls", action="store_true",
                    help="count the first call's Python function calls (kcalls: thousands; cProfile slows it)")
    ap.add_argument("--no-triton", action="store_true", help="skip Triton's compile (ember's passes only)")
    ap.add_argument("--cpu-seconds", action="store_true",
                    help="time with this process's CPU seconds (time.process_time), not wall seconds: steadier "
                         "on a loaded machine; right for ember's passes, which run on one thread")
    ap.add_argument("--cuda", action="store_true",
                    help="on a GPU: the bench's inputs, kernels compiled and run by ember itself (BuildGroup); "
                         "`triton+run` is the first call's time outside ember's passes")
    args = ap.parse_args()
    os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember-ct-"))
    if args.cpu_seconds:  # before ember is imported: every timer of the compile record reads it
        time.perf_counter = time.process_time
    import ember
    if args.cuda:
        args.no_triton = True
    workers = [] if args.no_triton else args.workers
    extra = ["triton.max_kernel", *(f"triton.threads={n}" for n in workers),
             *((f"triton.{p}={n}" for n in workers for p in ("procs", "warm_procs", "procs_misses", "warm_procs_misses"))
               if args.processes else ())]
    extra = ["triton+run"] if args.cuda else [] if args.no_triton else extra
    extra = ["kcalls", *extra] if args.calls else extra
    if args.no_triton:
        global compile_kernels
        compile_kernels = lambda jobs, w, p: {}  # noqa: E731

    rows = []
    cases = [(name, lambda name=name: bench_workload(name, args.cuda)) for name in args.models]
    if args.scaling is not None:
        for kind in args.scaling or ("dense", "transformer"):
            cases += [(f"{kind}x{n}", lambda kind=kind, n=n: synthetic_workload(kind, n)) for n in args.blocks]
    for label, make in cases:
        for phase in args.phases:
            ember.reset()
            fn, infer, train = make()
            step = infer if phase == "infer" else train
            if step is None:
                continue
            row = measure(fn, step, workers, args.processes, args.cuda, args.calls)
            if args.cuda:
                row["triton+run"] = row["first_call"] - sum(row[c] for c in ("capture", "autograd", "lower+fuse",
                                                                            "codegen"))
            row.update(model=label, phase=phase)
            rows.append(row)
            print(f"# {label} {phase}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()
                                                      if k not in ("model", "phase")), file=sys.stderr, flush=True)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, torch "
          f"{torch.__version__}; {'CPU seconds' if args.cpu_seconds else 'seconds'}\n")
    print_table(rows, extra)
    if args.scaling is not None:
        print("\nseconds per 1000 nodes (nodes: the forward and backward graphs handed to the inductor)\n")
        per = [dict(r, **{c: 1000 * r[c] / max(r["nodes"], 1) for c in
                          ("first_call", "capture", "autograd", "lower+fuse", "codegen", "triton.serial", "kcalls")
                          if c in r}) for r in rows if "x" in r["model"]]
        print_table(per, ["kcalls"] if args.calls else [])


if __name__ == "__main__":
    main()
