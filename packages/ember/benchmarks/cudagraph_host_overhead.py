"""Host time of one compiled call that replays a CUDA graph (mode="reduce-overhead").

A module of 300 parameters (75 blocks of Linear(64, 64) + LayerNorm(64)), batch 8: its GPU work
is small, so what a call costs is the host's. For each variant, the median host time of one
call (time.perf_counter around the call; the GPU is synchronized every 8 calls so that the
launch queue never blocks a call):

  eager               the module itself: one launch per kernel
  raw replay          torch.cuda.CUDAGraph of the eager module, replay() alone: the floor
  ember               ember.compile(mode="reduce-overhead"), the whole call (guards, entry,
                      autograd runtime, graph runner, replay)
    runner            of which ember's graph runner (checks, batch copy, replay, outputs)
  torch.compile       torch.compile(mode="reduce-overhead"), for reference

Inference (no_grad, eval) and a training forward (grad enabled; the backward is run but not
timed). Run on a CUDA machine:

    python packages/ember/benchmarks/cudagraph_host_overhead.py [--no-torch-compile]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import ember
import ember.cudagraphs as cudagraphs


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


class RunnerClock:
    """Adds up the host time spent inside ember's graph runners (forward ones)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.calls = 0
        self._orig = cudagraphs.GraphRunner.__call__
        clock = self

        def timed(runner, args):
            start = time.perf_counter()
            try:
                return clock._orig(runner, args)
            finally:
                clock.total += time.perf_counter() - start
                clock.calls += 1

        cudagraphs.GraphRunner.__call__ = timed

    def reset(self) -> None:
        self.total, self.calls = 0.0, 0

    def mean_us(self) -> float:
        return self.total / max(self.calls, 1) * 1e6


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Blocks().cuda()
    n_params = sum(1 for _ in model.parameters())
    inputs = [torch.randn(8, 64, device="cuda") for _ in range(4)]
    clock = RunnerClock()
    rows = []
    for phase in ("inference", "training forward"):
        train = phase != "inference"
        model.train(train)
        grad = torch.enable_grad() if train else torch.no_grad()
        with grad:
            eager = host_us(model, inputs, args.calls, backward=train)
            fast = ember.compile(model, mode="reduce-overhead")
            for x in inputs[:3]:
                out = fast(x)
                if train:
                    out.sum().backward()
            clock.reset()
            ember_us = host_us(fast, inputs, args.calls, backward=train)
            runner_us = clock.mean_us()
            tc_us = float("nan")
            if not args.no_torch_compile:
                tc = torch.compile(model, mode="reduce-overhead")
                for x in inputs[:3]:
                    out = tc(x)
                    if train:
                        out.sum().backward()
                tc_us = host_us(tc, inputs, args.calls, backward=train)
        raw = raw_replay_us(model, inputs[0]) if not train else float("nan")
        rows.append((phase, eager, raw, ember_us, runner_us, tc_us))
    print(f"\nhost time of one call, median us ({n_params} parameters, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__})")
    print(f"{'phase':<18} {'eager':>8} {'raw replay':>11} {'ember':>8} {'  runner':>9} {'torch.compile':>14}")
    for phase, eager, raw, ember_us, runner_us, tc_us in rows:
        print(f"{phase:<18} {eager:8.1f} {raw:11.1f} {ember_us:8.1f} {runner_us:9.1f} {tc_us:14.1f}")


if __name__ == "__main__":
    main()
