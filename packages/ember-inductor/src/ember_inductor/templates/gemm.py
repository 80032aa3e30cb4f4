"""The Triton GEMM template: C[b] = A[b] @ B[b] (mm is one batch) with a fused epilogue.

Note [GEMM template]
    One program computes a BLOCK_M x BLOCK_N tile of one batch's product: programs are grouped
    GROUP_M tiles down a column of tiles so that consecutive programs reuse A's rows and B's
    columns from L2; the K loop is software-pipelined `num_stages` deep by Triton, and `tl.dot`
    becomes Hopper's wgmma (HGMMA) for 16-bit operands with 4 or 8 warps. Rows and columns past
    the edge are clamped (`% M`, `% N`) rather than masked, so every A/B load is an unmasked,
    aligned vector load except along K when BLOCK_K does not divide K; only stores are masked.
    Accumulation is float32. float32 operands multiply in IEEE float32 unless torch allows TF32
    (torch.backends.cuda.matmul.allow_tf32), as cuBLAS does. The epilogue (Note [GEMM epilogues])
    starts from the product rounded to its dtype and renders each op with the pointwise
    kernels' own table (codegen/triton_prims.py), so fused and unfused results agree.

    `render(..., pointwise=True)` renders the epilogue alone, reading the product from memory:
    the "extern + separate pointwise kernel" candidate that the template has to beat.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ember_inductor.codegen.triton_helpers import helper_sources
from ember_inductor.codegen.triton_prims import TL_DTYPE, ExprCtx, render as render_expr
from ember_inductor.templates.epilogue import Epilogue


@dataclass(frozen=True)
class GemmConfig:
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def kwargs(self) -> dict:
        return {"BLOCK_M": self.BLOCK_M, "BLOCK_N": self.BLOCK_N, "BLOCK_K": self.BLOCK_K,
                "GROUP_M": self.GROUP_M, "num_warps": self.num_warps, "num_stages": self.num_stages}


@dataclass(frozen=True)
class Problem:
    """A (batched) product's sizes and dtypes: what a configuration is chosen for."""
    batch: int
    m: int
    n: int
    k: int
    dtype: torch.dtype      # operands' dtype (both)
    precision: str          # tl.dot input_precision: "ieee" or "tf32"


def _pow2_at_most(n: int, cap: int, floor: int = 16) -> int:
    return max(floor, min(cap, 1 << max(0, (max(1, n) - 1).bit_length())))


def configs(p: Problem) -> list[GemmConfig]:
    """A small set of tile shapes for the problem (the heuristic pick first): large wgmma tiles
    for big products, narrower ones when M or N is small, so that the grid fills the GPU."""
    half = p.dtype in (torch.float16, torch.bfloat16)
    bk = 64 if half else 32
    raw = [
        GemmConfig(128, 128, bk, 8, 8, 3),
        GemmConfig(128, 256, bk, 8, 8, 3) if half else GemmConfig(64, 128, bk, 8, 4, 3),
        GemmConfig(128, 128, bk, 8, 4, 4),
        GemmConfig(64, 128, bk, 8, 4, 4),
        GemmConfig(128, 64, bk, 8, 4, 4),
        GemmConfig(64, 256, bk, 8, 8, 3) if half else GemmConfig(128, 64, bk, 8, 4, 3),
        GemmConfig(64, 64, bk, 8, 4, 4),
        GemmConfig(32, 64, bk, 8, 4, 5),
    ]
    out = []
    for c in raw:
        c = GemmConfig(_pow2_at_most(p.m, c.BLOCK_M), _pow2_at_most(p.n, c.BLOCK_N),
                       _pow2_at_most(p.k, c.BLOCK_K), c.GROUP_M, c.num_warps, c.num_stages)
        if c not in out:
            out.append(c)
    return out


def grid(p: Problem, c: GemmConfig) -> tuple:
    return (math.ceil(p.m / c.BLOCK_M) * math.ceil(p.n / c.BLOCK_N), p.batch)


