"""Kernel templates for max_autotune: a Triton GEMM (and batched GEMM) with fused epilogues,
chosen per product against cuBLAS (Note [GEMM template], Note [GEMM epilogues], Note [GEMM choice]).

`use_gemm_templates(gm, options)` is a graph rewrite run before lowering (compile.py, `rewrite`):
each mm/bmm whose template (with its epilogue) beats the extern becomes one call of a `GemmCall`,
which the lowering treats as an extern op and the wrapper calls with the operands' tensors.
"""
from ember_inductor.templates.rewrite import use_gemm_templates

__all__ = ["use_gemm_templates"]
