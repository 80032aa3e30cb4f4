"""The kernel description: what the scheduler makes of each fused kernel and every code
generation backend renders (`KernelSpec`, its SSA `Op`s and loop `Stage`s).

Note [Kernel description]
    The scheduler hands each backend one `KernelSpec` per fused kernel. A kernel iterates an
    outer space `ranges` (variables x0, x1, ...: independent, parallel) and, for reduction
    kernels, an inner space `reduction_ranges` (variables r0, r1, ...). Ranges are exact
    (static sympy Integers now, symbolic later); tails and masks are the backend's business
    (a Triton block masks `x < xnumel`, the C++ loop has a scalar tail).

    `ops` is the kernel body as an SSA DAG in topological order: every value is computed once,
    named by its `id`, and the backend renders it as the variable `tmp{id}`. Index expressions
    are sympy expressions over x*, r* and, for indirect indexing (gather, index), symbols
    `tmp{id}` naming int64 values of the kernel (those ids are also listed in `args`, so the
    DAG order covers them). Indices are in elements of the buffer's storage (offsets folded in).

    Where each op runs is decided once, here, for every backend (`stages`): a reduction kernel
    alternates outer stages (once per outer index) and inner loops (over the reduction ranges);
    a `reduce` op's value is available from the next outer stage on. An inner op may be needed
    by several inner loops (softmax reads x in three): it is listed in each and recomputed
    there. A pointwise kernel is a single outer stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import sympy
import torch

# kind -> meaning of (target, args, index)
OP_KINDS = {
    "load": "target=buffer name, index=element index, args=ids of indirect index values used in "
            "index; mask=None or a bool value id: masked-off lanes read 0 and touch no memory "
            "-> value of the buffer's dtype",
    "store": "target=buffer name, index=element index, args=(value,) -> no value",
    "const": "target=Python scalar (bool/int/float, may be inf/nan) -> value of dtype",
    "index": "index=sympy expr over x*/r* (args: indirect values in it) -> int64 value (iota, "
             "argmax positions, Philox counters)",
    "pointwise": "target=prim name ('add', 'sin', 'where', ...), args=operands -> value of dtype",
    "convert": "target=None, args=(value,) -> value converted to dtype (C-style, bool: != 0)",
    "reduce": "target='sum'|'prod'|'amax'|'amin'|'any'|'all'|'argmax'|'argmin', args=(value,) "
              "or (value, position) for arg-reductions (position: an int64 'index' op; the first "
              "extreme wins, NaN counts as extreme; amax/amin propagate NaN) -> value of dtype "
              "(int64 for arg-reductions); accumulate low-precision floats in float32",
    "rand": "target='uniform'|'normal', args=(seed, offset) int64 -> Philox4x32-10 float32, "
            "bit-identical to triton tl.rand/tl.randn(seed, offset)",
}


@dataclass(frozen=True)
class Op:
    id: int
    kind: str
    target: object
    args: tuple[int, ...]
    dtype: torch.dtype | None  # None for stores
    index: sympy.Expr | None = None
    mask: int | None = None    # loads only: a bool value id (see OP_KINDS["load"])

    @property
    def name(self) -> str:
        return f"tmp{self.id}"


@dataclass(frozen=True)
class KernelArg:
    name: str              # buffer name in the wrapper
    dtype: torch.dtype
    role: str              # "in" | "out" | "inout" | "scalar" (a 0-d value passed by value,
                           # loaded at index 0: Note [host scalars] in lowering/__init__.py)


@dataclass(frozen=True)
class Stage:
    inner: bool            # True: an inner loop over reduction_ranges
    ops: tuple[int, ...]   # op ids, in order (an inner loop lists every inner op it needs)
    reduces: tuple[int, ...] = ()  # inner loop: the reduce ops it accumulates (declare before,
                                   # accumulate inside, their value exists after the loop)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    ranges: tuple[sympy.Expr, ...]
    reduction_ranges: tuple[sympy.Expr, ...]
    args: tuple[KernelArg, ...]
    ops: tuple[Op, ...]
    origins: tuple[str, ...] = ()   # graph nodes this kernel computes (for comments)
    stages: tuple[Stage, ...] = field(default=(), compare=False)
    # Note [symbolic sizes in the inductor] (sizes.py): the size symbols (s0, ...) the ranges
    # and indices mention, passed to the kernel as int64 scalars after the buffers, in this
    # order; `hints` their values in the call compiled for (heuristics only)
    sizevars: tuple = ()
    hints: dict = field(default_factory=dict, compare=False, hash=False)
    # a symbolic kernel whose every index fits int32 under a recorded guard (kernel_analysis.py,
    # Note [32-bit indices of symbolic kernels])
    int32_indices: bool = False

    @property
    def range_vars(self) -> tuple[sympy.Symbol, ...]:
        return tuple(range_var(i) for i in range(len(self.ranges)))

    @property
    def reduction_vars(self) -> tuple[sympy.Symbol, ...]:
        return tuple(reduction_var(i) for i in range(len(self.reduction_ranges)))

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduction_ranges)

    def op(self, op_id: int) -> Op:
        return self._by_id[op_id]

    @property
    def _by_id(self) -> dict[int, Op]:
        cache = self.__dict__.get("_by_id_cache")
        if cache is None:
            cache = {o.id: o for o in self.ops}
            object.__setattr__(self, "_by_id_cache", cache)
        return cache

    def with_stages(self) -> "KernelSpec":
        return KernelSpec(self.name, self.ranges, self.reduction_ranges, self.args, self.ops,
                          self.origins, compute_stages(self.ops), self.sizevars, self.hints, self.int32_indices)

    def __str__(self) -> str:
        return format_kernel(self)


def range_var(i: int) -> sympy.Symbol:
    return sympy.Symbol(f"x{i}", integer=True, nonnegative=True)


def reduction_var(i: int) -> sympy.Symbol:
    return sympy.Symbol(f"r{i}", integer=True, nonnegative=True)


def value_symbol(op_id: int) -> sympy.Symbol:
    """The symbol by which an index expression refers to the int64 value `tmp{op_id}`."""
    return sympy.Symbol(f"tmp{op_id}", integer=True)


def _is_inner_index(expr) -> bool:
    return expr is not None and any(s.name.startswith("r") for s in expr.free_symbols)


def compute_stages(ops: Sequence[Op]) -> tuple[Stage, ...]:
    """Place ops in alternating outer stages / inner loops (see Note [Kernel description])."""
    level: dict[int, tuple[bool, int]] = {}  # id -> (inner, k)
    for op in ops:
        inner = _is_inner_index(op.index)
        k = 0
        for a in op.args + ((op.mask,) if op.mask is not None else ()):
            a_inner, a_k = level[a]
            inner |= a_inner
            k = max(k, a_k)
        if op.kind == "reduce":
            inner, k = False, k + 1  # accumulated in loop k, available in the outer stage k + 1
        level[op.id] = (inner, k)
    n_loops = max([k + 1 for inner, k in level.values() if inner] +
                  [level[o.id][1] for o in ops if o.kind == "reduce"] + [0])
    if n_loops == 0:
        return (Stage(False, tuple(o.id for o in ops)),)
    by_id = {o.id: o for o in ops}
    stages = []
    for k in range(n_loops + 1):
        outer = tuple(o.id for o in ops if level[o.id] == (False, k))
        if outer:
            stages.append(Stage(False, outer))
        if k == n_loops:
            break
        reduces = tuple(o.id for o in ops if o.kind == "reduce" and level[o.id][1] == k + 1)
        needed: set[int] = set()
        stack = [o.id for o in ops if level[o.id] == (True, k)]
        stack += [a for r in reduces for a in by_id[r].args]
        while stack:
            i = stack.pop()
            if i in needed or not level[i][0]:
                continue
            needed.add(i)
            stack.extend(by_id[i].args)
            if by_id[i].mask is not None:
                stack.append(by_id[i].mask)
        stages.append(Stage(True, tuple(o.id for o in ops if o.id in needed), reduces))
    return tuple(stages)


def format_kernel(k: KernelSpec) -> str:
    """A readable dump of a kernel description (golden tests, traces)."""
    lines = [f"kernel {k.name}: ranges={list(k.ranges)} reduction_ranges={list(k.reduction_ranges)}"
             + (f" sizes={list(k.sizevars)}" if k.sizevars else "")]
    lines.append("  args: " + ", ".join(f"{a.name}:{str(a.dtype).removeprefix('torch.')}:{a.role}"
                                        for a in k.args))
    for op in k.ops:
        args = ", ".join(f"tmp{a}" for a in op.args)
        dt = str(op.dtype).removeprefix("torch.") if op.dtype is not None else "-"
        idx = f" [{op.index}]" if op.index is not None else ""
        idx += f" mask=tmp{op.mask}" if op.mask is not None else ""
        tgt = op.target if not isinstance(op.target, str) else op.target
        lines.append(f"  {op.name} = {op.kind} {tgt}{idx}({args}) : {dt}")
    return "\n".join(lines)
