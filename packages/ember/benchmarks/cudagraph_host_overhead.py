"""Host time of one compiled call that replays a CUDA graph (mode="reduce-overhead").

A module of 300 parameters (75 blocks of Linear(64, 64) + LayerNorm(64)), batch 8: its GPU work
is small, so what a call costs is the host's. For each variant, the median host time of one
call (time.perf_counter around the call; the GPU is synchronized every 8 calls so that the
launch queue never blocks a call):

  eager          the module itself: one launch per kernel
  raw replay     torch.cuda.CUDAGraph of the eager module, replay() alone: the floor
  ember          ember.compile(mode="reduce-overhead"), the whole call, and of it:
    aot          ember_autograd's runtime (AotFunction: runner choice, autograd.Function in
                 training, outputs), the graph runner included; the rest is capture's entry
                 (guards, argument binding)
    runner       ember's graph runner (address check, batch copy, replay, outputs)
  torch.compile  torch.compile(mode="reduce-overhead"), for reference

Then the runner's steps one by one, on the inference graph: the address check of the static
inputs, the batch copy, replay(), the hand-out of the outputs.

Inference (no_grad, eval) and a training forward (grad enabled; the backward runs, untimed).
`--resnet50`: torchvision's resnet50 at batch 1 instead (inference only). Run on a CUDA machine:

    python packages/ember/benchmarks/cudagraph_host_overhead.py [--no-torch-compile] [--resnet50]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import ember
import ember.cudagraphs as cudagraphs
import ember_autograd.api as aot_api


class Blocks(torch.nn.Module):
    def __init__(self, n: int = 75, width: int = 64) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.LayerNorm(width)) for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = x + torch.relu(block(x))
        return x


def host_us(call, inputs, calls: int = 200, backward: bool = False) -> float:
    times = []
    for i in range(calls):
        if i % 8 == 0:
            torch.cuda.synchronize()
        x = inputs[i % len(inputs)]
        start = time.perf_counter()
        out = call(x)
        times.append(time.perf_counter() - start)
        if backward:
            out.sum().backward()
        del out
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


class Clock:
    """Median host time spent inside `cls.__call__` (patched for the lifetime of the clock)."""

    def __init__(self, cls) -> None:
        self.times: list[float] = []
        self.last = None
        orig = cls.__call__
        clock = self

        def timed(obj, *args):
            start = time.perf_counter()
            try:
                return orig(obj, *args)
            finally:
                clock.times.append(time.perf_counter() - start)
                clock.last = (obj, args)

        cls.__call__ = timed

    def reset(self) -> None:
        self.times = []

    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6 if self.times else float("nan")


def raw_replay_us(model, x) -> float:
    static_x = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        model(static_x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        model(static_x)
    return host_us(lambda _: graph.replay() or torch.zeros(()), [x])


def step_us(fn, n: int = 500) -> float:
    times = []
    for i in range(n):
        if i % 8 == 0:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def runner_steps(runner, args) -> dict[str, float]:
    rec = runner.rec
    steps = {f"address check ({len(rec.static)} static inputs)": step_us(lambda: rec.check(args))}
    steps["batch copy"] = step_us(lambda: [rec.inputs[i].copy_(args[i]) for i in rec.copied])
    steps["replay()"] = step_us(rec.graph.replay)
    steps["hand out outputs"] = step_us(lambda: runner._hand_out(rec))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--resnet50", action="store_true", help="torchvision resnet50, batch 1, instead")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.resnet50:
        import torchvision
        model = torchvision.models.resnet50().cuda()
        inputs = [torch.randn(1, 3, 224, 224, device="cuda") for _ in range(4)]
    else:
        model = Blocks().cuda()
        inputs = [torch.randn(8, 64, device="cuda") for _ in range(4)]
    n_params = sum(1 for _ in model.parameters())
    runner_clock = Clock(cudagraphs.GraphRunner)
    aot_clock = Clock(aot_api.AotFunction)
    rows, steps = [], {}
    for phase in ("inference", "training forward")[:1 if args.resnet50 else 2]:
        train = phase != "inference"
        model.train(train)
        with torch.enable_grad() if train else torch.no_grad():
            eager = host_us(model, inputs, args.calls, backward=train)
            fast = ember.compile(model, mode="reduce-overhead")
            host_us(fast, inputs[:3], 3, backward=train)  # warm-up, recording, first replay
            runner_clock.reset()
            aot_clock.reset()
            ember_us = host_us(fast, inputs, args.calls, backward=train)
            aot_us, runner_us = aot_clock.median_us(), runner_clock.median_us()
            if not train:
                runner, (call_args,) = runner_clock.last
                steps = runner_steps(runner, call_args)
            tc_us = float("nan")
            if not args.no_torch_compile:
                tc = torch.compile(model, mode="reduce-overhead")
                host_us(tc, inputs[:3], 3, backward=train)
                tc_us = host_us(tc, inputs, args.calls, backward=train)
        raw = raw_replay_us(model, inputs[0]) if not train else float("nan")
        rows.append((phase, eager, raw, ember_us, aot_us, runner_us, tc_us))
    print(f"\nhost time of one call, median us ({n_params} parameters, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__})")
    print(f"{'phase':<18} {'eager':>8} {'raw replay':>11} {'ember':>8} {'  aot':>8} {'  runner':>9} {'torch.compile':>14}")
    for phase, eager, raw, ember_us, aot_us, runner_us, tc_us in rows:
        print(f"{phase:<18} {eager:8.1f} {raw:11.1f} {ember_us:8.1f} {aot_us:8.1f} {runner_us:9.1f} {tc_us:14.1f}")
    print("\ninference runner, step by step (median us):")
    for name, us in steps.items():
        print(f"  {name:<34} {us:7.1f}")


if __name__ == "__main__":
    main()
