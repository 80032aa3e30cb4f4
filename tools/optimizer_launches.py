"""Kernel launches per compiled optimizer step on the Triton path, with and without horizontal
fusion (Note [horizontal fusion]), counted on the CPU: no GPU needed.

    python tools/optimizer_launches.py

The graphs are compiled for the Triton backend on CPU tensors (their kernels run under Triton's
interpreter), so the parameters are small; how many kernels a step makes depends on the
parameters' shapes being equal or not, not on their sizes. Cases: tools/foreach_step_bench.py's
foreach SGD-momentum step over 50 and 200 parameters of one shape each, and AdamW
(foreach=True and False) over the parameters of a transformer encoder layer and a head (14
tensors of 9 shapes). Prints launches per graph (the first AdamW graph also creates the state).
No times: on CPU tensors the interpreted kernels dominate a call, not the launches.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for src in sorted((ROOT / "packages").glob("*/src")):
    sys.path.insert(0, str(src))

import ember  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from foreach_step_bench import step as sgd_step  # noqa: E402

LAUNCH = re.compile(r"^\s+(?:kernel|combo)\d+(?:_c)?\(", re.M)


def launches(compiled) -> list[int]:
    return [len(LAUNCH.findall(g.stage("generated source").text)) for g in ember.compile_report(compiled).graphs]


def sgd(n: int, shape, combo: bool) -> dict:
    params, grads, bufs = ([torch.randn(shape) for _ in range(n)] for _ in range(3))
    compiled = ember.compile(sgd_step, options={"backend": "triton", "combo_kernels": combo})
    compiled(params, grads, bufs, 0.01, 0.9)
    return {"launches": launches(compiled)}


def adamw(foreach: bool, combo: bool) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), torch.nn.Linear(32, 10))
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
    for p in params:
        p.grad = torch.randn_like(p)

    def step():
        opt.step()
    compiled = ember.compile(step, options={"backend": "triton", "combo_kernels": combo})
    for _ in range(2):
        compiled()
    return {"tensors": len(params), "shapes": len({tuple(p.shape) for p in params}), "launches": launches(compiled)}


def main() -> None:
    for combo in (False, True):
        for n, shape in [(50, (32, 32)), (200, (16, 16))]:
            print({"case": f"foreach SGD, {n} of {shape}", "combo_kernels": combo, **sgd(n, shape, combo)}, flush=True)
            ember.reset()
        for foreach in (True, False):
            print({"case": f"AdamW foreach={foreach}", "combo_kernels": combo, **adamw(foreach, combo)}, flush=True)
            ember.reset()


if __name__ == "__main__":
    main()
