"""Per-call overhead of a cache hit: a captured trivial function against calling it eagerly.

Run: python packages/ember-capture/benchmarks/cache_hit_overhead.py
The backend returns ``gm.forward`` (the captured graph run as Python). The first row compares
with calling the function eagerly; the second with calling the backend's callable directly,
which isolates capture's own cost (binding, guards, rebuilding the result).
"""
import timeit

import torch

import ember_capture


def trivial(x):
    return x + 1


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


def per_call_us(fn, *args, number=20000, repeat=7):
    times = timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)
    return min(times) / number * 1e6


def measure():
    x = torch.randn(4)
    compiled = []
    captured = ember_capture.capture(trivial, lambda gm, inputs: compiled.append(gm.forward) or gm.forward)
    captured(x)
    m = Tiny()
    captured_m = ember_capture.capture(m, lambda gm, inputs: gm.forward)
    captured_m(x)
    dynamic = []  # the same function with a symbolic size (issue #18): guard `X.size(0) >= 2`
    captured_d = ember_capture.capture(trivial, lambda gm, inputs: dynamic.append(gm.forward) or gm.forward,
                                       ember_capture.CaptureConfig(dynamic=True))
    captured_d(x)
    related = ember_capture.capture(halves, lambda gm, inputs: gm.forward, ember_capture.CaptureConfig(dynamic=True))
    related(x)
    rows = [("trivial x + 1", per_call_us(trivial, x), per_call_us(captured, x)),
            ("  graph alone (gm.forward)", per_call_us(compiled[0], x), per_call_us(captured, x)),
            ("  dynamic=True, vs its graph", per_call_us(dynamic[0], x), per_call_us(captured_d, x)),
            ("x.view(2, n // 2), dynamic", per_call_us(halves, x), per_call_us(related, x)),
            ("Linear+relu module", per_call_us(m, x, number=5000), per_call_us(captured_m, x, number=5000))]
    return rows


def halves(x):  # a relation guard (n % 2 == 0) and a size read in the graph
    return x.view(2, x.shape[0] // 2)


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name, eager, cap in measure():
        print(f"{name:28s} eager {eager:6.2f} us   captured {cap:6.2f} us   overhead {cap - eager:6.2f} us")
