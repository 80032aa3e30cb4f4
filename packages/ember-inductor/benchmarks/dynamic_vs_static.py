"""Symbolic against static kernels (issue #18) on the C++ backend: each graph compiled once with
static sizes and once with symbolic ones (hints 8x12: far from the measured shape), then timed
on the same inputs; and the wrapper's per-call cost at a tiny shape.

    python packages/ember-inductor/benchmarks/dynamic_vs_static.py
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import test_dynamic_shapes as dyn  # noqa: E402
from ember_inductor import compile_graph  # noqa: E402
from ember_inductor.graph_builder import GraphBuilder  # noqa: E402

P = dyn.P


def static_softmax(n, m):
    b = GraphBuilder()
    x = b.input(torch.randn(n, m))
    mx = b.call(P.broadcast_in_dim.default, b.call(P.amax.default, x, [1]), [n, m], [0])
    e = b.call(P.exp.default, b.call(P.sub.default, x, mx))
    s = b.call(P.broadcast_in_dim.default, b.call(P.sum.default, e, [1]), [n, m], [0])
    b.output(b.call(P.div.default, e, s))
    return b


def static_pointwise(n, m):
    b = GraphBuilder()
    x, w = b.input(torch.randn(n, m)), b.input(torch.randn(m))
    rs = b.call(P.sum.default, x, [1])
    wb, rb = b.call(P.broadcast_in_dim.default, w, [n, m], [1]), b.call(P.broadcast_in_dim.default, rs, [n, m], [0])
    b.output(b.call(P.mul.default, b.call(P.sin.default, b.call(P.add.default, x, wb)), rb), rs)
    return b


def median_ms(fn, inputs, reps=30) -> float:
    for _ in range(3):
        fn(inputs)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


CASES = [("softmax", static_softmax, dyn._softmax_graph, lambda n, m: [torch.randn(n, m)]),
         ("pointwise+rowsum", static_pointwise, dyn._pointwise_graph, lambda n, m: [torch.randn(n, m), torch.randn(m)])]


def main() -> None:
    shape = (4096, 1024)
    for name, make_static, make_dynamic, make_inputs in CASES:
        s, d = make_static(*shape), make_dynamic()
        static = compile_graph(s.build(), s.examples, {"backend": "cpp"})
        dynamic = compile_graph(d.build(), d.examples, {"backend": "cpp"})
        inputs = make_inputs(*shape)
        for got, want in zip(dynamic(inputs), static(inputs)):
            torch.testing.assert_close(got, want)
        rounds = [(median_ms(static, inputs), median_ms(dynamic, inputs)) for _ in range(5)]
        st, dt = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
        tiny = median_ms(dynamic, make_inputs(8, 12), reps=200) * 1e3
        print(f"{name} {shape}: static {st:.2f} ms, symbolic {dt:.2f} ms, symbolic/static {dt / st:.2f}; "
              f"one call at 8x12: {tiny:.1f} us")


if __name__ == "__main__":
    main()
