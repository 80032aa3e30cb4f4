"""Per-call cost of a cache hit on a module with ~300 parameters (guards dominate it).

Run: python packages/ember-capture/benchmarks/guard_cost.py [--number 2000] [--no-eager]
(on a busy machine `--number 300 --no-eager` keeps it to a minute)
A Sequential of 100 Linear(8, 8)+LayerNorm(8) (400 tensors) is captured with a backend that
returns ``gm.forward``; the row "capture overhead" is the cached call minus calling the
backend's callable directly, i.e. binding, guards and rebuilding the result. Run it on two
commits to compare guard changes.
"""
import argparse
import timeit

import torch

import ember_capture


def per_call_us(fn, *args, number=2000, repeat=7):
    times = timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)
    return min(times) / number * 1e6


def measure(number=2000, time_eager=True):
    layers = []
    for _ in range(100):
        layers += [torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)]
    m = torch.nn.Sequential(*layers)
    x = torch.randn(2, 8)
    with torch.no_grad():
        out = m(x)
        # A backend whose callable does no work: the cached call is capture's own cost.
        captured = ember_capture.capture(m, lambda gm, inputs: lambda *args: (out,))
        captured(x)
        overhead = per_call_us(captured, x, number=number)
        eager = per_call_us(m, x, number=number) if time_eager else float("nan")
    return sum(1 for _ in m.parameters()), overhead, eager


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=2000, help="calls per timing (7 timings, the least kept)")
    parser.add_argument("--no-eager", action="store_true", help="skip timing eager's forward")
    args = parser.parse_args()
    n, overhead, eager = measure(args.number, not args.no_eager)
    print(f"{n} parameters: capture overhead per cached call {overhead:.1f} us "
          f"({overhead / n * 1000:.0f} ns per parameter); eager forward {eager:.1f} us")
