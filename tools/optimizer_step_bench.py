"""Kernels and time of a compiled optimizer step against eager's (docs/performance.md).

    python tools/optimizer_step_bench.py adam 8     # optimizer (adam|adamw|sgd), Linear(256, 256) layers

Prints, for each graph the inductor compiled, its prims-op count and kernel count, then the
best-of-30 time of one `opt.step()` eagerly and compiled, three times.
"""
import copy
import sys
import time

import torch

import ember
import ember_inductor

compiled = []
_compile_graph = ember_inductor.compile_graph


def _spy(gm, example_inputs, options=None):  # measurement only: remember what was compiled
    out = _compile_graph(gm, example_inputs, options)
    compiled.append((gm, out))
    return out


ember_inductor.compile_graph = _spy

OPTIMIZERS = {"adam": lambda ps: torch.optim.Adam(ps, lr=1e-3), "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
              "sgd": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)}


def best_time(fn, arg, n=30):
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def main(name="adam", layers=8):
    torch.manual_seed(0)
    blocks = [m for _ in range(layers) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(256, 10))
    twin = copy.deepcopy(model)
    opt, twin_opt = OPTIMIZERS[name](model.parameters()), OPTIMIZERS[name](twin.parameters())

    def step(o):
        o.step()
    compiled_step = ember.compile(step)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    for m in (model, twin):
        torch.nn.functional.cross_entropy(m(x), y).backward()
    for _ in range(3):
        step(opt)
        compiled_step(twin_opt)
    print(f"{name}: {len(list(model.parameters()))} parameters")
    for gm, cg in compiled:
        ops = sum(n.op == "call_function" for n in gm.graph.nodes)
        print(f"  graph of {ops} prims ops -> {len(cg.kernels)} kernels")
    for _ in range(3):
        print(f"  eager step {best_time(step, opt):.0f} us, compiled step {best_time(compiled_step, twin_opt):.0f} us")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "adam", int(sys.argv[2]) if len(sys.argv) > 2 else 8)
