"""ember's own host time per call, on the CPU: capture's entry (guards) and ember_autograd's
runtime around compiled graphs that cost nothing.

A module of 300 parameters (75 blocks of Linear(w, w) + LayerNorm(w)) is compiled through
capture and `ember_autograd.aot` with compilers whose graphs are *memoized*: the first call
runs the graph, later calls hand back the same outputs (fresh aliases of the user-visible ones).
What a call then costs is ember's Python around the graphs, the part that keeps ember below
torch.compile on a GPU (a CUDA-graph replay or a Triton launch sequence costs the host little):

  inference      no_grad: capture's entry + InferenceRunner
  train fwd      grad enabled: capture's entry + TrainingRunner (the autograd.Function)
  train fwd+bwd  the same, then `out.sum().backward()` through the memoized backward
  forward in aot ember_autograd's runtime in the forward (AotFunction.__call__, the memoized
                 graph included); the rest of a forward is capture's (guards, binding)

Run it on two commits to compare (medians in us; the machine's load moves them, so compare
within one run or take the smaller of several):

    python packages/ember/benchmarks/host_overhead.py [--blocks 75] [--calls 300]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import ember
import ember_autograd
import ember_autograd.api as aot_api
from cudagraph_host_overhead import Blocks, Clock  # this folder is on sys.path when run as a script


def memoized(gm: torch.fx.GraphModule, example_inputs: list):
    """A compiled graph that runs once, then returns the same outputs: the user-visible ones as
    fresh aliases (autograd attaches a new grad_fn to each), the saved ones as they are."""
    handed = gm.graph.output_node().meta.get("ember_saved_outputs")
    memo: list = []

    def call(*args):
        if not memo:
            memo.extend(gm(*args))
        n = len(memo) if handed is None else handed
        return (*(o.detach() if isinstance(o, torch.Tensor) else o for o in memo[:n]), *memo[n:])
    return call


def backend(gm, example_inputs):
    return ember_autograd.aot(gm, example_inputs, fw_compiler=memoized, bw_compiler=memoized)


def median_us(call, x, calls: int, backward: bool = False) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        out = call(x)
        if backward:
            out.sum().backward()
        times.append(time.perf_counter() - start)
        del out
    return statistics.median(times) * 1e6


def measure(blocks: int = 75, width: int = 8, calls: int = 300) -> list[tuple[str, float, float, float]]:
    torch.manual_seed(0)
    model = Blocks(blocks, width)
    x = torch.randn(2, width)
    rows = []
    clock = Clock(aot_api.AotFunction)  # the forward's time in ember_autograd's runtime
    for phase in ("inference", "train fwd", "train fwd+bwd"):
        train = phase != "inference"
        backward = phase.endswith("bwd")
        with torch.enable_grad() if train else torch.no_grad():
            eager = median_us(model, x, max(calls // 10, 5), backward)
            fast = ember.compile(model, backend=backend)
            median_us(fast, x, 3, backward)  # compile, first backward
            clock.reset()
            ember_us = median_us(fast, x, calls, backward)
        rows.append((phase, eager, ember_us, clock.median_us()))
        ember.reset()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=75)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = measure(args.blocks, args.width, args.calls)
    print(f"ember host time per call, median us ({args.blocks * 4} parameters, graphs memoized)")
    print(f"{'phase':<15} {'eager':>9} {'ember':>9} {'forward in aot':>15}")
    for phase, eager, ember_us, aot_us in rows:
        print(f"{phase:<15} {eager:9.1f} {ember_us:9.1f} {aot_us:15.1f}")


if __name__ == "__main__":
    main()
