"""C++/OpenMP backend: one `extern "C" void kernel(ptrs...)` per KernelSpec.

Loops: the outer ranges run under `#pragma omp parallel for`, the innermost loop under
`#pragma omp simd` (transcendentals vectorize through glibc's libmvec, see cpp_prelude.h).
Reductions keep one accumulator per outer index (OpenMP simd lanes give the partials); a
reduction over few rows but many elements parallelizes the inner loop instead, with per-thread
partials combined by OpenMP. bfloat16/float16 are computed in float and rounded after each op.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

import sympy
import torch

from ember_inductor.codegen.common import Backend, IndexPrinter, KernelSource
from ember_inductor.codegen.cpp_build import build_many
from ember_inductor.kernel import KernelSpec, Op, Stage
from ember_inductor.kernel_analysis import accumulator_dtype, is_column_reduction
from ember_inductor.sizes import hint

PRELUDE = (Path(__file__).with_name("cpp_prelude.h")).read_text()

STORAGE_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "_Float16",
    torch.bfloat16: "uint16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.int16: "int16_t",
    torch.int32: "int32_t", torch.int64: "int64_t", torch.bool: "bool", torch.uint16: "uint16_t",
    torch.uint32: "uint32_t", torch.uint64: "uint64_t",
}
LOW_PRECISION = {torch.bfloat16: "ember_round_bf16", torch.float16: "ember_round_f16"}


def ctype(dtype: torch.dtype) -> str:
    """The type a value of `dtype` is computed in."""
    return "float" if dtype in LOW_PRECISION else STORAGE_TYPES[dtype]


def _is_float(dtype) -> bool:
    return dtype.is_floating_point


def _f(name):
    """A C math function, float or double by operand dtype."""
    return lambda *a, dtype: f"{name}{'' if dtype == torch.float64 else 'f'}({', '.join(a)})"


def _by_kind(float_fmt, int_fmt):
    return lambda *a, dtype: (float_fmt if _is_float(dtype) else int_fmt).format(*a)


def _one(dtype):
    return "1.0" if dtype == torch.float64 else "1.0f"


# prim -> format(*operand expressions, dtype=operand dtype) -> C++ expression
CPP_TABLE = {
    **{name: _f(name) for name in ("exp2 expm1 log log1p log2 sqrt sin cos tan asin acos atan sinh "
                                   "cosh tanh asinh acosh atanh erf erfc lgamma floor ceil trunc atan2 "
                                   "hypot copysign").split()},
    "exp": lambda a, dtype: f"exp({a})" if dtype == torch.float64 else f"ember_expf({a})",
    "abs": _by_kind("std::fabs({0})", "({0} < 0 ? -{0} : {0})"),
    "neg": lambda a, dtype: f"(-{a})",
    "round": _f("nearbyint"),
    "rsqrt": lambda a, dtype: f"({_one(dtype)} / {_f('sqrt')(a, dtype=dtype)})",
    "reciprocal": lambda a, dtype: f"({_one(dtype) if _is_float(dtype) else '1'} / {a})",
    "sign": lambda a, dtype: f"ember_sign({a})",
    "erfinv": lambda a, dtype: f"ember_erfinv({a})",
    "isnan": lambda a, dtype: f"({a} != {a})",
    "isinf": _by_kind("(std::fabs({0}) == INFINITY)", "false"),
    "isfinite": _by_kind("(std::fabs({0}) < INFINITY)", "true"),
    "logical_not": lambda a, dtype: f"({a} == 0)",
    "bitwise_not": lambda a, dtype: f"(!{a})" if dtype == torch.bool else f"(~{a})",
    "signbit": _by_kind("std::signbit({0})", "({0} < 0)"),
    "add": lambda a, b, dtype: f"({a} + {b})",
    "sub": lambda a, b, dtype: f"({a} - {b})",
    "mul": lambda a, b, dtype: f"({a} * {b})",
    "div": _by_kind("({0} / {1})", "ember_div_trunc({0}, {1})"),
    "floor_divide": _by_kind("ember_floordiv_float({0}, {1})", "ember_floordiv_int({0}, {1})"),
    "remainder": _by_kind("ember_remainder_float({0}, {1})", "ember_remainder_int({0}, {1})"),
    "fmod": lambda a, b, dtype: (_f("fmod")(a, b, dtype=dtype) if _is_float(dtype)
                                 else f"ember_fmod_int({a}, {b})"),
    "pow": lambda a, b, dtype: _f("pow")(a, b, dtype=dtype) if _is_float(dtype) else f"ember_ipow({a}, {b})",
    "maximum": lambda a, b, dtype: f"ember_maximum({a}, {b})",
    "minimum": lambda a, b, dtype: f"ember_minimum({a}, {b})",
    "eq": lambda a, b, dtype: f"({a} == {b})",
    "ne": lambda a, b, dtype: f"({a} != {b})",
    "lt": lambda a, b, dtype: f"({a} < {b})",
    "le": lambda a, b, dtype: f"({a} <= {b})",
    "gt": lambda a, b, dtype: f"({a} > {b})",
    "ge": lambda a, b, dtype: f"({a} >= {b})",
    "logical_and": lambda a, b, dtype: f"(({a} != 0) & ({b} != 0))",
    "logical_or": lambda a, b, dtype: f"(({a} != 0) | ({b} != 0))",
    "logical_xor": lambda a, b, dtype: f"(({a} != 0) != ({b} != 0))",
    "bitwise_and": lambda a, b, dtype: f"({a} & {b})",
    "bitwise_or": lambda a, b, dtype: f"({a} | {b})",
    "bitwise_xor": lambda a, b, dtype: f"({a} ^ {b})",
    "shift_left": lambda a, b, dtype: f"({a} << {b})",
    "shift_right": lambda a, b, dtype: f"({a} >> {b})",
    "where": lambda c, a, b, dtype: f"({c} ? {a} : {b})",
}


def literal(value, dtype) -> str:
    if dtype == torch.bool:
        return "true" if value else "false"
    if _is_float(dtype):
        v = float(value)
        suffix = "" if dtype == torch.float64 else "f"
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return f"{v.hex()}" if dtype == torch.float64 else f"{float.hex(v)}{suffix}"
    return f"(({STORAGE_TYPES[dtype]}){int(value)}LL)"


class CppIndexPrinter(IndexPrinter):
    floordiv = "({a} / {b})"
    mod = "({a} % {b})"


_print_index = CppIndexPrinter()


def _acc_type(op: Op, src: torch.dtype) -> str:
    """The C type of a reduction's accumulator (Note [shared kernel analyses])."""
    return ctype(accumulator_dtype(op.target, src))


