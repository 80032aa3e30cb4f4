"""GPU checks of the Triton backend (issue 6), and the benchmark that fills docs/performance-triton.md.

As tests (`-m gpu`, skipped without CUDA): simple_fn is one kernel and matches eager; the
benchmark kernels match eager on fresh inputs; a second process compiles nothing.
As a script, on the GPU machine, from the repository root:

    PYTHONPATH=packages/ember-prims/src:packages/ember-inductor/src python3 \
        packages/ember-inductor/tests/test_triton_gpu.py [--no-compile-ref] [--json out.json]

prints versions, the measured device-to-device copy bandwidth, and for each workload the time and
achieved bandwidth of ember's kernel (heuristic config and autotuned), eager, and torch.compile.
Bandwidth counts the fewest bytes the workload must move: each input read once, each output
written once; the copy counts its bytes read plus written.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_triton_specs import (  # noqa: E402
    SpecBuilder, layer_norm_spec, pointwise_chain_spec, simple_fn_spec, softmax_spec,
)

from test_triton_graphs import layer_norm as layer_norm_graph  # noqa: E402
from test_triton_graphs import simple_fn as simple_fn_graph  # noqa: E402
from test_triton_graphs import softmax as softmax_graph  # noqa: E402

import ember_prims  # noqa: E402
from ember_inductor import compile_graph  # noqa: E402
from ember_inductor.codegen.triton import TritonBackend  # noqa: E402
from ember_inductor.graph_builder import GraphBuilder  # noqa: E402
from ember_inductor.options import InductorOptions  # noqa: E402

P = ember_prims.ops


def build(spec, cache_dir, autotune=False):
    be = TritonBackend()
    opts = InductorOptions(cache_dir=cache_dir, autotune=autotune)
    [launcher] = be.build([be.render(spec, opts)], opts)
    return launcher


def copy_spec(n, dtype=torch.float32):
    b = SpecBuilder("copy", (n,))
    b.store("out", b.x(0), b.load("x", b.x(0), dtype))
    return b.build()


# ---- workloads: (name, spec, make inputs, eager fn, bytes moved) -----------------------------

def workloads(device, big=True):
    n = 2**26 if big else 2**16
    rows, cols = (4096, 4096) if big else (64, 1000)
    f32 = torch.float32

    long_rows, long_cols = (1024, 65536) if big else (4, 20000)

    def long_inputs():
        return [torch.randn(long_rows, long_cols, device=device), torch.empty(long_rows, long_cols, device=device)]

    def chain_inputs():
        return [torch.randn(n, device=device), torch.randn(n, device=device), torch.empty(n, device=device)]

    def sm_inputs():
        return [torch.randn(rows, cols, device=device), torch.empty(rows, cols, device=device)]

    def ln_inputs():
        return [torch.randn(rows, cols, device=device), torch.randn(cols, device=device),
                torch.randn(cols, device=device), torch.empty(rows, cols, device=device)]

    return [
        ("relu(x*2+1)*y", pointwise_chain_spec(n), chain_inputs,
         lambda x, y: torch.relu(x * 2 + 1) * y, 3 * n * 4),
        ("softmax", softmax_spec(rows, cols), sm_inputs,
         lambda x: torch.softmax(x, -1), 2 * rows * cols * 4),
        ("layer_norm", layer_norm_spec(rows, cols), ln_inputs,
         lambda x, w, b: torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5),
         (2 * rows * cols + 2 * cols) * 4),
        ("softmax, long rows (looped)", softmax_spec(long_rows, long_cols), long_inputs,
         lambda x: torch.softmax(x, -1), 2 * long_rows * long_cols * 4),
    ]


# ---- the same workloads as prims graphs, through the whole pipeline (compile_graph) ----------

def relu_chain_graph(b, x, y):
    n = x.meta["val"].shape[0]
    dev = x.meta["val"].device
    full = lambda v: b.call(P.full.default, [n], v, dtype=torch.float32, device=dev)  # noqa: E731
    t = b.call(P.add.default, b.call(P.mul.default, x, full(2.0)), full(1.0))
    return b.call(P.mul.default, b.call(P.maximum.default, t, full(0.0)), y)


def layer_norm_bias_graph(b, x, w, bias):
    n, d = x.meta["val"].shape
    y = layer_norm_graph(b, x, w)
    return b.call(P.add.default, y, b.call(P.broadcast_in_dim.default, bias, [n, d], [1]))


def transpose_add_graph(b, x, y):
    return b.call(P.add.default, b.call(P.permute.default, x, [1, 0]), y)


def compile_prims(build, inputs, cache_dir, autotune=False):
    b = GraphBuilder()
    outs = build(b, *[b.input(x) for x in inputs])
    b.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return compile_graph(b.build(), b.examples,
                         InductorOptions(cache_dir=cache_dir, backend="triton", autotune=autotune))


def graph_workloads(device, big=True):
    """(name, graph builder, inputs, eager fn, bytes moved) for the pipeline benchmark."""
    n = 2**26 if big else 2**16
    rows, cols = (4096, 4096) if big else (64, 1000)
    r = lambda *s: torch.randn(*s, device=device)  # noqa: E731
    return [
        ("relu(x*2+1)*y", relu_chain_graph, [r(n), r(n)], lambda x, y: torch.relu(x * 2 + 1) * y, 3 * n * 4),
        ("softmax", softmax_graph, [r(rows, cols)], lambda x: torch.softmax(x, -1), 2 * rows * cols * 4),
        ("layer_norm", layer_norm_bias_graph, [r(rows, cols), r(cols), r(cols)],
         lambda x, w, b: torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5), (2 * rows * cols + 2 * cols) * 4),
        ("sum over dim 0 (column reduction)", lambda b, x: b.call(P.sum.default, x, [0]), [r(rows, cols)],
         lambda x: x.sum(0), (rows * cols + cols) * 4),
        ("x.t() + y (tiled)", transpose_add_graph, [r(2 * rows, 2 * cols), r(2 * cols, 2 * rows)],
         lambda x, y: x.t() + y, 3 * 4 * rows * cols * 4),
    ]


def _check(out, ref, dtype=torch.float32, reduced=1):
    # float32; a sum of `reduced` terms in another order differs by ~eps * sqrt(reduced) * |terms|
    tol = {torch.float32: (1e-5, 1e-5 * max(1.0, reduced ** 0.5))}[dtype]
    torch.testing.assert_close(out, ref, rtol=tol[0], atol=tol[1])


# ---- tests -----------------------------------------------------------------------------------

@pytest.mark.gpu
def test_simple_fn_one_kernel_gpu(tmp_path):
    spec = simple_fn_spec(10_000)
    launcher = build(spec, str(tmp_path))
    x = torch.randn(10_000, device="cuda")
    out = torch.empty_like(x)
    launcher(x, out)
    ref = x.clone()
    for _ in range(20):
        ref = ref + torch.sin(ref)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert launcher.source.count("@jit\ndef simple_fn") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("autotune", [False, True])
def test_workloads_match_eager_gpu(tmp_path, autotune):
    for name, spec, make, eager, _ in workloads("cuda", big=False):
        launcher = build(spec, str(tmp_path), autotune)
        args = make()
        args[-1].fill_(float("nan"))  # poison: every element must be written
        launcher(*args)
        _check(args[-1], eager(*args[:-1]))


@pytest.mark.gpu
def test_launch_fast_path_gpu(tmp_path):
    """See Note [Launch fast path]: later launches skip JITFunction.run and stay correct."""
    for name, spec, make, eager, _ in workloads("cuda", big=False):
        launcher = build(spec, str(tmp_path))
        for i in range(3):
            args = make()
            args[-1].fill_(float("nan"))
            launcher(*args)
            _check(args[-1], eager(*args[:-1]))
            assert launcher._fast is not None  # set by the first launch
            args[-1].fill_(float("nan"))
            assert launcher._fast.launch_now(args)  # and taken by the later ones
            _check(args[-1], eager(*args[:-1]))


_SECOND_PROCESS = """
import sys, time, torch
sys.path.insert(0, {tests!r})
from test_triton_gpu import build, workloads
t = time.perf_counter()
for name, spec, make, eager, _ in workloads("cuda", big=False):
    args = make(); build(spec, {cache!r}, autotune=True)(*args)
