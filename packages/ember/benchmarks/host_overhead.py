"""ember's own host time per call, on the CPU: capture's entry (guards) and ember_autograd's
runtime around compiled graphs that cost nothing.

A module of 300 parameters (75 blocks of Linear(w, w) + LayerNorm(w)) is compiled through
capture and `ember_autograd.aot` with compilers whose graphs are *memoized*: the first call
runs the graph, later calls hand back the same outputs as fresh aliases (autograd attaches a new
grad_fn to each, and a parameter's gradient is taken over, not copied, as a real backward's
is). What a call then costs is ember's Python around the graphs, the part that keeps ember
below torch.compile on a GPU (a CUDA-graph replay or a Triton launch sequence costs the host
little):

  inference      no_grad: capture's entry + InferenceRunner
  train fwd      grad enabled: capture's entry + TrainingRunner (the autograd.Function)
  train fwd+bwd  the same, then `out.sum().backward()` through the memoized backward (the
                 gradients are reset to None between calls, untimed, as `zero_grad()` does)
  forward in aot ember_autograd's runtime in the forward (AotFunction.__call__, the memoized
                 graph included); the rest of a forward is capture's (guards, binding)
  guards         capture's guards of the entry alone, without the graph call

`--torch-compile` adds torch.compile with the same memoized graphs behind AOTAutograd (its
host time per call: Dynamo's guards and AOTAutograd's runtime).

Times are per call, the median of `--calls` calls, of the *thread's CPU time* by default
(`--clock cpu`: the machine's other load barely moves it; `--clock wall` for perf_counter).
Run it on two commits to compare:

    python packages/ember/benchmarks/host_overhead.py [--blocks 75] [--calls 300] [--torch-compile]

`--speculative-ab`: only the training forward, with the requires-grad key read on every call
(as before Note [speculative requires-grad key]) against the speculative path, alternating in
one process.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import ember
import ember_autograd
import ember_autograd.api as aot_api
from ember_capture import native
from cudagraph_host_overhead import Blocks  # this folder is on sys.path when run as a script

CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


def memoized(gm: torch.fx.GraphModule, example_inputs: list):
    """A compiled graph that runs once, then returns the same outputs as fresh aliases (the
    saved ones, when the graph marks them, as they are)."""
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


def torch_backend():
    """torch.compile's counterpart: AOTAutograd around the same memoized graphs (benchmarks may
    use torch's compiler as the reference)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def boxed(gm, example_inputs):
        return make_boxed_func(memoized(gm, example_inputs))
    return aot_autograd(fw_compiler=boxed, bw_compiler=boxed)


class Timer:
    """Time spent inside `cls.__call__` (patched for the lifetime of the timer)."""

    def __init__(self, cls, clock) -> None:
        self.times: list[float] = []
        self.cls, self.orig = cls, cls.__call__
        orig = cls.__call__

        def timed(obj, *args):
            start = clock()
            try:
                return orig(obj, *args)
            finally:
                self.times.append(clock() - start)
        cls.__call__ = timed

    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6 if self.times else float("nan")

    def stop(self) -> None:
        self.cls.__call__ = self.orig


def median_us(call, x, calls: int, clock, backward: bool = False, params=()) -> float:
    times = []
    for _ in range(calls):
        for p in params:
            p.grad = None
        start = clock()
        out = call(x)
        if backward:
            out.sum().backward()
        times.append(clock() - start)
        del out
    return statistics.median(times) * 1e6


def guards_us(fast, x, calls: int, clock) -> float:
    """The entry's guards alone: its source up to the graph call, run on the same locals."""
    state = fast._compiled_call._ember_state
    entry = state.entries[-1]
    lines = entry.source.split("\n")
    cut = next(i for i, line in enumerate(lines) if "__compiled(" in line)
    scope = entry.__globals__
    exec(compile("\n".join(lines[:cut] + ["    return None"]), "<guards>", "exec"), scope)
    guards, L = scope["__entry"], state.bind(x)
    assert guards(L, (x,), {}) is None, "the guards miss"
    return median_us(lambda _: guards(L, (x,), {}), x, calls, clock)


