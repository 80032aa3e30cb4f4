"""The Triton backend: KernelSpec -> Triton source -> launcher (compiled on GPU, interpreted on CPU).

Layouts (chosen per kernel in `_choose_layout`):
  * pointwise: a 1-D block over the flattened outer space, `xindex = pid * XBLOCK + arange`.
  * tiled: a 2-D [YBLOCK, XBLOCK] block when some access is contiguous along another variable
    than the last (a transpose), so that both the read and the write are coalesced.
  * persistent: a reduction whose row fits one block (RBLOCK = next_pow2(rnumel) <= 8192,
    fixed in the source): each program loads its rows once and keeps them in registers, so
    softmax and layer_norm read x once however many reductions they chain.
  * looped: longer rows; each inner stage is a `for roffset in range(0, rnumel, RBLOCK)` loop with
    an elementwise accumulator of shape [XBLOCK, RBLOCK], reduced once after the loop (an amax
    loop and the sum(exp(v - m)) loop after it merge into one: Note [Online softmax]). Column
    reductions (loads contiguous along x, not r) always loop, over [XBLOCK, RBLOCK] tiles.
Masks guard every ragged tail; indices are 64-bit when any index can pass 2**31 - 1.
Static sizes are literals in the source, so a kernel's text is its cache key. Symbolic sizes
(Note [symbolic sizes in the inductor]) are scalar arguments after the pointers (`s0`, ...),
followed by `xnumel`/`rnumel` (Note [size arguments]); the launcher computes the grid from
them at each launch, block sizes come from the hints (SYMBOLIC_HINT_FLOOR), every tail is
masked, a row of symbolic length always loops (never a persistent block that assumes it fits),
no tiled layout (its grid limit would depend on the sizes), and indices are 64-bit unless
guards say they fit 32 bits (Note [32-bit indices of symbolic kernels] in kernel_analysis.py).
"""
from __future__ import annotations

import math
import os
from typing import Sequence

import sympy
import torch

from ember_inductor.codegen.common import Backend, IndexPrinter, KernelSource
from ember_inductor.codegen.triton_autotune import candidates, next_pow2
from ember_inductor.codegen.triton_helpers import helper_sources
from ember_inductor.codegen.triton_launch import BuildGroup, TritonLauncher
from ember_inductor.codegen.triton_prims import (
    ARG_REDUCTIONS, REDUCTIONS, TL_DTYPE, TRITON_EXPR, ExprCtx, render,
)
from ember_inductor.indexing import FloorDiv, ModIndex, stride
from ember_inductor.kernel import KernelSpec, Op, Stage
from ember_inductor.kernel_analysis import accumulator_dtype, is_column_reduction
from ember_inductor.sizes import hint, py_size

PERSISTENT_MAX_RBLOCK = 8192
INT32_MAX = 2**31 - 1


class TritonPrinter(IndexPrinter):
    floordiv = "({a} // {b})"
    mod = "({a} % {b})"


_print = TritonPrinter()


def _prod(sizes) -> int:
    return math.prod(int(s) for s in sizes)


# A symbolic kernel serves every size from one compile, often first compiled at a small one (the
# second shape a dynamic=None function sees): its block sizes are chosen as if it had at least
# this many elements along a symbolic space, never fewer (masks keep any size correct).
SYMBOLIC_HINT_FLOOR = 1024


def _heuristic_numel(k: KernelSpec, sizes) -> int:
    n = math.prod(hint(s, k.hints) for s in sizes)
    return n if all(sympy.sympify(s).is_Integer for s in sizes) else max(n, SYMBOLIC_HINT_FLOOR)


_SIGN_BIT = {torch.float64: (-2 ** 63, "tl.int64"), torch.float32: (-2 ** 31, "tl.int32"),
             torch.float16: (-2 ** 15, "tl.int16"), torch.bfloat16: (-2 ** 15, "tl.int16")}


def _full(shape: str, value: str, dtype: torch.dtype) -> str:
    """`tl.full`, but a bfloat16 one is made in float32 and converted: Triton's interpreter has
    no bfloat16 constants ('InterpreterBuilder' object has no attribute 'get_bf16': the kernel
    fell back, fuzz seeds 12003, 12016 under --triton). The value is a bfloat16 already
    (`_const` rounds it), so the conversion is exact on every target."""
    if dtype == torch.bfloat16:
        return f"tl.full({shape}, {value}, tl.float32).to(tl.bfloat16)"
    return f"tl.full({shape}, {value}, {TL_DTYPE[dtype]})"


