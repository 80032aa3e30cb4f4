"""Ratios of eager / ember (C++ backend) / torch.compile on hand-built prims graphs, on this CPU.

    python packages/ember-inductor/benchmarks/cpu_ratios.py [--no-torch-compile]

torch.compile is skipped for simple_fn: its inductor takes minutes to compile it (see
ARCHITECTURE.md, "Known pitfalls").
"""
from __future__ import annotations

import argparse
import statistics
import time

import ember_prims
import torch

from ember_inductor import compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
CPU = torch.device("cpu")


def simple_fn_graph(b, x):
    for _ in range(20):
        x = b.call(P.add.default, x, b.call(P.sin.default, x))
    return x


def simple_fn_eager(x):
    for _ in range(20):
        x = x + torch.sin(x)
    return x


def softmax_graph(b, x):
    shape = list(x.meta["val"].shape)
    m = b.call(P.broadcast_in_dim.default, b.call(P.amax.default, x, [1]), shape, [0])
    e = b.call(P.exp.default, b.call(P.sub.default, x, m))
    s = b.call(P.broadcast_in_dim.default, b.call(P.sum.default, e, [1]), shape, [0])
    return b.call(P.div.default, e, s)


def layer_norm_graph(b, x, w, bias):
    n, d = x.meta["val"].shape
    full = lambda v: b.call(P.full.default, [n], v, dtype=torch.float32, device=CPU)  # noqa: E731
    bc = lambda t: b.call(P.broadcast_in_dim.default, t, [n, d], [0])  # noqa: E731
    mean = b.call(P.div.default, b.call(P.sum.default, x, [1]), full(float(d)))
    xc = b.call(P.sub.default, x, bc(mean))
    var = b.call(P.div.default, b.call(P.sum.default, b.call(P.mul.default, xc, xc), [1]), full(float(d)))
    rstd = b.call(P.rsqrt.default, b.call(P.add.default, var, full(1e-5)))
    y = b.call(P.mul.default, xc, bc(rstd))
    y = b.call(P.mul.default, y, b.call(P.broadcast_in_dim.default, w, [n, d], [1]))
    return b.call(P.add.default, y, b.call(P.broadcast_in_dim.default, bias, [n, d], [1]))


def gelu_graph(b, x):
    shape = list(x.meta["val"].shape)
    full = lambda v: b.call(P.full.default, shape, v, dtype=torch.float32, device=CPU)  # noqa: E731
    inner = b.call(P.erf.default, b.call(P.mul.default, x, full(0.7071067811865476)))
    return b.call(P.mul.default, b.call(P.mul.default, x, full(0.5)), b.call(P.add.default, inner, full(1.0)))


CASES = {
    "simple_fn 1e6": (simple_fn_graph, simple_fn_eager, lambda: [torch.randn(1_000_000)], False),
    "softmax 4096x1024": (softmax_graph, lambda x: torch.softmax(x, 1), lambda: [torch.randn(4096, 1024)], True),
    "layer_norm 4096x1024": (layer_norm_graph,
                             lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[1],), w, b),
                             lambda: [torch.randn(4096, 1024), torch.randn(1024), torch.randn(1024)], True),
    "gelu 4e6": (gelu_graph, lambda x: torch.nn.functional.gelu(x), lambda: [torch.randn(4_000_000)], True),
}


CLOCK = time.perf_counter


def bench(fns: dict, reps=10, rounds=9) -> dict:
    """Median over interleaved rounds of the mean time per call (ms): the machine is shared, so
    every implementation sees the same background load."""
    for f in fns.values():
        f()
        f()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = CLOCK()
            for _ in range(reps):
                f()
            times[k].append((CLOCK() - t) / reps * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--single-thread-cpu-time", action="store_true",
                    help="one thread everywhere, CPU time per call: steadier on a shared machine")
    args = ap.parse_args()
    global CLOCK
    options = {}
    if args.single_thread_cpu_time:
        torch.set_num_threads(1)
        options = {"num_threads": 1}
        CLOCK = time.process_time
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':24} {'eager ms':>9} {'ember ms':>9} {'compile ms':>10} {'eager/ember':>11} "
          f"{'tc/ember':>9} {'ember compile s':>15}")
    for name, (graph, eager, make, try_tc) in CASES.items():
        inputs = make()
        b = GraphBuilder()
        b.output(graph(b, *[b.input(x) for x in inputs]))
        t0 = time.perf_counter()
        cg = compile_graph(b.build(), b.examples, options)
        ct = time.perf_counter() - t0
        torch.testing.assert_close(cg(inputs)[0], eager(*inputs), rtol=1e-4, atol=1e-4)
        fns = {"eager": lambda: eager(*inputs), "ember": lambda: cg(inputs)}
        if try_tc and not args.no_torch_compile:
            compiled = torch.compile(eager)
            compiled(*inputs)
            fns["tc"] = lambda: compiled(*inputs)
        r = bench(fns)
        te, tm, tt = r["eager"], r["ember"], r.get("tc", float("nan"))
        print(f"{name:24} {te:9.3f} {tm:9.3f} {tt:10.3f} {te / tm:11.2f} {tt / tm:9.2f} {ct:15.2f}")


if __name__ == "__main__":
    main()