def render(name: str, p: Problem, epilogue: Epilogue, pointwise: bool = False) -> str:
    """Triton source of the template kernel `name` (see the Note): arguments are A, B (or the
    product C when `pointwise`), the epilogue's extra tensors and its outputs, then the strides
    (batch, row, column) of each in that order."""
    tensors = (["C"] if pointwise else ["A", "B"]) + [f"X{i}" for i in range(len(epilogue.extras))] \
        + [f"O{i}" for i in range(len(epilogue.outputs))]
    strides = [f"s{t}{d}" for t in tensors for d in "bmn"]
    # offsets within one batch past 2**31 elements need 64-bit row/column indices
    wide = ".to(tl.int64)" if max(p.m * p.k, p.k * p.n, p.m * p.n) >= 2**31 else ""
    lines = [
        "pid = tl.program_id(0)",
        "bid = tl.program_id(1).to(tl.int64)",
        "num_pid_m = tl.cdiv(M, BLOCK_M)",
        "num_pid_n = tl.cdiv(N, BLOCK_N)",
        "group = GROUP_M * num_pid_n",
        "first_m = (pid // group) * GROUP_M",
        "group_m = min(num_pid_m - first_m, GROUP_M)",
        "pid_m = first_m + ((pid % group) % group_m)",
        "pid_n = (pid % group) // group_m",
        f"rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M){wide}",
        f"rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N){wide}",
        "mask = (rm[:, None] < M) & (rn[None, :] < N)",
    ]
    if pointwise:
        lines.append(f"v0 = tl.load(C + bid * sCb + rm[:, None] * sCm + rn[None, :] * sCn, mask=mask)")
    else:
        lines += [
            "ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)",
            "rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)",
            "rk = tl.arange(0, BLOCK_K)",
            "a_ptrs = A + bid * sAb + ram[:, None] * sAm + rk[None, :] * sAn",
            "b_ptrs = B + bid * sBb + rk[:, None] * sBm + rbn[None, :] * sBn",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for k in range(0, tl.cdiv(K, BLOCK_K)):",
            "    if K % BLOCK_K == 0:",
            "        a = tl.load(a_ptrs)",
            "        b = tl.load(b_ptrs)",
            "    else:",
            "        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)",
            "        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)",
            f"    acc += tl.dot(a, b, input_precision=\"{p.precision}\")",
            "    a_ptrs += BLOCK_K * sAn",
            "    b_ptrs += BLOCK_K * sBm",
            f"v0 = acc.to({TL_DTYPE[epilogue.ops[0].dtype]})",
        ]
    lines += _epilogue_lines(epilogue)
    for i, o in enumerate(epilogue.outputs):
        v = f"v{o}"
        if epilogue.ops[o].kind == "const":
            v = f"tl.broadcast_to({v}, [BLOCK_M, BLOCK_N])"
        lines.append(f"tl.store(O{i} + bid * sO{i}b + rm[:, None] * sO{i}m + rn[None, :] * sO{i}n, "
                     f"{v}, mask=mask)")
    body = "\n".join("    " + ln for ln in lines)
    params = ", ".join(tensors + strides + ["M: tl.constexpr", "N: tl.constexpr", "K: tl.constexpr",
                                              "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr",
                                              "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"])
    header = [
        f"# ember GEMM template {name}: {'epilogue alone' if pointwise else 'product + epilogue'}"
        f" (Note [GEMM template] in ember_inductor/templates/gemm.py)",
        f"# problem: {p}",
        f"# epilogue: {epilogue.signature()}",
        "# `jit` and `libdevice` are bound by ember_inductor.codegen.triton_runtime.load_module",
        "import triton",
        "import triton.language as tl",
        "",
    ]
    parts = ["\n".join(header)]
    helpers = helper_sources(body)
    if helpers:
        parts.append(helpers)
    parts.append(f"@jit\ndef {name}({params}):\n{body}\n")
    return "\n\n".join(parts)


def _epilogue_lines(e: Epilogue) -> list[str]:
    lines = []
    for i, op in enumerate(e.ops):
        if op.kind == "mm":
            continue
        ins = [e.ops[a].dtype for a in op.args]
        args = [f"v{a}" for a in op.args]
        if op.kind == "const":
            lines.append(f"v{i} = {_literal(op.target, op.dtype)}")
        elif op.kind == "load":
            x = f"X{op.target}"
            lines.append(f"v{i} = tl.load({x} + bid * s{x}b + rm[:, None] * s{x}m + rn[None, :] * s{x}n, "
                         f"mask=mask)")
        elif op.kind == "convert":
            lines.append(f"v{i} = {render_expr('convert_element_type', ExprCtx(tuple(ins), op.dtype), *args)}")
        else:
            lines.append(f"v{i} = {render_expr(op.target, ExprCtx(tuple(ins), op.dtype), *args)}")
    return lines


def _literal(value, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return f"tl.full([1, 1], {int(bool(value))}, tl.int1)"
    if dtype.is_floating_point:
        text = repr(float(value)) if math.isfinite(value) else f"float('{value}')"
    else:
        text = str(int(value))
    return f"tl.full([1, 1], {text}, {TL_DTYPE[dtype]})"