def _arg_value(src) -> tuple[str, torch.dtype]:
    """An arg-reduction's values, float16/bfloat16 compared in float32 (exact): Triton's
    interpreter compares bfloat16 blocks wrongly (argmax over a bfloat16 dim gave 2**63 - 1
    everywhere, fuzz seed 12016 under --triton)."""
    if src.dtype in (torch.float16, torch.bfloat16):
        return f"{src.name}.to(tl.float32)", torch.float32
    return src.name, src.dtype


def _const(value, dtype: torch.dtype) -> str:
    if isinstance(value, bool) or dtype == torch.bool:
        return f"tl.full([1], {int(bool(value))}, tl.int1)"
    if dtype.is_floating_point and value == 0 and math.copysign(1.0, value) < 0:
        # Triton makes a constant equal to 0 its type's null value (+0.0): -0.0 is bit-cast from
        # its sign bit (remainder(-0.0, b) lost its sign: fuzz seed 115 under --triton)
        bits, width = _SIGN_BIT[dtype]
        return f"tl.full([1], {bits}, {width}).to({TL_DTYPE[dtype]}, bitcast=True)"
    if isinstance(value, float) and not math.isfinite(value):
        value = f"float('{value}')"
    elif dtype.is_floating_point:
        # rounded as ATen rounds a scalar into the dtype (through float for the half types)
        value = repr(torch.tensor(float(value), dtype=torch.float64).to(dtype).item())
    else:
        # wrapped into the dtype's range as ATen converts a scalar (int32 < 2**40 compares with
        # 0); Triton refused the out-of-range constant at the launch (fuzz seed 229 under --triton)
        bits = torch.iinfo(dtype).bits
        value = int(value) % (1 << bits)
        if torch.iinfo(dtype).min < 0 and value >= 1 << (bits - 1):
            value -= 1 << bits
        value = str(value)
    return _full("[1]", value, dtype)


# ---------------------------------------------------------------------------------------------
# Layout: how the block maps onto the kernel's variables
# ---------------------------------------------------------------------------------------------

def _transposed_var(k: KernelSpec):
    """For pointwise kernels of rank >= 2: the variable another access is contiguous along, if
    it is not the last one (then a tiled layout keeps both accesses coalesced)."""
    xs = k.range_vars
    if len(xs) < 2 or k.sizevars or int(k.ranges[-1]) < 16:
        return None
    for op in k.ops:
        if op.kind not in ("load", "store") or op.index is None:
            continue
        c = {s: stride(op.index, s) for s in xs}
        if None in c.values() or c[xs[-1]] == 1:
            continue
        for i, s in enumerate(xs[:-1]):
            if c[s] == 1 and int(k.ranges[i]) >= 16:
                return i
    return None


# Note [32-bit index bounds]: a static kernel indexes in 32 bits when no index it computes can
# pass INT32_MAX. An access's extreme index is not at a corner of the loop ranges when its
# variables step in opposite directions (a flip: `x0*N + (N - 1 - x1)` peaks at x0 = max, x1 = 0,
# neither all-max nor all-zero), so each index is bounded by interval arithmetic over the ranges:
# its value, and every dividend of a `//` or `%` in it (sums and products wrap harmlessly in
# two's complement when the result fits; a division of a wrapped value does not). The block
# indices run one block past the last element (`pid * XBLOCK + arange`, masked), so the
# iteration space keeps a block's margin below the limit, or the last block's indices wrap and
# pass the mask.
BLOCK_MARGIN = 2**16  # above any XBLOCK, YBLOCK or RBLOCK the autotuner may pick