def measure(blocks: int = 75, width: int = 8, calls: int = 300, clock=time.thread_time,
            torch_compile: bool = False) -> list[tuple]:
    torch.manual_seed(0)
    model = Blocks(blocks, width)
    params = list(model.parameters())
    x = torch.randn(2, width)
    rows = []
    for phase in ("inference", "train fwd", "train fwd+bwd"):
        train = phase != "inference"
        backward = phase.endswith("bwd")
        with torch.enable_grad() if train else torch.no_grad():
            eager = median_us(model, x, max(calls // 10, 5), clock, backward, params)
            fast = ember.compile(model, backend=backend)
            median_us(fast, x, 3, clock, backward, params)  # compile, first backward
            timer = Timer(aot_api.AotFunction, clock)  # the forward's time in ember_autograd's runtime
            ember_us = median_us(fast, x, calls, clock, backward, params)
            aot_us = timer.median_us()
            timer.stop()
            guard_us = guards_us(fast, x, calls, clock)
            torch_us = float("nan")
            if torch_compile:
                torch._dynamo.reset()
                ref = torch.compile(model, backend=torch_backend())
                median_us(ref, x, 3, clock, backward, params)
                torch_us = median_us(ref, x, calls, clock, backward, params)
        rows.append((phase, eager, ember_us, aot_us, guard_us, torch_us))
        ember.reset()
    return rows


def speculative_ab(blocks: int = 75, width: int = 8, rounds: int = 40, clock=time.thread_time) -> dict:
    """A training forward with the requires-grad key read on every call (the code before Note
    [speculative requires-grad key]: the last runner forgotten before each call) against the
    speculative path, alternating in one process (the machine's load moves both alike)."""
    torch.manual_seed(0)
    model = Blocks(blocks, width)
    x = torch.randn(2, width)
    made = []

    def remembered(gm, example_inputs):
        made.append(backend(gm, example_inputs))
        return made[-1]
    fast = ember.compile(model, backend=remembered)
    fast(x).sum().backward()
    (aot,) = made
    res: dict = {"key read per call": [], "speculative": []}
    for _ in range(rounds):
        for name, times in res.items():
            one = []
            for _ in range(20):
                if name == "key read per call":
                    aot._last_training = None
                start = clock()
                out = fast(x)
                one.append(clock() - start)
                del out
            times.append(statistics.median(one) * 1e6)
    ember.reset()
    return {name: statistics.median(times) for name, times in res.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=75)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--torch-compile", action="store_true", help="also torch.compile (AOTAutograd, memoized)")
    parser.add_argument("--speculative-ab", action="store_true",
                        help="only the training forward, key read per call against speculative, alternating")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not native.wait():  # Note [Native guards]: timed with the checker a warm machine has
        print("the native guard checker could not be built here: the entries use the Python checks")
    if args.speculative_ab:
        for name, us in speculative_ab(args.blocks, args.width, clock=CLOCKS[args.clock]).items():
            print(f"train fwd, {name}: {us:.1f} us (median)")
        return
    rows = measure(args.blocks, args.width, args.calls, CLOCKS[args.clock], args.torch_compile)
    print(f"host time per call, median us, {args.clock} clock ({args.blocks * 4} parameters, graphs memoized)")
    print(f"{'phase':<15} {'eager':>9} {'ember':>9} {'forward in aot':>15} {'guards':>9} {'torch.compile':>14}")
    for phase, eager, ember_us, aot_us, guard_us, torch_us in rows:
        print(f"{phase:<15} {eager:9.1f} {ember_us:9.1f} {aot_us:15.1f} {guard_us:9.1f} {torch_us:14.1f}")


if __name__ == "__main__":
    main()
