"""Triton compile time of combo kernels (Note [horizontal fusion]), on the CPU: no GPU needed.

    python tools/combo_compile_time.py [parts ...]

For each number of parts N: a graph of N independent SGD-momentum-like updates (3 loads, 2 stores each) (parameters of N
different lengths, so no two fuse vertically) is compiled by ember_inductor for the Triton
backend with the combo cap raised to N; the combo kernel's source is then compiled by real
Triton 3.6 to a cubin for an sm_90 target (`triton.compile` with a GPUTarget: ptxas ships with
Triton), and so is one part alone. Prints seconds per compile (a fresh Triton cache each).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for src in sorted((ROOT / "packages").glob("*/src")):
    sys.path.insert(0, str(src))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import ember_prims  # noqa: E402
from ember_inductor import compile_graph, horizontal  # noqa: E402
from ember_inductor.codegen.triton_runtime import load_module  # noqa: E402
from ember_inductor.graph_builder import GraphBuilder  # noqa: E402

P = ember_prims.ops
TL = {torch.float32: "*fp32"}


def sgd_graph(n: int):
    b = GraphBuilder()
    outs = []
    for i in range(n):
        p, g, m = (b.input(torch.randn(4096 + 64 * i)) for _ in range(3))
        m2 = b.call(P.add.default, b.call(P.mul.default, m, g), g)  # the prims take tensors only
        outs += [b.call(P.sub.default, p, b.call(P.mul.default, m2, g)), m2]
    b.output(*outs)
    return b


def triton_compile_seconds(source) -> float:
    fn = getattr(load_module(source.source, tempfile.mkdtemp(), False), source.name)
    signature = {name: TL[a.dtype] for name, a in zip(fn.arg_names, source.kernel.args)}
    signature["XBLOCK"] = "constexpr"
    cfg = source.meta["configs"][0]
    with triton.knobs.cache.scope():
        triton.knobs.cache.dir = tempfile.mkdtemp()
        start = time.perf_counter()
        triton.compile(ASTSource(fn, signature, constexprs={"XBLOCK": cfg.XBLOCK}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": cfg.num_warps})
        return time.perf_counter() - start


def main(parts) -> None:
    for i, n in enumerate([1] + parts):
        horizontal.COMBO_MAX_PARTS = max(n, 2)
        b = sgd_graph(n)
        cg = compile_graph(b.build(), b.examples, {"backend": "triton", "cache_dir": tempfile.mkdtemp()})
        assert len(cg.kernels) == 1 and (n == 1 or cg.kernels[0].meta["layout"] == "combo"), cg.source
        seconds = triton_compile_seconds(cg.kernels[0])
        if i:  # the first compile also loads Triton's CUDA backend: not reported
            print({"parts": n, "launches": len(cg.kernels), "triton_compile_s": round(seconds, 3)}, flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 8, 16, 32])
