"""The host time of one cache-hit compiled call, on the CPU, split into its parts (issues 15, 16).

A call of `ember.compile(model)` that replays a graph costs the host: capture's guards, the rest
of capture's entry (binding the arguments, the generated code around the graph call), ember_autograd's
runtime (runner choice; in training the autograd.Function), and under mode="reduce-overhead"
the Python of the CUDA graph runner (`ember/cudagraphs.py`) around `replay()`. All of it is
device-agnostic Python and is timed here on CPU tensors, with compiled graphs that are *memoized*
(the first call runs the graph, later calls hand back the same outputs as fresh aliases; see
packages/ember/benchmarks/host_overhead.py), so a call costs only the compiler's own host work.

Columns (median µs per call, the thread's CPU time; ember, +cudagraphs and tc alternate in rounds):
  ember        ember.compile(model, backend=aot + memoized graphs): the whole call
  guards       capture's guards of the entry alone (its source up to the graph call)
  aot          of `ember`, the time inside ember_autograd's AotFunction (runner, autograd.Function)
  graph        the memoized graph itself (the floor of the compiled callable)
  +cudagraphs  ember with the forward wrapped in cudagraphs.GraphRunner (its address check, input
               copies, output hand-out); the recording is stubbed on the CPU and replay() is a
               no-op, so this is reduce-overhead's Python without the replay
  runner       of `+cudagraphs`, the time inside GraphRunner.__call__ (the memoized graph excluded:
               it is not called on a replay)
  tc           torch.compile(model, backend=aot_autograd(memoized graphs)): Dynamo's guards and
               AOTAutograd's runtime, the same graphs behind them

Models: `seq150` (nn.Sequential of 150 Linear(8, 8): 300 parameters) and `resnet50` (torchvision,
batch 2, 3x32x32: 161 parameters and 106 buffers; needs torchvision). Phases: `infer` (eval, under
no_grad) and `train` (a training forward: grad enabled, parameters require grad; the backward
is not run).

    python tools/host_call_cpu.py [--models seq150,resnet50] [--phases infer,train] [--calls 300] [--no-tc]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "ember" / "benchmarks"))

import ember  # noqa: E402
import ember.cudagraphs as cudagraphs  # noqa: E402
import ember_autograd  # noqa: E402
import ember_autograd.api as aot_api  # noqa: E402
from ember_capture import native  # noqa: E402
from host_overhead import Timer, guards_us, memoized, torch_backend  # noqa: E402

clock = time.thread_time


def build(name: str):
    torch.manual_seed(0)
    if name == "seq150":
        return torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(150)]), torch.randn(2, 8)
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(), torch.randn(2, 3, 32, 32)
    raise SystemExit(f"unknown model {name}")


class _NoReplay:
    """Stands in for the recorded torch.cuda.CUDAGraph on the CPU: what is timed is the runner's
    Python around replay(), not the replay."""

    def replay(self) -> None:
        pass


def _cpu_capture(pool, body):
    return _NoReplay(), body()


def cudagraph_backend(gm, example_inputs):
    """aot + memoized graphs, the forward in a GraphRunner whose recording is the graph's output
    (ember's own functions stubbed for the CPU: `_capture`, `_is_cuda`)."""
    static = cudagraphs.static_positions(gm, example_inputs)
    runners = []

    def fw(g, ex):
        meta = g.graph.output_node().meta
        runner = cudagraphs.GraphRunner(memoized(g, ex), label="fw", pool=cudagraphs.Pool((0, 0)),
                                        static_hint=static, handed=meta.get("ember_saved_outputs"),
                                        mutations=meta.get("ember_mutations", ()))
        runners.append(runner)
        return runner
    return ember_autograd.aot(gm, example_inputs, fw_compiler=fw, bw_compiler=memoized)


def plain_backend(gm, example_inputs):
    return ember_autograd.aot(gm, example_inputs, fw_compiler=memoized, bw_compiler=memoized)


def per_call(fn, x, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = clock()
        out = fn(x)
        times.append(clock() - start)
        del out
    return statistics.median(times) * 1e6


def measure(model, x, train: bool, calls: int, tc: bool, rounds: int = 10) -> dict[str, float]:
    """The totals (ember, +cudagraphs, tc) alternate in `rounds` rounds of calls/rounds calls
    each, so that the machine's load moves them alike; the splits are timed after."""
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(train)
    row: dict[str, float] = {}
    saved = cudagraphs._capture, cudagraphs._is_cuda
    with torch.enable_grad() if train else torch.no_grad():
        variants = {"ember": ember.compile(model, backend=plain_backend)}
        cudagraphs._capture, cudagraphs._is_cuda = _cpu_capture, lambda v: isinstance(v, torch.Tensor)
        try:
            variants["+cudagraphs"] = ember.compile(model, backend=cudagraph_backend)
            if tc:
                variants["tc"] = torch.compile(model, backend=torch_backend())
            for fn in variants.values():
                per_call(fn, x, 3)  # compile; the runner's warm-up, recording and first replay
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(rounds):
                for name, fn in variants.items():
                    times[name].append(per_call(fn, x, max(calls // rounds, 1)))
            row.update({name: statistics.median(ts) for name, ts in times.items()})
            timer = Timer(cudagraphs.GraphRunner, clock)
            per_call(variants["+cudagraphs"], x, calls)
            row["runner"] = timer.median_us()
            timer.stop()
        finally:
            cudagraphs._capture, cudagraphs._is_cuda = saved
        timer = Timer(aot_api.AotFunction, clock)
        per_call(variants["ember"], x, calls)
        row["aot"] = timer.median_us()
        timer.stop()
        row["guards"] = guards_us(variants["ember"], x, calls, clock)
        row.setdefault("tc", float("nan"))
        ember.reset()
        torch._dynamo.reset()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="seq150,resnet50")
    parser.add_argument("--phases", default="infer,train")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--no-tc", action="store_true", help="leave torch.compile out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not native.wait():  # Note [Native guards]: timed with the checker a warm machine has
        print("the native guard checker could not be built here: the entries use the Python checks")
    cols = ["ember", "guards", "aot", "+cudagraphs", "runner", "tc"]
    print(f"host time of one cache-hit call, median us, thread CPU time (torch {torch.__version__}, "
          f"Python {sys.version.split()[0]})")
    print(f"{'model':<10} {'phase':<6} {'params':>6} " + " ".join(f"{c:>11}" for c in cols))
    for name in args.models.split(","):
        model, x = build(name)
        n = sum(1 for _ in model.parameters())
        for phase in args.phases.split(","):
            row = measure(model, x, phase == "train", args.calls, not args.no_tc)
            print(f"{name:<10} {phase:<6} {n:>6} " + " ".join(f"{row[c]:11.1f}" for c in cols), flush=True)


if __name__ == "__main__":
    main()