torch.cuda.synchronize()
print("SECOND", time.perf_counter() - t)
"""


def second_process_compiles_nothing(cache_dir: str) -> tuple[int, int, float]:
    """Run the small workloads in a fresh process on a warm cache; return (files before, after, s)."""
    def count():  # compiled kernels (Triton also writes a launcher stub per new signature)
        return sum(f.endswith(".cubin") for _, _, fs in os.walk(os.path.join(cache_dir, "triton")) for f in fs)
    before = count()
    code = _SECOND_PROCESS.format(tests=os.path.dirname(os.path.abspath(__file__)), cache=cache_dir)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ})
    seconds = float(out.stdout.split("SECOND")[1])
    return before, count(), seconds


@pytest.mark.gpu
def test_second_process_recompiles_nothing_gpu(tmp_path):
    # A fresh process fills the cache (in this one, Triton's in-memory cache may already hold
    # these kernels from an earlier test, and then writes nothing to tmp_path).
    empty, filled, _ = second_process_compiles_nothing(str(tmp_path))
    assert filled > empty
    before, after, _ = second_process_compiles_nothing(str(tmp_path))
    assert before == after, "the second process wrote new cache files (it compiled or re-tuned)"


@pytest.mark.gpu
def test_launcher_stubs_built_with_the_kernels_gpu(tmp_path):
    """Note [launcher stubs built in parallel]: the group's warm-up builds each signature's C
    launcher on its pool; the first launches, one by one on this thread, build none."""
    from ember_inductor.codegen.triton_launch import TritonLauncher
    from ember_inductor.options import InductorOptions
    P = ember_prims.ops
    x, y = torch.randn(300, 500, device="cuda"), torch.randn(300, 500, device="cuda")
    b = GraphBuilder()
    xi, yi = b.input(x), b.input(y)
    b.output(b.call(P.sum.default, b.call(P.sin.default, xi), [0]), b.call(P.add.default, xi, yi),
             b.call(P.amax.default, b.call(P.mul.default, xi, yi), [1]))
    cg = compile_graph(b.build(), b.examples, InductorOptions(
        cache_dir=str(tmp_path), backend="triton", compile_workers=4, combo_kernels=False))

    def stubs():
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
                      if f.startswith("__triton_launcher"))
    launchers = [v for v in cg._fn.__globals__.values() if isinstance(v, TritonLauncher)]
    assert len(launchers) >= 2  # a group of one compiles at its launch
    launchers[0].group.warm()
    built = stubs()
    assert built
    out = cg([x, y])
    torch.cuda.synchronize()
    assert stubs() == built  # the first launches found every launcher built
    torch.testing.assert_close(out[0], torch.sin(x).sum(0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out[1], x + y)
    torch.testing.assert_close(out[2], (x * y).amax(1))


# ---- benchmark -------------------------------------------------------------------------------

def _bench(fn):
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--no-compile-ref", action="store_true", help="skip torch.compile")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import triton
    cache = tempfile.mkdtemp(prefix="ember_triton_")
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(), "sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
        "cuda": torch.version.cuda,
    }
    print(info, flush=True)
    rows = []

    # copy bandwidth: torch's device-to-device copy, and our own rendered copy kernel
    n = 2**26
    src, dst = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    ms = _bench(lambda: dst.copy_(src))
    copy_bw = 2 * n * 4 / ms / 1e6
    rows.append(("copy 2^26 f32", "torch copy_", ms, copy_bw))
    ours = build(copy_spec(n), cache)
    ours(src, dst)
    assert torch.equal(src, dst)
    ms = _bench(lambda: ours(src, dst))
    rows.append(("copy 2^26 f32", "ember", ms, 2 * n * 4 / ms / 1e6))
    print(f"copy bandwidth {copy_bw:.0f} GB/s", flush=True)

    # simple_fn: one kernel, compile time
    t = time.perf_counter()
    sf = build(simple_fn_spec(10_000), cache)
    x = torch.randn(10_000, device="cuda")
    o = torch.empty_like(x)
    sf(x, o)
    torch.cuda.synchronize()
    rows.append(("simple_fn 10k: render+compile+first run (ms, not a kernel time)", "ember",
                 (time.perf_counter() - t) * 1e3, float("nan")))
    print("simple_fn kernels:", sf.source.count("\n@jit\ndef simple_fn"), flush=True)

    # the product path: prims graph -> compile_graph -> wrapper + Triton kernels
    for name, graph, inputs, eager, nbytes in graph_workloads("cuda"):
        ref = eager(*inputs)
        for autotune in (False, True):
            t = time.perf_counter()
            cg = compile_prims(graph, inputs, cache, autotune)
            out = cg(inputs)[0]
            torch.cuda.synchronize()
            first = time.perf_counter() - t
            _check(out, ref, reduced=inputs[0].shape[0] if "dim 0" in name else 1)
            ms = _bench(lambda: cg(inputs))
            label = f"ember compile_graph{' autotuned' if autotune else ''} ({len(cg.kernels)} kernel)"
            rows.append((name, label, ms, nbytes / ms / 1e6))
            print(f"{name} {label}: {ms:.4f} ms, {100 * nbytes / ms / 1e6 / copy_bw:.1f}% of copy, "
                  f"compile+first call {first:.2f} s", flush=True)
    t = time.perf_counter()
    cg = compile_prims(simple_fn_graph, [torch.randn(10_000, device="cuda")], cache)
    torch.cuda.synchronize()
    print(f"simple_fn through compile_graph: {len(cg.kernels)} kernel(s), compile {time.perf_counter() - t:.2f} s",
          flush=True)

    # the renderer alone on hand-built KernelSpecs (no wrapper), eager, torch.compile
    for name, spec, make, eager, nbytes in workloads("cuda"):
        args = make()
        for autotune in (False, True):
            t = time.perf_counter()
            launcher = build(spec, cache, autotune)
            args[-1].fill_(float("nan"))
            launcher(*args)
            torch.cuda.synchronize()
            first = time.perf_counter() - t
            _check(args[-1], eager(*args[:-1]))
            ms = _bench(lambda: launcher(*args))
            label = "ember kernel only, autotuned" if autotune else "ember kernel only"
            rows.append((name, label, ms, nbytes / ms / 1e6))
            print(f"{name} {label}: {ms:.4f} ms, {nbytes / ms / 1e6:.0f} GB/s "
                  f"({100 * nbytes / ms / 1e6 / copy_bw:.1f}% of copy), first call {first:.2f} s, "
                  f"config {launcher.config(args, False)}", flush=True)
        ms = _bench(lambda: eager(*args[:-1]))
        rows.append((name, "eager", ms, nbytes / ms / 1e6))
        if not a.no_compile_ref:
            t = time.perf_counter()
            compiled = torch.compile(eager)
            compiled(*args[:-1])
            torch.cuda.synchronize()
            ct = time.perf_counter() - t
            ms = _bench(lambda: compiled(*args[:-1]))
            rows.append((name, f"torch.compile (compile {ct:.1f} s)", ms, nbytes / ms / 1e6))
            print(f"{name} torch.compile {ms:.4f} ms", flush=True)

    for name, spec, make, eager, _ in workloads("cuda", big=False):  # what the second process runs
        build(spec, cache, autotune=True)(*make())
    torch.cuda.synchronize()
    before, after, secs = second_process_compiles_nothing(cache)
    print(f"second process: compiled kernels in the cache {before} -> {after}, "
          f"small workloads took {secs:.2f} s", flush=True)

    # host overhead per launch, on a kernel too small to matter (1024 elements)
    small = build(copy_spec(1024), cache)
    xs, os_ = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")
    for fn_name, fn in (("ember launcher", lambda: small(xs, os_)),
                        ("torch.add(out=)", lambda: torch.add(xs, 1, out=os_))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t) / 2000 * 1e6
        print(f"host time per launch, {fn_name}: {us:.1f} us", flush=True)

    # a graph of several kernels: compile time with the parallel build
    def many(b, x):
        outs = [b.call(P.sum.default, b.call(op.default, x), [d]) for op in (P.sin, P.cos, P.exp)
                for d in (0, 1)]
        return tuple(outs)
    for rows_, workers in ((300, 4), (301, 1)):  # new sizes each time: nothing compiled yet
        t = time.perf_counter()
        x = torch.randn(rows_, 500, device="cuda")
        b = GraphBuilder()
        b.output(*many(b, b.input(x)))
        cg = compile_graph(b.build(), b.examples, InductorOptions(
            cache_dir=tempfile.mkdtemp(), backend="triton", compile_workers=workers))
        cg([x])
        torch.cuda.synchronize()
        print(f"6-output graph, compile_workers={workers}: {len(cg.kernels)} kernels, "
              f"cold compile+first run {time.perf_counter() - t:.2f} s", flush=True)

    print(f"\n| workload | impl | ms (median) | GB/s | % of copy ({copy_bw:.0f} GB/s) |")
    print("|---|---|---|---|---|")
    for name, impl, ms, bw in rows:
        pct = "" if bw != bw else f"{100 * bw / copy_bw:.1f}%"
        bws = "" if bw != bw else f"{bw:.0f}"
        print(f"| {name} | {impl} | {ms:.4f} | {bws} | {pct} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "copy_GBps": copy_bw, "rows": rows,
                       "second_process": [before, after, secs]}, f, indent=1)


if __name__ == "__main__":
    main()
