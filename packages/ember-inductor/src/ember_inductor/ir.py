"""The loop-level IR: tensors as index functions over iteration spaces.

Note [Index functions]
    Every lowered value is an `IRNode` with static `sizes`. Reading it at a multi-index emits ops
    into a `KernelBuilder` and returns the value's op id. A `Buffer` reads memory; a `Pointwise`
    computes from its inputs at the same index; a `View` remaps the index and reads its base (a
    view is never a copy). A `Reduction` is always realized into a `ComputedBuffer` first.

    `KernelBuilder.value` memoizes (node, index) -> op id and `KernelBuilder.add` hash-conses
    ops, so a producer read twice at one index is evaluated once per kernel: building a kernel
    costs time linear in the graph (see ARCHITECTURE.md, "Known pitfalls": simple_fn).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import sympy
import torch

from ember_inductor.kernel import Op
from ember_inductor.sizes import as_size, is_static

Index = tuple  # of sympy expressions, one per dim


def contiguous_strides(sizes: Sequence) -> tuple:
    """Row-major strides; symbolic sizes give expressions (Note [symbolic sizes in the inductor])."""
    strides, acc = [], 1
    for s in reversed(list(sizes)):
        strides.append(acc)
        acc = acc * (max(int(s), 1) if is_static(s) else s)
    return tuple(as_size(st) for st in reversed(strides))


def numel(sizes: Sequence):
    """The number of elements: an int, or an expression when a size is symbolic."""
    n = 1
    for s in sizes:
        n = n * (int(s) if is_static(s) else s)
    return n if isinstance(n, int) else as_size(n)


def indirect_ids(expr) -> tuple[int, ...]:
    """Ids of the kernel values an index expression reads (symbols named tmp<id>)."""
    return tuple(sorted(int(s.name[3:]) for s in expr.free_symbols if s.name.startswith("tmp")))


class FusionConflict(Exception):
    """A node read a buffer of its own kernel at another index than the one stored."""


class KernelBuilder:
    """Builds one kernel's op DAG: CSE'd ops, memoized node reads, an undo log for fusion trials."""

    def __init__(self):
        self.ops: list[Op] = []
        self._cse: dict[tuple, int] = {}
        self._memo: dict[tuple, int] = {}
        self.stored: dict[str, tuple[sympy.Expr, int]] = {}  # buffer -> (index, value id)
        self.loaded: dict[str, torch.dtype] = {}             # buffers read from memory
        self._log: list[tuple] = []
        self.keep_alive: list = []  # nodes whose id() keys the memo
        self.mask: int | None = None  # while set, every load is masked by this bool value

    # -- trials: fusion tries a node and rolls back on conflict --------------------------------
    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        while len(self._log) > mark:
            kind, key = self._log.pop()
            if kind == "op":
                self.ops.pop()
                del self._cse[key]
            elif kind == "memo":
                del self._memo[key]
            elif kind == "store":
                del self.stored[key]
            elif kind == "load":
                del self.loaded[key]

    # -- ops -----------------------------------------------------------------------------------
    def add(self, kind: str, target, args: Sequence[int], dtype, index=None, mask=None) -> int:
        # -0.0 == 0.0 and both hash alike: a float const's key carries its sign, else the two
        # share one value (full_like(a, -0.0) + a * 0 computed a * -0.0: wrong signed zeros)
        key_target = (target, math.copysign(1.0, target)) if isinstance(target, float) else target
        key = (kind, key_target, tuple(args), dtype, index, mask)
        found = self._cse.get(key)
        if found is not None:
            return found
        op = Op(len(self.ops), kind, target, tuple(args), dtype, index, mask)
        self.ops.append(op)
        self._cse[key] = op.id
        self._log.append(("op", key))
        return op.id

    def value(self, node: "IRNode", index: Index) -> int:
        key = (id(node), index, self.mask)
        found = self._memo.get(key)
        if found is None:
            found = node.compute(self, index)
            self._memo[key] = found
            self._log.append(("memo", key))
            self.keep_alive.append(node)
        return found

    def load(self, name: str, index, dtype, mask: int | None = None) -> int:
        index = sympy.sympify(index)
        if name in self.stored:
            stored_index, value = self.stored[name]
            if stored_index != index:
                raise FusionConflict(name)
            return value
        mask = self.mask if mask is None else mask
        if name not in self.loaded:
            self.loaded[name] = dtype
            self._log.append(("load", name))
        return self.add("load", name, indirect_ids(index), dtype, index, mask)

    def store(self, name: str, index, value: int) -> int:
        index = sympy.sympify(index)
        if name in self.loaded:  # read before written in this kernel: order would break
            raise FusionConflict(name)
        self.stored[name] = (index, value)
        self._log.append(("store", name))
        return self.add("store", name, (value,), None, index)

    @contextlib.contextmanager
    def masked(self, mask: int):
        """Loads emitted inside are masked (cat, pad): masked-off lanes read 0."""
        outer = self.mask
        if outer is not None:
            mask = self.pointwise("logical_and", (outer, mask), torch.bool)
        self.mask = mask
        try:
            yield
        finally:
            self.mask = outer

    def const(self, value, dtype) -> int:
        return self.add("const", value, (), dtype)

    def index_value(self, expr) -> int:
        expr = sympy.sympify(expr)
        return self.add("index", None, indirect_ids(expr), torch.int64, expr)

    def pointwise(self, prim: str, args: Sequence[int], dtype) -> int:
        return self.add("pointwise", prim, args, dtype)

    def convert(self, value: int, dtype) -> int:
        if self.ops[value].dtype == dtype:
            return value
        return self.add("convert", None, (value,), dtype)


# ---------------------------------------------------------------------------------------------
# IR nodes
# ---------------------------------------------------------------------------------------------

class IRNode:
    sizes: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    def load(self, kb: KernelBuilder, index: Index) -> int:
        return kb.value(self, tuple(sympy.sympify(i) for i in index))

    def compute(self, kb: KernelBuilder, index: Index) -> int:
        raise NotImplementedError(type(self).__name__)


@dataclass(eq=False)
class Buffer(IRNode):
    """Memory, read at `offset + sum(index * strides)` (elements)."""
    name: str
    sizes: tuple
    strides: tuple
    dtype: torch.dtype
    device: torch.device
    offset: int = 0
    is_view: bool = False  # a strided view of the buffer `name` (views.strided)

    def compute(self, kb, index):
        return kb.load(self.name, self.offset_of(index), self.dtype)

    def offset_of(self, index):
        return self.offset + sum((i * s for i, s in zip(index, self.strides) if s), sympy.Integer(0))

    @property
    def layout(self) -> tuple:
        return (self.sizes, self.strides, self.offset)


@dataclass(eq=False)
class InputBuffer(Buffer):
    position: int = 0

    @property
    def is_symbolic(self) -> bool:
        """Whether a size or stride is an expression over size symbols (sizes.py)."""
        return not all(is_static(v) for v in (*self.sizes, *self.strides))


@dataclass(eq=False)
class ConstantBuffer(Buffer):
    """A tensor held by the graph module (a get_attr node): the wrapper binds it by name."""
    value: object = None


@dataclass(eq=False)
class ExternBuffer(Buffer):
    """The output of an op called eagerly from the wrapper (mm, conv, an unknown prim, ...)."""
    call: "ExternCall" = None
    item: int | None = None  # which output of a multi-output extern


@dataclass(eq=False)
class ExternCall:
    name: str                  # wrapper-level name of the call's result
    op: object                 # the OpOverload (or callable) to call
    args: tuple                # with Buffers in place of tensors
    kwargs: dict
    origin: str                # graph node name
    outputs: list = field(default_factory=list)  # ExternBuffers
    reason: str = ""
    fit: bool = True           # the wrapper checks its results' layout (LayoutPlan.fits_result)
    in_place: bool = False     # its first operand is written and returned (planner.py, Note [an extern's operand written in place])


@dataclass(eq=False)
class Pointwise(IRNode):
    sizes: tuple
    dtype: torch.dtype
    device: torch.device
    fn: Callable  # (kb, index) -> op id
    origin: str = ""

    def compute(self, kb, index):
        return self.fn(kb, index)


@dataclass(eq=False)
class Reduction(IRNode):
    """reduce_type over `dims` of an input of `input_sizes`; sizes are the kept dims."""
    sizes: tuple
    dtype: torch.dtype
    device: torch.device
    input_sizes: tuple
    dims: tuple
    reduce_type: str
    fn: Callable  # (kb, full input index) -> value id, or (value id, position id) for arg-reductions
    origin: str = ""


@dataclass(eq=False)
class View(IRNode):
    base: IRNode
    sizes: tuple
    reindex: Callable  # output index -> base index
    origin: str = ""
    permutation: tuple | None = None  # set when the view only permutes the base's dimensions

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def device(self):
        return self.base.device

    def compute(self, kb, index):
        return self.base.load(kb, tuple(self.reindex(index)))


@dataclass(eq=False)
class ComputedBuffer(Buffer):
    """A realized Pointwise or Reduction: one kernel writes it (contiguous)."""
    body: IRNode = None
    origins: tuple = ()

    @property
    def group_key(self) -> tuple:
        b = self.body
        if isinstance(b, Reduction):
            return ("reduction", b.input_sizes, b.dims)
        return ("pointwise", self.sizes)