def _interval(expr, sizes: dict, dividends: list) -> tuple[int, int] | None:
    """[lo, hi] of `expr` over the loop variables' ranges (`sizes`), appending the interval of
    each `//` or `%` operand to `dividends`; None for anything but sums, products and index
    division (then the kernel indexes in 64 bits)."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        return (0, max(0, int(sizes[expr]) - 1)) if expr in sizes else None
    parts = [_interval(a, sizes, dividends) for a in expr.args]
    if None in parts:
        return None
    if isinstance(expr, sympy.Add):
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if isinstance(expr, sympy.Mul):
        lo, hi = parts[0]
        for a, b in parts[1:]:
            corners = (lo * a, lo * b, hi * a, hi * b)
            lo, hi = min(corners), max(corners)
        return lo, hi
    if isinstance(expr, (FloorDiv, ModIndex)) and parts[1][0] == parts[1][1] and parts[1][0] > 0:
        dividends.append(parts[0])
        (lo, hi), d = parts[0], parts[1][0]
        return (lo // d, hi // d) if isinstance(expr, FloorDiv) else (0 if lo >= 0 else -d + 1, d - 1)
    return None


def _needs_int64(k: KernelSpec) -> bool:
    """Whether some index can exceed int32: the iteration space, or an access over the loop
    ranges (Note [32-bit index bounds])."""
    if k.sizevars:  # Note [32-bit indices of symbolic kernels]
        return not k.int32_indices
    if _prod(k.ranges) * max(1, _prod(k.reduction_ranges)) > INT32_MAX - BLOCK_MARGIN:
        return True
    sizes = dict(zip(k.range_vars + k.reduction_vars, list(k.ranges) + list(k.reduction_ranges)))
    for op in k.ops:
        if op.index is None:
            continue
        if any(s.name.startswith("tmp") for s in op.index.free_symbols):
            continue  # indirect indices: bounded by the gathered buffer
        dividends: list = []
        span = _interval(op.index, sizes, dividends)
        if span is None or any(lo < -INT32_MAX or hi > INT32_MAX for lo, hi in [span, *dividends]):
            return True
    return False


def _decompose(index: str, syms, sizes, order) -> list[str]:
    """Lines defining each variable in `order` (outermost first) from a flat `index`."""
    lines, stride = [], sympy.Integer(1)
    strides = {}
    for i in reversed(order):
        strides[i] = stride
        stride *= sympy.sympify(sizes[i])
    for pos, i in enumerate(order):
        expr = index if strides[i] == 1 else f"({index} // {_print(strides[i])})"
        if pos != 0:
            expr = f"({expr} % {_print(sizes[i])})"
        lines.append(f"{syms[i].name} = {expr}")
    return lines


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------

class _KernelWriter:
    """Renders one KernelSpec; `source()` returns the kernel file's text."""

    def __init__(self, k: KernelSpec, interpret: bool = False, first_program: int = 0):
        self.k = k if k.stages else k.with_stages()
        self.interpret = interpret  # see _size_args
        # a part of a combo kernel runs on the programs from `first_program` on (Note [horizontal fusion])
        self.first_program = first_program
        self.lines: list[str] = []
        self.indent = 1
        # the expressions for the source and the grid; for heuristics, their hints, at least
        # SYMBOLIC_HINT_FLOOR when symbolic (static: the numbers themselves)
        self.xnumel_expr = sympy.Mul(*k.ranges)
        self.rnumel_expr = sympy.Mul(*k.reduction_ranges)
        self.xnumel = _heuristic_numel(k, k.ranges)
        self.rnumel = _heuristic_numel(k, k.reduction_ranges) if k.is_reduction else 1
        self.int64 = _needs_int64(k)
        self.params = {a.name: f"p{i}" for i, a in enumerate(k.args)}
        self.buf_dtype = {a.name: a.dtype for a in k.args}
        self.scalars = {a.name for a in k.args if a.role == "scalar"}
        self.used = set().union(*(o.index.free_symbols for o in k.ops if o.index is not None))
        self.inner_ids = {i for st in self.k.stages if st.inner for i in st.ops}
        self.evict: str | None = None  # eviction policy of inner loads in the loop being written
        self.column = False  # set by _choose_layout for reductions over a non-contiguous dim
        self.layout, self.tile_var = self._choose_layout()

    def _choose_layout(self):
        if not self.k.is_reduction:
            t = _transposed_var(self.k)
            if t is not None:
                ynumel = self.xnumel // int(self.k.ranges[-1])
                if ynumel // 16 <= 65535:  # grid dim 1 limit at the smallest YBLOCK
                    return "tiled", t
            return "pointwise", None
        if is_column_reduction(self.k) and self.xnumel > 1:
            # rows are contiguous along x: many columns per program, a short r loop, so each
            # load instruction reads XBLOCK consecutive elements (a row of a [XBLOCK, RBLOCK] tile)
            self.column = True
            return "looped", None
        if next_pow2(self.rnumel) <= PERSISTENT_MAX_RBLOCK and self.rnumel_expr.is_Integer:
            return "persistent", None
        return "looped", None

    # -- helpers --
    def emit(self, line: str = ""):
        self.lines.append("    " * self.indent + line if line else "")

    def meta(self) -> dict:
        m = {"layout": self.layout, "xnumel": self.xnumel, "rnumel": self.rnumel,
             "int64": self.int64}
        if self.layout == "tiled":
            m["xnumel"] = int(self.k.ranges[-1])
            m["ynumel"] = self.xnumel // int(self.k.ranges[-1])
        if self.layout == "persistent":
            m["rblock"] = next_pow2(self.rnumel)
        m["column"] = self.column
        m["configs"] = candidates(m)
        if self.k.sizevars:  # the launcher computes the grid's extent from the symbols
            m["sizevars"] = tuple(str(v) for v in self.k.sizevars)
            m["numel_names"] = tuple(n for n, _ in self._numel_args())
            m["numel_src"] = tuple(py_size(e) for _, e in self._numel_args())
        return m

    def _mask_for(self, op: Op) -> str | None:
        if op.id in self.inner_ids:
            return "omask & rmask"
        return "omask" if op.index is not None and op.index.free_symbols else None

    def _ctx(self, op: Op) -> ExprCtx:
        in_dt = tuple(self.k.op(a).dtype for a in op.args)
        return ExprCtx(in_dt, op.dtype)

    # -- prologue: program ids, block indices, masks, variable definitions --
    def _prologue(self):
        k, emit = self.k, self.emit
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        if self.first_program:
            pid = f"({pid} - {self.first_program})"
        xs = k.range_vars
        self._size_args()
        if self.layout == "pointwise":
            self._numel("xnumel", self.xnumel_expr)
            emit(f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)")
            emit("omask = xindex < xnumel")
            self._defs("xindex", xs, k.ranges, range(len(xs)))
        elif self.layout == "tiled":
            n = len(xs)
            order = [i for i in range(n - 1) if i != self.tile_var] + [self.tile_var]
            pid1 = "tl.program_id(1).to(tl.int64)" if self.int64 else "tl.program_id(1)"
            emit(f"xnumel: tl.constexpr = {int(k.ranges[-1])}")
            emit(f"ynumel: tl.constexpr = {self.xnumel // int(k.ranges[-1])}")
            emit(f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)[None, :]")
            emit(f"yindex = {pid1} * YBLOCK + tl.arange(0, YBLOCK)[:, None]")
            emit("omask = (xindex < xnumel) & (yindex < ynumel)")
            if xs[-1] in self.used:
                emit(f"{xs[-1].name} = xindex")
            self._defs("yindex", xs, k.ranges, order)
        else:
            self._numel("xnumel", self.xnumel_expr)
            self._numel("rnumel", self.rnumel_expr)
            if self.layout == "persistent":
                emit(f"RBLOCK: tl.constexpr = {next_pow2(self.rnumel)}")
            emit(f"xindex = {pid} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
            emit("omask = xindex < xnumel")
            emit("rbase = tl.arange(0, RBLOCK)[None, :]")
            self._defs("xindex", xs, k.ranges, range(len(xs)))
            if self.layout == "persistent":
                self._rdefs("rbase")

    def _numel(self, name: str, expr) -> None:
        """A number of elements: a constexpr when static, else an argument (Note [size arguments])."""
        if expr.is_Integer:
            self.emit(f"{name}: tl.constexpr = {int(expr)}")

    def _numel_args(self) -> list[tuple[str, sympy.Expr]]:
        """The symbolic numbers of elements, passed by the launcher after the size symbols."""
        out = [("xnumel", self.xnumel_expr)]
        if self.k.is_reduction and self.layout != "pointwise":
            out.append(("rnumel", self.rnumel_expr))
        return [(n, e) for n, e in out if not e.is_Integer]

    def _size_args(self):
        """Note [size arguments]: a symbolic kernel takes its size symbols, then its symbolic
        numbers of elements (`xnumel`, `rnumel`: computed by the launcher in Python, exact, and
        the bound of the row loops). Compiled, a size arrives as i32 when its value fits (and as
        a constexpr when it is 1): it is cast to int64 so that products of sizes in indices
        cannot wrap. Interpreted (CPU tests), all of them are constexprs: Triton 3.6's
        interpreter computes any arithmetic as 1-element arrays, which numpy 2 refuses to turn
        into the int a `range` bound needs, so the interpreter runs its own variant of the
        source (`meta["interpret_source"]`), identical but for these lines and the signature."""
        if self.interpret or not self.int64:
            return  # 32-bit: indices fit (a guard says so)
        for v in self.k.sizevars:
            self.emit(f"{v} = tl.cast({v}, tl.int64)")

    def _defs(self, index: str, syms, sizes, order):
        for line in _decompose(index, syms, sizes, list(order)):
            if sympy.Symbol(line.split(" = ")[0], integer=True, nonnegative=True) in self.used:
                self.emit(line)

    def _rdefs(self, rindex: str):
        self.emit(f"rindex = {rindex}")
        self.emit("rmask = rindex < rnumel")
        rs = self.k.reduction_vars
        self._defs("rindex", rs, self.k.reduction_ranges, range(len(rs)))

    # -- ops --
    def _op(self, op: Op):
        emit, name = self.emit, op.name
        if op.kind == "load":
            mask = self._mask_for(op)
            if op.mask is not None:  # masked-off lanes read 0 and touch no memory
                mask = f"{mask} & {self.k.op(op.mask).name}" if mask else self.k.op(op.mask).name
            if op.target in self.scalars:  # Note [host scalars]: the value itself, an fp32 argument
                value = f"(({self.params[op.target]}) + tl.zeros([1], tl.float32)).to({TL_DTYPE[op.dtype]})"
                emit(f"{name} = tl.where({self.k.op(op.mask).name}, {value}, 0)" if op.mask is not None
                     else f"{name} = {value}")
                return
            ptr = f"{self.params[op.target]} + {_print(op.index)}"
            if mask and not any(v.name[0] in "xr" for v in op.index.free_symbols):
                # one address for every lane (a 0-d tensor stacked with others: a mask over the
                # lanes): Triton needs the pointer as a block to take a block mask
                ptr += f" + tl.zeros_like({self._lanes(op)})"
            evict = f", eviction_policy='{self.evict}'" if self.evict and op.id in self.inner_ids else ""
            emit(f"{name} = tl.load({ptr}{', mask=' + mask + ', other=0' if mask else ''}{evict})")
        elif op.kind == "store":
            self._store(op)
        elif op.kind == "const":
            emit(f"{name} = {_const(op.target, op.dtype)}")
        elif op.kind == "index":
            emit(f"{name} = ({_print(op.index)} + tl.zeros([1], tl.int64))")
        elif op.kind == "pointwise":
            args = [self.k.op(a).name for a in op.args]
            emit(f"{name} = {render(op.target, self._ctx(op), *args)}")
        elif op.kind == "convert":
            emit(f"{name} = {render('convert_element_type', self._ctx(op), self.k.op(op.args[0]).name)}")
        elif op.kind == "rand":
            seed, offset = (self.k.op(a).name for a in op.args)
            emit(f"{name} = {render(op.target, self._ctx(op), seed, offset)}")
        elif op.kind == "reduce":
            self._reduce_persistent(op)
        else:
            raise NotImplementedError(f"Triton backend: op kind {op.kind!r}")

    def _lanes(self, op: Op) -> str:
        """An int expression shaped as the block `op` is computed over."""
        if op.id in self.inner_ids:
            return "xindex + rindex"
        return "xindex + yindex" if self.layout == "tiled" else "xindex"

    def _store(self, op: Op):
        value = self.k.op(op.args[0])
        val = value.name
        dst = self.buf_dtype[op.target]
        if value.dtype != dst:
            val = render("convert_element_type", ExprCtx((value.dtype,), dst), val)
        idx = _print(op.index)
        has_outer = any(s.name.startswith("x") for s in op.index.free_symbols)
        if not has_outer and self.layout != "tiled":
            idx = f"{idx} + tl.zeros_like(xindex)"  # one lane per row, so stores are not scalar
        mask = self._mask_for(op) or "omask"
        if self.layout == "tiled" and value.kind == "const":
            val = f"tl.broadcast_to({val}, [YBLOCK, XBLOCK])"
        self.emit(f"tl.store({self.params[op.target]} + {idx}, {val}, mask={mask})")

    def _reduce_input(self, op: Op) -> tuple[str, torch.dtype]:
        src = self.k.op(op.args[0])
        if op.target in ("any", "all"):
            return f"({src.name} != 0).to(tl.int32)", torch.int32
        acc = accumulator_dtype(op.target, src.dtype)  # Note [shared kernel analyses]
        v = src.name if acc == src.dtype else f"{src.name}.to({TL_DTYPE[acc]})"
        return v, acc

    def _finish(self, op: Op, expr: str, acc: torch.dtype) -> str:
        if op.target in ("any", "all"):
            return expr
        return expr if acc == op.dtype else f"{expr}.to({TL_DTYPE[op.dtype]})"

    def _reduce_persistent(self, op: Op):
        if self.layout == "pointwise":  # a reduction over a one-element range: no reduction axis
            self._reduce_single(op)
            return
        if op.target in ARG_REDUCTIONS:
            init, combine = ARG_REDUCTIONS[op.target]
            src, pos = (self.k.op(a) for a in op.args)
            value, dtype = _arg_value(src)
            v = f"tl.where(omask & rmask, {value}, {init(dtype)})"
            p = f"tl.where(omask & rmask, {pos.name}, {2**63 - 1})"
            self.emit(f"_, {op.name} = tl.reduce(({v}, {p}), 1, {combine})")
            self.emit(f"{op.name} = {op.name}[:, None].to({TL_DTYPE[op.dtype]})")
            return
        rule = REDUCTIONS[op.target]
        v, acc = self._reduce_input(op)
        masked = f"tl.where(omask & rmask, {v}, {rule.init(acc)})"
        self.emit(f"{op.name} = {self._finish(op, rule.final(acc, masked), acc)}[:, None]")

    def _reduce_single(self, op: Op):
        # Over one element: arg-reductions give that element's position, others its value in
        # the result dtype (any/all: whether it is non-zero).
        if op.target in ARG_REDUCTIONS:
            pos = self.k.op(op.args[1])
            self.emit(f"{op.name} = {pos.name}.to({TL_DTYPE[op.dtype]})")
            return
        v, acc = self._reduce_input(op)
        if op.target in ("any", "all"):
            self.emit(f"{op.name} = {v} != 0")
            return
        self.emit(f"{op.name} = {self._finish(op, v, acc)}")

    # -- looped reductions: accumulators around each inner loop --
    def _online_pair(self, si: int):
        """Note [Online softmax]: a loop accumulating m = amax(v), then the next loop accumulating
        sum(exp(v - m)) (and nothing else), merge into one loop with running per-lane (max, sum)
        accumulators rescaled as the max grows, saving one read of each row (softmax over long
        rows: 2 reads + 1 write instead of 3 + 1). Returns (amax op, sum op) or None."""
        st = self.k.stages
        if si + 2 >= len(st) or not (st[si].inner and st[si + 2].inner) or st[si + 1].inner:
            return None
        first, between, second = st[si], st[si + 1], st[si + 2]
        if len(first.reduces) != 1 or len(second.reduces) != 1:
            return None
        rmax, rsum = self.k.op(first.reduces[0]), self.k.op(second.reduces[0])
        if rmax.target != "amax" or rsum.target != "sum" or between.ops != (rmax.id,):
            return None
        e = self.k.op(rsum.args[0])
        if e.kind != "pointwise" or e.target != "exp":
            return None
        d = self.k.op(e.args[0])
        if d.kind != "pointwise" or d.target != "sub" or d.args != (rmax.args[0], rmax.id):
            return None
        v = self.k.op(rmax.args[0])
        if v.dtype not in (torch.float32, torch.float64) or rsum.dtype != v.dtype:
            return None
        if not set(second.ops) <= set(first.ops) | {d.id, e.id}:
            return None
        if any(self.k.op(i).kind == "store" for i in second.ops):
            return None
        return rmax, rsum

    def _online_loop(self, stage: Stage, rmax: Op, rsum: Op):
        emit, v = self.emit, self.k.op(rmax.args[0]).name
        t = TL_DTYPE[rmax.dtype]
        m, sm = f"_acc{rmax.id}", f"_acc{rsum.id}"
        emit(f"{m} = tl.full([XBLOCK, RBLOCK], float('-inf'), {t})")
        emit(f"{sm} = tl.full([XBLOCK, RBLOCK], 0, {t})")
        self.evict = "evict_last"
        emit("for roffset in range(0, rnumel, RBLOCK):")
        self.indent += 1
        self._rdefs("roffset + rbase")
        for i in stage.ops:
            self._op(self.k.op(i))
        emit(f"_m = tl.where(omask & rmask, eh_max_nan({m}, {v}), {m})")
        # lanes still at -inf (nothing finite seen) must not turn exp(-inf - -inf) into NaN
        emit(f"_scale = tl.where({m} == _m, 1.0, tl.exp({m} - _m))")
        emit(f"_term = tl.where(_m == float('-inf'), 0.0, tl.exp({v} - _m))")
        emit(f"{sm} = tl.where(omask & rmask, {sm} * _scale + _term, {sm})")
        emit(f"{m} = _m")
        self.indent -= 1
        self.evict = None
        emit(f"{rmax.name} = tl.reduce({m}, 1, eh_max_nan)[:, None]")
        emit(f"_rescaled = tl.where({m} == {rmax.name}, {sm}, {sm} * tl.exp({m} - {rmax.name}))")
        # an all -inf row: eager computes exp(-inf - -inf) = NaN terms, so its sum is NaN
        emit(f"{rsum.name} = tl.where({rmax.name} == float('-inf'), float('nan'), "
             f"tl.sum(_rescaled, 1)[:, None])")

    def _loop(self, stage: Stage, reduces: list[Op]):
        emit = self.emit
        for r in reduces:
            if r.target in ARG_REDUCTIONS:
                init, _ = ARG_REDUCTIONS[r.target]
                _, dtype = _arg_value(self.k.op(r.args[0]))
                emit(f"_acc{r.id} = {_full('[XBLOCK, RBLOCK]', init(dtype), dtype)}")
                emit(f"_pos{r.id} = tl.full([XBLOCK, RBLOCK], {2**63 - 1}, tl.int64)")
            else:
                _, acc = self._reduce_input(r)
                init = REDUCTIONS[r.target].init(acc)
                emit(f"_acc{r.id} = {_full('[XBLOCK, RBLOCK]', init, acc)}")
        # Loops that a later loop re-reads keep their rows in L2 (evict_last); the last loop's
        # loads are not read again (evict_first). Softmax over long rows then reads HBM ~once.
        last = stage is [s for s in self.k.stages if s.inner][-1]
        self.evict = "evict_first" if last else "evict_last"
        emit("for roffset in range(0, rnumel, RBLOCK):")
        self.indent += 1
        self._rdefs("roffset + rbase")
        for i in stage.ops:
            self._op(self.k.op(i))
        for r in reduces:
            if r.target in ARG_REDUCTIONS:
                init, combine = ARG_REDUCTIONS[r.target]
                src, pos = (self.k.op(a) for a in r.args)
                emit(f"_v, _p = {combine}(_acc{r.id}, _pos{r.id}, {_arg_value(src)[0]}, {pos.name})")
                emit(f"_acc{r.id} = tl.where(omask & rmask, _v, _acc{r.id})")
                emit(f"_pos{r.id} = tl.where(omask & rmask, _p, _pos{r.id})")
            else:
                v, acc = self._reduce_input(r)
                rule = REDUCTIONS[r.target]
                emit(f"_acc{r.id} = tl.where(omask & rmask, {rule.combine(acc, f'_acc{r.id}', v)}, _acc{r.id})")
        self.indent -= 1
        self.evict = None
        for r in reduces:
            if r.target in ARG_REDUCTIONS:
                _, combine = ARG_REDUCTIONS[r.target]
                emit(f"_, {r.name} = tl.reduce((_acc{r.id}, _pos{r.id}), 1, {combine})")
                emit(f"{r.name} = {r.name}[:, None].to({TL_DTYPE[r.dtype]})")
            else:
                _, acc = self._reduce_input(r)
                final = REDUCTIONS[r.target].final(acc, f"_acc{r.id}")
                emit(f"{r.name} = {self._finish(r, final, acc)}[:, None]")

    def _body(self):
        stages = self.k.stages
        if self.layout != "looped":
            done: set[int] = set()
            for st in stages:
                for i in st.ops:
                    if i not in done:  # persistent: an inner value listed in several loops is computed once
                        done.add(i)
                        self._op(self.k.op(i))
            return
        skip: set[int] = set()
        for si, st in enumerate(stages):
            if si in skip:
                continue
            pair = self._online_pair(si) if st.inner else None
            if pair is not None:  # Note [Online softmax]
                self._online_loop(st, *pair)
                skip |= {si + 1, si + 2}
            elif st.inner:
                self._loop(st, [self.k.op(i) for i in st.reduces])
            else:
                for i in st.ops:
                    op = self.k.op(i)
                    if op.kind != "reduce":  # reduces were finished after their loop
                        self._op(op)

    def function(self) -> tuple[str, str]:
        """(the kernel's `@jit` function, the body it was rendered from)."""
        self._prologue()
        self._body()
        body = "\n".join(self.lines)
        k = self.k
        consts = ["XBLOCK: tl.constexpr"]
        if self.layout == "looped":
            consts.append("RBLOCK: tl.constexpr")
        if self.layout == "tiled":
            consts.append("YBLOCK: tl.constexpr")
        names = [str(v) for v in k.sizevars] + [n for n, _ in self._numel_args()]
        sizes = [f"{n}: tl.constexpr" if self.interpret else n for n in names]
        params = ", ".join(list(self.params.values()) + sizes + consts)
        return f"@jit\ndef {k.name}({params}):\n{body}\n", body

    def arg_doc(self) -> str:
        return ", ".join(f"{p}={a.name}:{str(a.dtype).removeprefix('torch.')}:{a.role}"
                         for p, a in zip(self.params.values(), self.k.args))

    def source(self) -> str:
        function, body = self.function()
        k = self.k
        header = [
            f"# ember Triton kernel {k.name} ({self.layout}); args: {self.arg_doc()}",
            f"# computes: {', '.join(k.origins)}" if k.origins else "",
            *_FILE_HEADER,
        ]
        helpers = helper_sources(body)
        parts = ["\n".join(h for h in header if h is not None)]
        if helpers:
            parts.append(helpers)
        parts.append(function)
        return "\n\n".join(parts)


_FILE_HEADER = (
    "# `jit` and `libdevice` are bound by ember_inductor.codegen.triton_runtime.load_module",
    "import triton",
    "import triton.language as tl",
    "",
)


def render_kernel(k: KernelSpec) -> KernelSource:
    """KernelSpec -> KernelSource (Triton text plus launch metadata in `meta`)."""
    w = _KernelWriter(k)
    src = w.source()
    meta = w.meta()
    if k.sizevars:  # Note [size arguments]
        meta["interpret_source"] = _KernelWriter(k, interpret=True).source()
    return KernelSource(k.name, "triton", src, w.k, meta=meta)


class TritonBackend(Backend):
    """Renders fused kernels as Triton; launches compiled on CUDA tensors, interpreted on CPU."""

    name = "triton"
    device_types = ("cuda", "cpu")  # cpu: Triton's interpreter (tests)
    table = TRITON_EXPR
    reductions = {**REDUCTIONS, **ARG_REDUCTIONS}
    random = TRITON_EXPR  # uniform, normal: rules of the expression table

    def render(self, kernel: KernelSpec, options) -> KernelSource:
        return render_kernel(kernel)

    def combinable(self, source: KernelSource) -> bool:
        from ember_inductor.codegen.triton_combo import comboable
        return comboable(source)

    def render_combo(self, name: str, parts: Sequence[KernelSource]) -> KernelSource:
        from ember_inductor.codegen.triton_combo import render_combo
        return render_combo(name, list(parts))

    def build(self, sources: Sequence[KernelSource], options) -> list:
        """One launcher per source; compilation happens at the first GPU launch, for all of
        them at once on `options.compile_workers` threads (see BuildGroup)."""
        group = BuildGroup(os.path.expanduser(options.cache_dir), options.compile_workers)
        # Kernels equal but for their name (the same layer norm in each of a model's blocks)
        # share one launcher: one compile per distinct kernel, not one per call site.
        made: dict[tuple, TritonLauncher] = {}
        launchers = []
        for s in sources:
            code = "\n".join(line for line in s.source.splitlines() if not line.startswith("#"))
            key = (code.replace(f"def {s.name}(", "def _(", 1), repr(sorted(s.meta.items())))
            if key not in made:
                made[key] = TritonLauncher(s, options, group)
            launchers.append(made[key])
        return launchers
