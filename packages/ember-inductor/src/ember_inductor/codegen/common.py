"""The renderer interface: what a code generation backend is, and the registry of backends.

Each backend receives one `KernelSpec` per fused kernel (Note [Kernel description] in
kernel.py) and returns `KernelSource` objects from `render` and, from `build`, one launcher per
kernel: `launcher(*tensors)` with tensors in `KernelSpec.args` order. A new backend is one
module defining a `Backend` subclass plus one line in `BACKENDS` below. What every backend
computes the same way about a kernel (its accumulator dtypes, whether it is a column
reduction) is in kernel_analysis.py; index arithmetic is in indexing.py.
"""
from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Mapping, Sequence

import sympy
import torch

import ember_prims
from ember_inductor.indexing import FloorDiv, ModIndex
from ember_inductor.kernel import KernelSpec
# Moved to kernel.py and indexing.py (issue 14): still importable from here for code written
# against the old module.
from ember_inductor.kernel import (  # noqa: F401,E402
    OP_KINDS, KernelArg, Op, Stage, compute_stages, format_kernel, range_var, reduction_var, value_symbol)

@dataclass(frozen=True)
class KernelSource:
    name: str
    backend: str
    source: str                    # the text that is built (and hashed for the cache)
    kernel: KernelSpec
    meta: dict = field(default_factory=dict, compare=False)  # backend specifics (grid, ...)


# Note [prims and backends]
#     The lowered prims of three ember_prims categories become ops named by the prim, which each
#     Backend renders from a table keyed by prim name: elementwise prims are "pointwise" ops
#     (`table`), reductions "reduce" ops (`reductions`), random prims "rand" ops (`random`).
#     The other categories (casts, views, indexing, creation) lower to loads, stores, index
#     arithmetic, constants and "convert" ops, which every backend renders by kind.
#     tests/test_prim_coverage.py checks every prim of ember_prims.PRIMS against these tables.
PRIM_TABLES = {ember_prims.UNARY: "table", ember_prims.BINARY: "table", ember_prims.TERNARY: "table",
               ember_prims.REDUCTION: "reductions", ember_prims.RANDOM: "random"}


class Backend(abc.ABC):
    """A code generator: renders KernelSpecs and builds launchers. What it can render is its
    tables, keyed by prim name (Note [prims and backends]; tests/test_prim_coverage.py checks
    them against ember_prims.PRIMS); what every backend computes alike about a kernel is in
    kernel_analysis.py, not here."""

    name: ClassVar[str]
    device_types: ClassVar[tuple[str, ...]]  # the tensors its kernels address (compile_graph checks)
    # The tables keyed by prim name, one per op kind that names a prim (see PRIM_TABLES):
    # pointwise prim -> format function(*operand_strings, ...) -> expression string
    table: ClassVar[Mapping[str, Callable[..., str]]]
    reductions: ClassVar[Mapping[str, object]]  # reduction prim -> how it is rendered
    random: ClassVar[Mapping[str, object]]  # random prim -> how it is rendered

    @abc.abstractmethod
    def render(self, kernel: KernelSpec, options) -> KernelSource:
        """Kernel description -> source text (no compilation here)."""

    @abc.abstractmethod
    def build(self, sources: Sequence[KernelSource], options) -> list[Callable[..., None]]:
        """Compile (in parallel, cached on disk under options.cache_dir) and load.

        Returns one launcher per source: `launcher(*tensors)`, tensors in kernel.args order.
        Raises `BuildError` with the compiler's output when compilation fails.
        """

    def combinable(self, source: KernelSource) -> bool:
        """Whether this rendered kernel may share one launch with other independent kernels of
        its backend (Note [horizontal fusion] in horizontal.py): by default, never."""
        return False

    def render_combo(self, name: str, parts: Sequence[KernelSource]) -> KernelSource:
        """One kernel launching every part (each `combinable`, all independent of each other)."""
        raise NotImplementedError(f"the {self.name} backend does not combine kernels")


class BuildError(RuntimeError):
    """A kernel failed to build; the message holds the compiler's output."""


# name -> "module:Class" (imported on first use, so a missing triton never breaks the CPU path)
BACKENDS: dict[str, str] = {
    "cpp": "ember_inductor.codegen.cpp:CppBackend",
    "triton": "ember_inductor.codegen.triton:TritonBackend",
}
_INSTANCES: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    if name not in _INSTANCES:
        if name not in BACKENDS:
            raise ValueError(f"unknown backend {name!r}; known: {sorted(BACKENDS)}")
        module, cls = BACKENDS[name].split(":")
        _INSTANCES[name] = getattr(importlib.import_module(module), cls)()
    return _INSTANCES[name]


def choose_backend(requested: str, device: torch.device) -> str:
    """'auto' -> triton for CUDA tensors, cpp for CPU tensors."""
    if requested != "auto":
        return requested
    return "triton" if device.type == "cuda" else "cpp"


class IndexPrinter:
    """Prints index expressions as C-like integer arithmetic; backends override the hooks."""

    floordiv = "({a} / {b})"
    mod = "({a} % {b})"

    def __call__(self, expr) -> str:
        return self.print(sympy.sympify(expr))

    def print(self, e) -> str:
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            return e.name
        if isinstance(e, FloorDiv):
            return self.floordiv.format(a=self.print(e.args[0]), b=self.print(e.args[1]))
        if isinstance(e, ModIndex):
            return self.mod.format(a=self.print(e.args[0]), b=self.print(e.args[1]))
        if e.is_Add:
            terms = sorted(e.args, key=lambda t: (t.is_Integer, str(t)))
            return "(" + " + ".join(self.print(t) for t in terms) + ")"
        if e.is_Mul:
            return "(" + "*".join(self.print(t) for t in e.args) + ")"
        # size arithmetic from ember_symbolic (Note [symbolic sizes in the inductor]): s0**2,
        # floor(s0/2) for s0 // 2, Mod(s0, 4); sizes are non-negative
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "(" + "*".join([self.print(e.base)] * int(e.exp)) + ")"
        if isinstance(e, (sympy.floor, sympy.ceiling)):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if isinstance(e, sympy.ceiling):
                num = num + den - 1
            return self.floordiv.format(a=self.print(sympy.expand(num)), b=self.print(den))
        if isinstance(e, sympy.Mod):
            return self.mod.format(a=self.print(e.args[0]), b=self.print(e.args[1]))
        raise NotImplementedError(f"index expression {e!r} ({type(e).__name__})")
