"""The prim -> Triton expression table: one rule per ember_prims op, each a small format function.

A rule takes an `ExprCtx` (the dtypes involved) and the argument expressions (Triton source
strings, already CSE'd into names by the renderer) and returns one Triton expression string.
Rules are registered with `@rule("name", ...)`; `TRITON_EXPR["sin"](ctx, "x")` renders a call.

Note [Triton float semantics]: every rule computes what eager PyTorch computes, not what the
nearest Triton builtin computes. The places where they differ:
  * `tl.maximum`/`tl.minimum` drop NaN by default; torch.maximum/minimum/amax propagate it.
  * `%` and `//` on integers truncate toward zero (C); torch.remainder and floor_divide floor.
  * libdevice `remainder` is the IEEE remainder (round-to-nearest quotient); torch.remainder
    takes the sign of the divisor. We build torch's from `fmod`.
  * float floor_divide follows ATen's `div_floor` (fmod-based), not `floor(a / b)`, which
    differs when a / b rounds up across an integer.
  * `tl.sqrt` is an approximation on GPU; `tl.sqrt_rn` is correctly rounded like CUDA's sqrtf.
  * round is half-to-even (`libdevice.nearbyint`), like torch.round.
  * float16/bfloat16 transcendental math runs in float32 and rounds back once, as ATen does.
Functions Triton's core language lacks come from `libdevice` (triton.language.extra.libdevice on
GPU; under the interpreter, `triton_interpret.libdevice` emulates them with numpy).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

# torch dtype -> Triton dtype name, as written in generated source.
TL_DTYPE: dict[torch.dtype, str] = {
    torch.bool: "tl.int1",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
}
_HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class ExprCtx:
    """What a rule may know besides its arguments: input dtypes, output dtype, extra params."""

    in_dtypes: tuple
    out_dtype: torch.dtype
    params: dict = field(default_factory=dict)

    @property
    def dtype(self) -> torch.dtype:
        return self.in_dtypes[0] if self.in_dtypes else self.out_dtype


Rule = Callable[..., str]
TRITON_EXPR: dict[str, Rule] = {}


def rule(*names: str):
    """Register a format function under one or more prim names."""
    def register(fn: Rule) -> Rule:
        for name in names:
            if name in TRITON_EXPR:
                raise KeyError(f"duplicate Triton rule for prim {name!r}")
            TRITON_EXPR[name] = fn
        return fn
    return register


# prims that only move or select bits: they run on half types as they are
_NO_UPCAST = frozenset({"where", "convert_element_type", "uniform", "normal"})


def render(prim: str, ctx: ExprCtx, *args: str) -> str:
    """`render("add", ctx, "a", "b") == "(a + b)"`; KeyError names the missing prim.

    float16/bfloat16 operands are computed in float32 and the result rounded back once per op,
    which is what ATen does (and the interpreter has no half arithmetic of its own).
    """
    try:
        fn = TRITON_EXPR[prim]
    except KeyError:
        raise KeyError(f"no Triton rule for prim {prim!r}") from None
    if prim in _NO_UPCAST or not any(d in _HALF for d in ctx.in_dtypes):
        return fn(ctx, *args)
    up = tuple(torch.float32 if d in _HALF else d for d in ctx.in_dtypes)
    out = torch.float32 if ctx.out_dtype in _HALF else ctx.out_dtype
    args = tuple(f"{a}.to(tl.float32)" if d in _HALF else a for a, d in zip(args, ctx.in_dtypes))
    expr = fn(ExprCtx(up, out, ctx.params), *args)
    return f"{expr}.to({TL_DTYPE[ctx.out_dtype]})" if ctx.out_dtype in _HALF else expr


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def _in_f32(ctx: ExprCtx, expr_of: Callable[..., str], *args: str) -> str:
    """Evaluate a float function in float32 for half inputs (ATen's opmath), round back once."""
    if ctx.dtype in _HALF:
        up = [f"{a}.to(tl.float32)" for a in args]
        return f"{expr_of(*up)}.to({TL_DTYPE[ctx.dtype]})"
    return expr_of(*args)


def _float_fn(template: str) -> Rule:
    # template uses {0}, {1}, ...; integer inputs never reach these (prims promote first).
    def fmt(ctx: ExprCtx, *args: str) -> str:
        return _in_f32(ctx, lambda *a: template.format(*a), *args)
    return fmt


# ---- unary float math: one line each -------------------------------------------------------
_UNARY_FLOAT = {
    "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})",
    "expm1": "libdevice.expm1({0})",
    "log": "tl.log({0})",
    "log1p": "libdevice.log1p({0})",
    "log2": "tl.log2({0})",
    "rsqrt": "libdevice.rsqrt({0})",
    "sin": "libdevice.sin({0})",
    "cos": "libdevice.cos({0})",
    "tan": "libdevice.tan({0})",
    "asin": "libdevice.asin({0})",
    "acos": "libdevice.acos({0})",
    "atan": "libdevice.atan({0})",
    "sinh": "libdevice.sinh({0})",
    "cosh": "libdevice.cosh({0})",
    "tanh": "libdevice.tanh({0})",
    "asinh": "libdevice.asinh({0})",
    "acosh": "libdevice.acosh({0})",
    "atanh": "libdevice.atanh({0})",
    "erf": "libdevice.erf({0})",
    "erfc": "libdevice.erfc({0})",
    "erfinv": "libdevice.erfinv({0})",
    "lgamma": "libdevice.lgamma({0})",
}
for _name, _tpl in _UNARY_FLOAT.items():
    TRITON_EXPR[_name] = _float_fn(_tpl)

# ---- binary float math --------------------------------------------------------------------
for _name, _tpl in {
    "atan2": "libdevice.atan2({0}, {1})",
    "hypot": "libdevice.hypot({0}, {1})",
    "copysign": "libdevice.copysign({0}, {1})",
}.items():
    TRITON_EXPR[_name] = _float_fn(_tpl)


@rule("sqrt")
def _sqrt(ctx, x):
    # float32: correctly rounded like CUDA's sqrtf (tl.sqrt is sqrt.approx on GPU).
    return _in_f32(ctx, lambda a: f"tl.sqrt_rn({a})" if ctx.dtype != torch.float64 else f"tl.sqrt({a})", x)


@rule("abs")
def _abs(ctx, x):
    return x if ctx.dtype == torch.bool else f"tl.abs({x})"


@rule("neg")
def _neg(ctx, x):
    return f"(-{x})"


def _int_identity_or(template: str) -> Rule:
    def fmt(ctx, x):
        if not is_float(ctx.dtype):
            return x
        return _in_f32(ctx, lambda a: template.format(a), x)
    return fmt


TRITON_EXPR["floor"] = _int_identity_or("tl.floor({0})")
TRITON_EXPR["ceil"] = _int_identity_or("tl.ceil({0})")
TRITON_EXPR["trunc"] = _int_identity_or("libdevice.trunc({0})")
TRITON_EXPR["round"] = _int_identity_or("libdevice.nearbyint({0})")  # half to even


@rule("sign")
def _sign(ctx, x):
    if ctx.dtype == torch.bool:
        return x
    t = TL_DTYPE[ctx.dtype]
    # (x > 0) - (x < 0), like ATen's sign kernel: sign(NaN) is 0 there too
    return f"(({x} > 0).to({t}) - ({x} < 0).to({t}))"


@rule("reciprocal")
def _reciprocal(ctx, x):
    return _in_f32(ctx, lambda a: f"(1.0 / {a})", x)


@rule("isnan")
def _isnan(ctx, x):
    return f"({x} != {x})" if is_float(ctx.dtype) else f"tl.zeros_like({x}).to(tl.int1)"


@rule("isinf")
def _isinf(ctx, x):
    return f"(tl.abs({x}) == float('inf'))" if is_float(ctx.dtype) else f"tl.zeros_like({x}).to(tl.int1)"


@rule("isfinite")
def _isfinite(ctx, x):
    # x - x is 0 for finite x, NaN for inf and NaN.
    return f"(({x} - {x}) == 0)" if is_float(ctx.dtype) else f"(tl.zeros_like({x}) == 0)"


@rule("signbit")
def _signbit(ctx, x):
    if not is_float(ctx.dtype):
        return f"({x} < 0)"
    bits = {torch.float64: "tl.int64", torch.float32: "tl.int32"}.get(ctx.dtype)
    if bits is None:  # half types: the sign survives the exact upcast
        return f"({x}.to(tl.float32).to(tl.int32, bitcast=True) < 0)"
    return f"({x}.to({bits}, bitcast=True) < 0)"


@rule("logical_not")
def _logical_not(ctx, x):
    return f"({x} == 0)"


@rule("bitwise_not")
def _bitwise_not(ctx, x):
    return f"({x} == 0)" if ctx.dtype == torch.bool else f"(~{x})"


# ---- binary arithmetic ----------------------------------------------------------------------
@rule("add")
def _add(ctx, a, b):
    return f"({a} | {b})" if ctx.dtype == torch.bool else f"({a} + {b})"


@rule("sub")
def _sub(ctx, a, b):
    return f"({a} - {b})"


@rule("mul")
def _mul(ctx, a, b):
    return f"({a} & {b})" if ctx.dtype == torch.bool else f"({a} * {b})"


@rule("div")
def _div(ctx, a, b):
    # prims.div: true division for floats, truncation for integers (C semantics, like tl `//`).
    if is_float(ctx.dtype):
        return _in_f32(ctx, lambda x, y: f"({x} / {y})", a, b)
    return f"({a} // {b})"


@rule("floor_divide")
def _floor_divide(ctx, a, b):
    if is_float(ctx.dtype):
        return _in_f32(ctx, lambda x, y: f"eh_floordiv_float({x}, {y})", a, b)
    return f"eh_floordiv_int({a}, {b})"


@rule("remainder")
def _remainder(ctx, a, b):
    if is_float(ctx.dtype):
        return _in_f32(ctx, lambda x, y: f"eh_remainder_float({x}, {y})", a, b)
    return f"eh_remainder_int({a}, {b})"


@rule("fmod")
def _fmod(ctx, a, b):
    if is_float(ctx.dtype):
        return _in_f32(ctx, lambda x, y: f"libdevice.fmod({x}, {y})", a, b)
    return f"({a} % {b})"  # truncated remainder == C fmod for integers


@rule("pow")
def _pow(ctx, a, b):
    if is_float(ctx.dtype):
        return _in_f32(ctx, lambda x, y: f"libdevice.pow({x}, {y})", a, b)
    return f"eh_pow_int({a}, {b})"


@rule("maximum")
def _maximum(ctx, a, b):
    if is_float(ctx.dtype):
        return f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"
    return f"tl.maximum({a}, {b})"


@rule("minimum")
def _minimum(ctx, a, b):
    if is_float(ctx.dtype):
        return f"tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"
    return f"tl.minimum({a}, {b})"


for _name, _op in {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.items():
    TRITON_EXPR[_name] = (lambda op: lambda ctx, a, b: f"({a} {op} {b})")(_op)


@rule("logical_and")
def _logical_and(ctx, a, b):
    return f"(({a} != 0) & ({b} != 0))"


@rule("logical_or")
def _logical_or(ctx, a, b):
    return f"(({a} != 0) | ({b} != 0))"


@rule("logical_xor")
def _logical_xor(ctx, a, b):
    return f"(({a} != 0) ^ ({b} != 0))"


for _name, _op in {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}.items():
    TRITON_EXPR[_name] = (lambda op: lambda ctx, a, b: f"({a} {op} {b})")(_op)


def _bits(dtype: torch.dtype) -> int:
    return torch.iinfo(dtype).bits


@rule("shift_left")
def _shift_left(ctx, a, b):
    # ATen: a shift by a negative amount or by >= the bit width gives 0 (LLVM: poison)
    return f"tl.where(({b} < 0) | ({b} >= {_bits(ctx.dtype)}), 0, {a} << {b}).to({TL_DTYPE[ctx.dtype]})"


@rule("shift_right")
def _shift_right(ctx, a, b):
    # Triton's >> is arithmetic for signed and logical for unsigned types, like ATen; ATen fills
    # with the sign (or 0 for unsigned) when the amount is negative or >= the bit width.
    n = _bits(ctx.dtype)
    return (f"tl.where(({b} < 0) | ({b} >= {n}), {a} >> {n - 1}, {a} >> {b})"
            if ctx.dtype.is_signed else f"tl.where(({b} < 0) | ({b} >= {n}), 0, {a} >> {b}).to({TL_DTYPE[ctx.dtype]})")


@rule("where")
def _where(ctx, cond, a, b):
    return f"tl.where({cond}, {a}, {b})"


@rule("convert_element_type")
def _convert(ctx, x):
    dst = ctx.out_dtype
    if dst == torch.bool:
        return f"({x} != 0)"
    if ctx.dtype.is_floating_point and dst == torch.uint8:
        # ATen converts a float to uint8 through int64 (c10's static_cast_with_inter_type), so
        # -1.0 -> 255 and 300.0 -> 44 on every device; Triton's direct fptoui saturates on a GPU
        # (-1.0 -> 0). The interpreter wraps like ATen either way: see test_float_to_uint8_wraps.
        return f"{x}.to(tl.int64).to(tl.uint8)"
    if ctx.dtype.is_floating_point and not dst.is_floating_point:
        # float -> int truncates toward zero in both torch and Triton (fptosi).
        return f"{x}.to({TL_DTYPE[dst]})"
    if dst in _HALF and ctx.dtype not in (torch.float32, dst):
        # ATen converts to float16/bfloat16 through float (c10::Half and c10::BFloat16 are built
        # from a float): float64 and integers round twice, 2**24 + 2**16 + 1 -> 2**24 in bfloat16,
        # where a direct conversion rounds once. (The Triton interpreter also has no direct
        # integer -> bfloat16 conversion: it copied the bits, True -> 9.2e-41; fuzz seed 2011.)
        return f"{x}.to(tl.float32).to({TL_DTYPE[dst]})"
    return f"{x}.to({TL_DTYPE[dst]})"


# ---- random: Philox, keyed by (seed, offset + linear index) ---------------------------------
@rule("uniform")
def _uniform(ctx, seed, offset, low="0.0", high="1.0"):
    u = f"tl.rand({seed}, {offset})"
    expr = u if (low, high) == ("0.0", "1.0") else f"({low} + ({high} - {low}) * {u})"
    return expr if ctx.out_dtype == torch.float32 else f"{expr}.to({TL_DTYPE[ctx.out_dtype]})"


@rule("normal")
def _normal(ctx, seed, offset, mean="0.0", std="1.0"):
    n = f"tl.randn({seed}, {offset})"
    expr = n if (mean, std) == ("0.0", "1.0") else f"({mean} + {std} * {n})"
    return expr if ctx.out_dtype == torch.float32 else f"{expr}.to({TL_DTYPE[ctx.out_dtype]})"


# ---- reductions: identity, elementwise accumulate, final block reduce ----------------------
@dataclass(frozen=True)
class ReductionRule:
    """How a reduction is rendered: `init` fills masked lanes and looped accumulators,
    `combine(acc, v)` accumulates elementwise inside a loop, `final(acc)` reduces axis 1."""

    init: Callable[[torch.dtype], str]
    combine: Callable[[torch.dtype, str, str], str]
    final: Callable[[torch.dtype, str], str]


def _lowest(dtype) -> str:
    if dtype.is_floating_point:
        return "float('-inf')"
    return "0" if dtype == torch.bool else str(torch.iinfo(dtype).min)


def _highest(dtype) -> str:
    if dtype.is_floating_point:
        return "float('inf')"
    return "1" if dtype == torch.bool else str(torch.iinfo(dtype).max)


REDUCTIONS: dict[str, ReductionRule] = {
    "sum": ReductionRule(lambda d: "0", lambda d, a, v: f"{a} + {v}", lambda d, a: f"tl.sum({a}, 1)"),
    "prod": ReductionRule(lambda d: "1", lambda d, a, v: f"{a} * {v}",
                          lambda d, a: f"tl.reduce({a}, 1, eh_mul)"),
    "amax": ReductionRule(
        _lowest,
        lambda d, a, v: f"eh_max_nan({a}, {v})" if d.is_floating_point else f"tl.maximum({a}, {v})",
        lambda d, a: f"tl.reduce({a}, 1, eh_max_nan)" if d.is_floating_point else f"tl.max({a}, 1)"),
    "amin": ReductionRule(
        _highest,
        lambda d, a, v: f"eh_min_nan({a}, {v})" if d.is_floating_point else f"tl.minimum({a}, {v})",
        lambda d, a: f"tl.reduce({a}, 1, eh_min_nan)" if d.is_floating_point else f"tl.min({a}, 1)"),
    # `any` accumulates (v != 0) as int32 and compares at the end
    "any": ReductionRule(lambda d: "0", lambda d, a, v: f"tl.maximum({a}, {v})",
                         lambda d, a: f"(tl.max({a}, 1) != 0)"),
    "all": ReductionRule(lambda d: "1", lambda d, a, v: f"tl.minimum({a}, {v})",
                         lambda d, a: f"(tl.min({a}, 1) != 0)"),
}
# arg-reductions carry (value, position); masked lanes hold (init, INT64_MAX) so they never win
ARG_REDUCTIONS: dict[str, tuple[Callable[[torch.dtype], str], str]] = {
    "argmax": (_lowest, "eh_argmax_combine"),
    "argmin": (_highest, "eh_argmin_combine"),
}