def _lowest(dtype):
    if _is_float(dtype):
        return "-INFINITY"
    return "0" if dtype == torch.bool else f"(({ctype(dtype)})(-{torch.iinfo(dtype).max}LL - 1))"


def _highest(dtype):
    if _is_float(dtype):
        return "INFINITY"
    return "1" if dtype == torch.bool else f"(({ctype(dtype)}){torch.iinfo(dtype).max}LL)"


REDUCTIONS = {
    "sum": (lambda dt: "0", "{acc} = {acc} + {v};", "+"),
    "prod": (lambda dt: "1", "{acc} = {acc} * {v};", "*"),
    "amax": (_lowest, "{acc} = {acc} > {v} ? {acc} : {v};", "max"),
    "amin": (_highest, "{acc} = {acc} < {v} ? {acc} : {v};", "min"),
    "any": (lambda dt: "0", "{acc} |= ({v} != 0);", "|"),
    "all": (lambda dt: "1", "{acc} &= ({v} != 0);", "&"),
}
ARG_REDUCTIONS = {"argmax": ">", "argmin": "<"}
# random prim -> its counter-based generator in cpp_prelude.h
RANDOM = {"uniform": "ember_rand_uniform", "normal": "ember_rand_normal"}


class CppKernelRenderer:
    """Renders one KernelSpec (see Note [Kernel description] in common.py)."""

    def __init__(self, k: KernelSpec, threads_hint: int = 2, num_threads: int | None = None):
        self.k = k if k.stages else k.with_stages()
        self.ops = {o.id: o for o in self.k.ops}
        self.params = {a.name: f"p{i}" for i, a in enumerate(self.k.args)}
        self.lines: list[str] = []
        self.depth = 1
        self.threads_hint = threads_hint
        self.num_threads = num_threads
        self.recip_divs: set[int] = set()  # divisions by a per-row value: multiply by its inverse
        self.inverted: set[int] = set()    # the divisors whose inverse is declared
        self.hoisted: set[int] = set()     # loop-invariant values, computed once before the loops
        self.parallel_if = ""  # symbolic sizes: whether to run in parallel is decided at run time

    def hoist_invariants(self) -> None:
        """Values that no loop variable reaches (an optimizer's bias corrections from its 0-d
        step count, a 0-d learning rate) are computed once, before the loops, not per element.
        A load of a buffer this kernel stores is never hoisted: it reads what the loops write."""
        stored = {op.target for op in self.k.ops if op.kind == "store"}
        # a load runs before the loops only if they run at all: an empty tensor's storage may be
        # null (the loops of a zero-size kernel never load; a hoisted load crashed: fuzz seed 3674)
        nonempty = all(isinstance(r, (int, sympy.Integer)) and int(r) > 0
                       for r in (*self.k.ranges, *self.k.reduction_ranges))
        for op in self.k.ops:
            if op.kind == "const":
                invariant = True
            elif op.kind == "load":
                invariant = (nonempty and op.mask is None and not op.index.free_symbols
                             and op.target not in stored)
            elif op.kind in ("pointwise", "convert"):
                invariant = all(a in self.hoisted for a in op.args)
            else:
                invariant = False
            if invariant:
                self.emit(f"const {ctype(op.dtype)} tmp{op.id} = {self.expr(op)};")
                self.hoisted.add(op.id)

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def hint_prod(self, sizes) -> int:
        """The product of sizes under the hints: heuristics only."""
        return math.prod(hint(s, self.k.hints) for s in sizes)

    # -- values --------------------------------------------------------------------------------
    def expr(self, op: Op) -> str:
        a = [f"tmp{i}" for i in op.args]
        if op.kind == "load":
            ptr = f"{self.params[op.target]}[{_print_index(op.index)}]"
            if op.dtype == torch.bfloat16:
                ptr = f"ember_bf16_to_float({ptr})"
            elif op.dtype == torch.float16:
                ptr = f"(float){ptr}"
            return ptr if op.mask is None else f"(tmp{op.mask} ? {ptr} : ({ctype(op.dtype)})0)"
        if op.kind == "const":
            return literal(op.target, op.dtype)
        if op.kind == "index":
            return f"((int64_t){_print_index(op.index)})"
        if op.kind == "pointwise":
            if op.id in self.recip_divs:  # see inner_loop
                d = op.args[1]
                e = f"(mul{d} ? {a[0]} * inv{d} : {a[0]} / tmp{d})"
                return f"{LOW_PRECISION[op.dtype]}({e})" if op.dtype in LOW_PRECISION else e
            operand_dtype = self.ops[op.args[-1]].dtype
            e = CPP_TABLE[op.target](*a, dtype=_compute_dtype(operand_dtype))
            return f"{LOW_PRECISION[op.dtype]}({e})" if op.dtype in LOW_PRECISION else e
        if op.kind == "convert":
            src = self.ops[op.args[0]].dtype
            if op.dtype == torch.bool:
                return f"({a[0]} != 0)"
            if op.dtype in LOW_PRECISION:
                return f"{LOW_PRECISION[op.dtype]}(static_cast<float>({a[0]}))"
            if src == torch.bool:
                return f"static_cast<{ctype(op.dtype)}>({a[0]} ? 1 : 0)"
            if src.is_floating_point and not op.dtype.is_floating_point:  # see ember_f2i64 in the prelude
                wide = "ember_f2i32" if op.dtype in (torch.int32, torch.int16, torch.int8) else "ember_f2i64"
                return f"static_cast<{ctype(op.dtype)}>({wide}(static_cast<double>({a[0]})))"
            return f"static_cast<{ctype(op.dtype)}>({a[0]})"
        if op.kind == "rand":
            return f"{RANDOM[op.target]}({a[0]}, {a[1]})"
        raise NotImplementedError(f"C++ backend: op kind {op.kind}")

    def emit_op(self, op: Op) -> None:
        if op.id in self.hoisted:
            return
        if op.kind == "store":
            v = f"tmp{op.args[0]}"
            dst = self.k.args[[a.name for a in self.k.args].index(op.target)].dtype
            if dst == torch.bfloat16:
                v = f"ember_float_to_bf16({v})"
            elif dst == torch.float16:
                v = f"(_Float16){v}"
            self.emit(f"{self.params[op.target]}[{_print_index(op.index)}] = {v};")
        elif op.kind == "reduce":
            self.emit(f"const {ctype(op.dtype)} tmp{op.id} = {self.finish(op)};")
        else:
            self.emit(f"const {ctype(op.dtype)} tmp{op.id} = {self.expr(op)};")

    # -- reductions ----------------------------------------------------------------------------
    def acc_decls(self, op: Op) -> None:
        src = self.ops[op.args[0]].dtype
        if op.target in ARG_REDUCTIONS:
            self.emit(f"{ctype(src)} acc{op.id} = 0; int64_t pos{op.id} = 0; bool first{op.id} = true;")
            return
        init, _, _ = REDUCTIONS[op.target]
        self.emit(f"{_acc_type(op, src)} acc{op.id} = {init(src)};")
        if op.target in ("amax", "amin") and _is_float(src):
            self.emit(f"int nan{op.id} = 0;")

    def acc_update(self, op: Op) -> None:
        v = f"tmp{op.args[0]}"
        if op.target in ARG_REDUCTIONS:
            cmp, p = ARG_REDUCTIONS[op.target], f"tmp{op.args[1]}"
            acc = f"acc{op.id}"
            self.emit(f"if (first{op.id} || (!({acc} != {acc}) && ({v} != {v} || {v} {cmp} {acc}))) "
                      f"{{ {acc} = {v}; pos{op.id} = {p}; first{op.id} = false; }}")
            return
        _, update, _ = REDUCTIONS[op.target]
        self.emit(update.format(acc=f"acc{op.id}", v=v))
        if op.target in ("amax", "amin") and _is_float(self.ops[op.args[0]].dtype):
            self.emit(f"nan{op.id} |= ({v} != {v});")

    def clauses(self, reduces) -> str:
        parts = []
        for r in reduces:
            op = self.ops[r]
            if op.target in ARG_REDUCTIONS:
                return None  # not vectorizable / parallelizable: a scalar loop
            parts.append(f"reduction({REDUCTIONS[op.target][2]}:acc{r})")
            if op.target in ("amax", "amin") and _is_float(self.ops[op.args[0]].dtype):
                parts.append(f"reduction(|:nan{r})")
        return " ".join(parts)

    def finish(self, op: Op) -> str:
        if op.target in ARG_REDUCTIONS:
            return f"pos{op.id}"
        acc = f"acc{op.id}"
        if op.target in ("amax", "amin") and _is_float(self.ops[op.args[0]].dtype):
            acc = f"(nan{op.id} ? NAN : {acc})"
        e = f"static_cast<{ctype(op.dtype)}>({acc})"
        return f"{LOW_PRECISION[op.dtype]}({e})" if op.dtype in LOW_PRECISION else e

    # -- loops ---------------------------------------------------------------------------------
    def loops(self, names, ranges, parallel: bool, simd: bool, clauses: str, body) -> None:
        """Perfectly nested loops: `omp parallel for` on the outermost, `omp simd` on the innermost."""
        n = len(names)
        for d, (v, size) in enumerate(zip(names, ranges)):
            words = []
            if d == 0 and parallel:
                words.append("parallel for")
            if d == n - 1 and simd:
                words.append("simd")
            if words:
                if d == 0 and parallel:
                    words.append("schedule(static)" + (f" collapse({n - 1})" if n > 2 else ""))
                    if self.num_threads:
                        words.append(f"num_threads({self.num_threads})")
                    if self.parallel_if:
                        words.append(self.parallel_if)
                self.emit(" ".join(["#pragma omp"] + words + ([clauses] if clauses else [])))
            self.emit(f"for (int64_t {v} = 0; {v} < {_print_index(size)}; {v}++) {{")
            self.depth += 1
        body()
        for _ in names:
            self.depth -= 1
            self.emit("}")

    def render_stage_ops(self, stage: Stage) -> None:
        for i in stage.ops:
            self.emit_op(self.ops[i])

    # -- row caches: an expensive inner value needed by a later inner loop is kept in a per-row
    # stack buffer instead of recomputed (softmax's exp(x - max) is computed once, not twice)
    ROW_CACHE_BYTES = 64 * 1024
    CHEAP = frozenset("add sub mul neg abs where maximum minimum eq ne lt le gt ge logical_and logical_or "
                      "logical_not bitwise_and bitwise_or bitwise_xor".split())

    def expensive(self, i: int, depth: int = 0) -> bool:
        """Worth a row cache: a transcendental, a random draw or a long chain of cheap ops."""
        op = self.ops[i]
        if op.kind == "rand" or (op.kind == "pointwise" and op.target not in self.CHEAP):
            return True
        if op.kind not in ("pointwise", "convert") or depth > 6:
            return depth > 6
        return any(self.expensive(a, depth + 1) for a in op.args)

    def plan_row_caches(self, inner_stages) -> dict:
        """-> {stage index: (ops to compute, {op id: 'write'|'read'})} for the inner loops."""
        red_n = self.hint_prod(self.k.reduction_ranges)
        # A value may be read from a row cache only if an earlier inner loop really computes it
        # (it is in that loop's `keep`), not merely lists it among its stage's ops.
        computed_in: dict[int, int] = {}
        plans, cached = {}, {}
        budget = self.ROW_CACHE_BYTES // max(red_n * 8, 1)
        for j, st in enumerate(inner_stages):
            roots = [i for i in st.ops if self.ops[i].kind == "store"]
            roots += [a for r in st.reduces for a in self.ops[r].args]
            keep, reads, stack = set(), set(), list(roots)
            in_stage = set(st.ops)
            while stack:
                i = stack.pop()
                if i in keep or i in reads or i not in in_stage:
                    continue
                op = self.ops[i]
                if i in computed_in and (i in cached or (len(cached) < budget and self.expensive(i))):
                    cached[i] = computed_in[i]
                    reads.add(i)
                    continue
                keep.add(i)
                stack.extend(op.args)
                if op.mask is not None:
                    stack.append(op.mask)
            plans[j] = [keep, reads]
            for i in keep:
                computed_in.setdefault(i, j)
        for i, j in cached.items():
            plans[j].append(i)
        return {j: (tuple(i for i in inner_stages[j].ops if i in p[0]), set(p[1]), set(p[2:]))
                for j, p in plans.items()}

    def row_index(self) -> str:
        k = self.k
        expr, stride = [], sympy.Integer(1)
        for v, n in reversed(list(zip(k.reduction_vars, k.reduction_ranges))):
            expr.append(f"{v}*{_print_index(stride)}" if stride != 1 else str(v))
            stride *= n
        return " + ".join(reversed(expr)) or "0"

    def inner_loop(self, stage: Stage, parallel: bool, plan=None) -> None:
        k = self.k
        for r in stage.reduces:
            self.acc_decls(self.ops[r])
        clauses = self.clauses(stage.reduces)
        vectorize = clauses is not None
        ops, reads, writes = plan if plan else (stage.ops, set(), set())
        row = self.row_index()
        # A float division by a value of the outer stage (softmax's sum) becomes a multiply by
        # its inverse, computed once per row: what ATen's CPU softmax does (within 1.5 ulp of
        # the quotient; zeros, infinities and NaN give the quotient's result), and a vector
        # division costs several multiplies.
        inner_ids = set(ops) | set(reads)
        for i in ops:
            op = self.ops[i]
            if (op.kind == "pointwise" and op.target == "div" and op.dtype in (torch.float32, torch.float64)
                    and op.args[1] not in inner_ids):
                if op.args[1] not in self.inverted:
                    self.inverted.add(op.args[1])
                    d, lim = op.args[1], "DBL_MIN" if op.dtype == torch.float64 else "FLT_MIN"
                    self.emit(f"const {ctype(op.dtype)} inv{d} = {_one(op.dtype)} / tmp{d};")
                    # a subnormal divisor's inverse overflows: divide then (a loop-invariant
                    # test, which the compiler hoists out of the loop)
                    self.emit(f"const bool mul{d} = !(std::fabs(tmp{d}) < {lim} && tmp{d} != 0);")
                self.recip_divs.add(i)

        def body():
            for i in sorted(reads):
                self.emit(f"const {ctype(self.ops[i].dtype)} tmp{i} = row{i}[{row}];")
            for i in ops:
                self.emit_op(self.ops[i])
                if i in writes:
                    self.emit(f"row{i}[{row}] = tmp{i};")
            for r in stage.reduces:
                self.acc_update(self.ops[r])
        self.loops([str(v) for v in k.reduction_vars], k.reduction_ranges, parallel and vectorize,
                   vectorize, clauses or "", body)

    # -- column reductions: the reduction runs over an outer (strided) dimension ---------------
    COLUMN_CHUNK = 32
    COLUMN_STACK_BYTES = 256 * 1024  # the block accumulators live on each thread's stack

    def column_reduction(self) -> bool:
        """True when the reduced dimension is strided and the outer one contiguous (the weight
        and bias gradients of a layer norm or a linear layer: a sum over rows of a row-major
        matrix; batch norm's statistics over channels-last memory). Row-by-row loops would then
        read one element per cache line; see render_column_reduction."""
        k = self.k
        inner = [s for s in k.stages if s.inner]
        if not inner or not k.ranges or not k.reduction_ranges:
            return False
        n_acc = sum(len(st.reduces) for st in inner)
        if not all(n.is_Integer for n in k.ranges):  # its accumulator rows are stack arrays of the
            return False                             # outer size: static (the rows may be symbolic)
        if math.prod(int(n) for n in k.ranges) * 8 * n_acc > self.COLUMN_STACK_BYTES:
            return False
        if any(self.ops[r].target not in REDUCTIONS for st in inner for r in st.reduces):
            return False
        return is_column_reduction(k)  # Note [shared kernel analyses]

    def render_column_reduction(self, params: str) -> str:
        """Note [column reductions]
        The loops are interchanged: reduction variables outside, the outer (output) variables
        inside under `omp simd`, so every row is read contiguously. Each thread accumulates a
        private row of partials over its static share of the reduction range, in blocks of
        COLUMN_CHUNK rows summed apart first (pairwise-like rounding, as ATen's cascade sums);
        the partials are then combined in thread order (deterministic for a given thread
        count). The outer stages before a reduction are recomputed where needed (they depend
        on the outer variables only: loads, constants, earlier reductions); their stores and
        the stages after the last reduction run once per output element, in the final combine.
        A kernel with several dependent reductions (a variance after its mean) makes one such
        pass per inner stage; an earlier stage's combined accumulators wait in a row `res<id>`.
        """
        k = self.k
        xs, rs = [str(v) for v in k.range_vars], [str(v) for v in k.reduction_vars]
        outer_n = math.prod(int(n) for n in k.ranges)
        # the number of rows: static, or an expression over the size arguments
        red = sympy.Mul(*k.reduction_ranges)
        red_n = _print_index(red)
        flat, stride = [], 1
        for v, n in reversed(list(zip(xs, k.ranges))):
            flat.append(v if stride == 1 else f"{v}*{stride}")
            stride *= int(n)
        xi = " + ".join(reversed(flat))
        inner_at = [j for j, st in enumerate(k.stages) if st.inner]
        all_red = [self.ops[i] for j in inner_at for i in k.stages[j].reduces]
        acc_t = {op.id: _acc_type(op, self.ops[op.args[0]].dtype) for op in all_red}
        nt = str(self.num_threads) if self.num_threads else "omp_get_max_threads()"
        work = outer_n * max(1, len(k.ops) // 2)
        self.lines = [f'extern "C" void kernel({params}) {{']
        self.depth = 1
        if red.is_Integer:
            parallel = work * int(red) >= 32768 and int(red) > 1
            self.emit(f"const int nt = {nt if parallel else '1'};")
        else:  # the same rule on this call's rows
            parallel = True
            self.emit(f"const int nt = ({work} * {red_n} >= 32768 && {red_n} > 1) ? {nt} : 1;")
        self.emit("int used = 1;  // the team OpenMP gives (fewer than nt when nested): partials filled")
        for op in all_red:
            self.emit(f"{acc_t[op.id]}* part{op.id} = static_cast<{acc_t[op.id]}*>("
                      f"std::malloc(sizeof({acc_t[op.id]}) * {outer_n} * nt));")
        earlier = [op for j in inner_at[:-1] for op in (self.ops[i] for i in k.stages[j].reduces)]
        for op in earlier:
            self.emit(f"{acc_t[op.id]}* res{op.id} = static_cast<{acc_t[op.id]}*>("
                      f"std::malloc(sizeof({acc_t[op.id]}) * {outer_n}));")

        def load_earlier(done):
            """The combined accumulators of the reductions already made, as the scalars the
            stages after them read (`acc<id>`, and `nan<id>` carried in it)."""
            for op in done:
                self.emit(f"const {acc_t[op.id]} acc{op.id} = res{op.id}[xi];")
                if op.target in ("amax", "amin") and _is_float(self.ops[op.args[0]].dtype):
                    self.emit(f"const int nan{op.id} = 0;  // carried in acc{op.id}")

        done: list = []
        for n_pass, j in enumerate(inner_at):
            red = [self.ops[i] for i in k.stages[j].reduces]
            outer_before = [st for st in k.stages[:j] if not st.inner]
            self.emit_column_pass(red, acc_t, outer_before, k.stages[j], done, load_earlier,
                                  xs, rs, xi, outer_n, red_n, parallel)
            last = n_pass == len(inner_at) - 1

            def combine(red=red, last=last, done=tuple(done)):
                self.emit(f"const int64_t xi = {xi};")
                load_earlier(done)
                for op in red:
                    src = self.ops[op.args[0]].dtype
                    self.emit(f"{acc_t[op.id]} acc{op.id} = part{op.id}[xi];")
                    self.emit(f"for (int t = 1; t < used; t++) "
                              + _column_update(op, src, f"acc{op.id}", f"part{op.id}[t * {outer_n} + xi]"))
                    if last and op.target in ("amax", "amin") and _is_float(src):
                        self.emit(f"const int nan{op.id} = 0;  // carried in acc{op.id}")
                    if not last:
                        self.emit(f"res{op.id}[xi] = acc{op.id};")
                if last:  # every outer stage, stores included, once per output element
                    for st in k.stages:
                        if not st.inner:
                            self.render_stage_ops(st)
            self.loops(xs, k.ranges, parallel and outer_n >= 4096, False, "", combine)
            done += red
        for op in all_red:
            self.emit(f"std::free(part{op.id});")
        for op in earlier:
            self.emit(f"std::free(res{op.id});")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def emit_column_pass(self, red, acc_t, outer_before, inner, done, load_earlier, xs, rs, xi,
                         outer_n, red_n, parallel) -> None:
        """One parallel pass of a column reduction: every thread's partial row of `red`."""
        self.emit("#pragma omp parallel num_threads(nt)" + ("" if parallel else " if(0)"))
        self.emit("{")
        self.depth += 1
        self.emit("const int64_t t = omp_get_thread_num(), nth = omp_get_num_threads();")
        self.emit("if (t == 0) used = (int)nth;")
        self.emit(f"const int64_t lo = {red_n} * t / nth, hi = {red_n} * (t + 1) / nth;")
        for op in red:
            init = REDUCTIONS[op.target][0](self.ops[op.args[0]].dtype)
            self.emit(f"{acc_t[op.id]}* __restrict__ tot{op.id} = part{op.id} + t * {outer_n};")
            self.emit(f"{acc_t[op.id]} acc{op.id}[{outer_n}] __attribute__((aligned(64)));")
            self.emit(f"for (int64_t i = 0; i < {outer_n}; i++) tot{op.id}[i] = {init};")
        # Blocks of CHUNK rows are summed apart, then added to the thread's total: the rounding
        # error grows with CHUNK + rows / CHUNK instead of with the rows.
        self.emit(f"for (int64_t c = lo; c < hi; c += {self.COLUMN_CHUNK}) {{")
        self.depth += 1
        self.emit(f"const int64_t ce = c + {self.COLUMN_CHUNK} < hi ? c + {self.COLUMN_CHUNK} : hi;")
        for op in red:
            self.emit(f"for (int64_t i = 0; i < {outer_n}; i++) acc{op.id}[i] = "
                      f"{REDUCTIONS[op.target][0](self.ops[op.args[0]].dtype)};")
        self.emit("for (int64_t rf = c; rf < ce; rf++) {")
        self.depth += 1
        stride = sympy.Integer(1)
        for v, n in reversed(list(zip(rs, self.k.reduction_ranges))):
            self.emit(f"const int64_t {v} = rf;" if len(rs) == 1 else
                      f"const int64_t {v} = (rf / {_print_index(stride)}) % {_print_index(n)};")
            stride *= n
        # Keeps g++ from vectorizing this row loop instead of the inner one (it then gathers
        # across rows: 2-3x slower, measured); an empty asm statement cannot be vectorized.
        self.emit('__asm__ volatile("" : : "r"(rf));')

        def body():
            self.emit(f"const int64_t xi = {xi};")
            load_earlier(done)
            for st in outer_before:  # its stores run once, in the final combine, not once per row
                for i in st.ops:
                    if self.ops[i].kind != "store":
                        self.emit_op(self.ops[i])
            self.render_stage_ops(inner)
            for op in red:
                self.emit(_column_update(op, self.ops[op.args[0]].dtype, f"acc{op.id}[xi]", f"tmp{op.args[0]}"))
        self.loops(xs, self.k.ranges, False, True, "", body)
        self.depth -= 1
        self.emit("}")
        for op in red:
            self.emit("#pragma omp simd")
            self.emit(f"for (int64_t i = 0; i < {outer_n}; i++) "
                      + _column_update(op, self.ops[op.args[0]].dtype, f"tot{op.id}[i]", f"acc{op.id}[i]"))
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")

    def render(self) -> str:
        k = self.k
        params = ", ".join(
            [f"{'const ' if a.role == 'in' else ''}{STORAGE_TYPES[a.dtype]}* __restrict__ {self.params[a.name]}"
             for a in k.args] + [f"const int64_t {v}" for v in k.sizevars])
        if self.column_reduction():
            return self.render_column_reduction(params)
        # heuristics from the hints (Note [symbolic sizes in the inductor])
        outer_n = self.hint_prod(k.ranges)
        red_n = self.hint_prod(k.reduction_ranges)
        work = outer_n * max(red_n, 1) * max(1, len(k.ops) // 2)
        parallel = work >= 32768 and outer_n * max(red_n, 1) >= 1024
        if k.sizevars:  # the same rule, evaluated by OpenMP at each call on that call's sizes
            elems = sympy.Mul(*k.ranges, *k.reduction_ranges)
            parallel = True
            self.parallel_if = (f"if({_print_index(elems * max(1, len(k.ops) // 2))} >= 32768 && "
                                f"{_print_index(elems)} >= 1024)")
        inner_stages = [s for s in k.stages if s.inner]
        parallel_inner = bool(parallel and inner_stages and outer_n < 8 * self.threads_hint and red_n >= 8192)

        static_rows = all(n.is_Integer for n in k.reduction_ranges)
        plans = self.plan_row_caches(inner_stages) if len(inner_stages) > 1 else {}
        red_n = max(red_n, 1)
        row_len = _print_index(sympy.Mul(*k.reduction_ranges))

        def body():
            for j in sorted({i for p in plans.values() for i in p[2]}):
                t = ctype(self.ops[j].dtype)
                if static_rows:  # a stack array of the row's length
                    self.emit(f"{t} row{j}[{red_n}] __attribute__((aligned(64)));")
                    continue
                # a row of symbolic length: each thread's buffer, grown to the longest row seen
                self.emit(f"static thread_local {t}* row{j}_buf = nullptr; static thread_local int64_t row{j}_cap = 0;")
                self.emit(f"if (row{j}_cap < {row_len}) {{ std::free(row{j}_buf); row{j}_cap = {row_len}; "
                          f"row{j}_buf = static_cast<{t}*>(std::malloc(sizeof({t}) * row{j}_cap)); }}")
                self.emit(f"{t}* __restrict__ row{j} = row{j}_buf;")
            n_inner = 0
            for stage in k.stages:
                if stage.inner:
                    self.inner_loop(stage, parallel_inner, plans.get(n_inner))
                    n_inner += 1
                else:
                    self.render_stage_ops(stage)

        self.lines = [f'extern "C" void kernel({params}) {{']
        self.depth = 1
        self.hoist_invariants()
        self.loops([str(v) for v in k.range_vars], k.ranges, parallel and not parallel_inner,
                   not inner_stages, "", body)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"


def _column_update(op: Op, src_dtype, acc: str, v: str) -> str:
    """One accumulation step of a column reduction; amax/amin carry NaN in the accumulator
    itself (a NaN accumulator stays NaN, a NaN value replaces it)."""
    if op.target in ("amax", "amin") and _is_float(src_dtype):
        cmp = ">" if op.target == "amax" else "<"
        return f"{acc} = ({acc} != {acc} || {acc} {cmp} {v}) ? {acc} : {v};"
    return REDUCTIONS[op.target][1].format(acc=acc, v=v)


def _compute_dtype(dtype):
    return torch.float32 if dtype in LOW_PRECISION else dtype


class CppBackend(Backend):
    name = "cpp"
    device_types = ("cpu",)
    table = CPP_TABLE
    reductions = {**REDUCTIONS, **ARG_REDUCTIONS}
    random = RANDOM

    def render(self, kernel: KernelSpec, options) -> KernelSource:
        body = CppKernelRenderer(kernel, options.num_threads or os.cpu_count() or 2, options.num_threads).render()
        return KernelSource(kernel.name, self.name, PRELUDE + "\n" + body, kernel, {"body": body})

    def build(self, sources: Sequence[KernelSource], options) -> list:
        return build_many(PRELUDE, [s.meta["body"] for s in sources], [len(s.kernel.args) for s in sources],
                          options, [len(s.kernel.sizevars) for s in sources])
