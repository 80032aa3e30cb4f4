"""The small ResNet of the cpu suite under ember with conv_layout="preserve" and "channels_last",
against eager, in one process on the same inputs (Note [channels-last convolutions]).

    python tools/conv_layout_bench.py [--seconds 3] [--device cpu]

Each variant is timed in alternation with eager (tools/bench's measure.time_calls: one call
each, medians), with glibc's malloc thresholds fixed as in tools/bench (else fresh mmaps' page faults dominate a
CNN's eager time on the CPU). Prints eager/variant for inference and for a training step
(forward, MSE-style loss, backward, SGD with momentum), and checks every variant's first
output against eager's.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import ember  # noqa: E402
from bench import measure  # noqa: E402
from bench.models import SmallResNet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="timing budget per variant and phase")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    measure.steady_malloc()
    timer = measure.Timer(torch.device(args.device))
    cfg = measure.RunConfig(target_s=args.seconds)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = SmallResNet().to(dev)
    x = torch.randn(16, 3, 64, 64, device=dev)
    variants = {"eager": model}
    for layout in ("preserve", "channels_last"):
        variants[layout] = ember.compile(copy.deepcopy(model), options={"conv_layout": layout})
    opts = {name: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for name, m in variants.items()}

    def infer(name):
        with torch.no_grad():
            return variants[name](x)

    def train(name):
        out = variants[name](x)
        out.square().mean().backward()
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)
        return out

    for phase, step in (("infer", infer), ("train", train)):
        for m in variants.values():
            m.train(phase == "train")
        ref = step("eager").detach()
        for name in ("preserve", "channels_last"):
            got = step(name).detach()
            err = ((got - ref).abs().max() / ref.abs().max()).item()
            t = measure.time_calls(timer, lambda i, n=name: step(n), cfg, baseline=lambda i: step("eager"))
            e, v = t.baseline_median_s * 1e3, t.median_s * 1e3
            print(f"{phase:5s} conv_layout={name:13s} eager {e:7.2f} ms  ember {v:7.2f} ms  "
                  f"eager/ember {e / v:.2f}  (first-call error vs eager {err:.1e})")


if __name__ == "__main__":
    main()
