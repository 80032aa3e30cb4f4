"""Dynamic shapes in capture: which sizes are symbolic, and how a symbolic size enters the graph.

Note [Dynamic shapes in capture]: a trace has one ``SizeEnv`` (ember_symbolic). The policy
(``ShapePolicy``: ``dynamic=None|True|False``, ``mark_dynamic``/``mark_static``, and what the
frame saw before) decides, for each tensor input, which dimensions are symbols, and for each int
argument whether it is one. Such a tensor's placeholder holds a fake with SymInt sizes; an int
argument becomes a placeholder whose ``example_value`` is a SymInt.

Sizes read by the user's code (``x.shape[0]``, ``x.size(1)``, ``len(x)``, ``x.numel()``) are
those SymInts, kept in ``ConstVar``s: Python arithmetic on them is SymInt arithmetic (sympy
expressions over the symbols, no guard), and a use that needs a concrete value (``if``,
``range()``, a list index, a dict key, ``str()``/formatting) asks the SymInt for its value,
which records a guard in the env (ember_symbolic's Note [symbolic sizes]). Where a size is an
argument of a graph op (``x.view(n, -1)``), ``SizeNodes`` writes its expression into the graph:
each symbol is read once (``torch.ops.aten.sym_size.int(x, d)`` of the placeholder it came from,
or the int placeholder itself), and the expression is built from ``operator`` calls
(``add``, ``mul``, ``floordiv``, ``mod``, ``neg``, ``truediv``) and ``torch.sym_max`` /
``sym_min`` / ``sym_float``, every node with a SymInt ``example_value``. Values rebuilt after the
graph (a size returned, stored, or left on the stack at a graph break) are the same expression
printed as Python over the inputs (``L[0].size(0) * 2``).

Guards: a symbolic dimension is guarded as ``>= 2`` (sizes 0 and 1 are specialized), its
tensor's strides by their symbolic relation to the sizes, and the env's relations, printed as
Python over the same runtime expressions, are checked after every input's own guard.
"""
from __future__ import annotations

import dataclasses
import operator
import re
import weakref

import sympy
import torch
import torch.fx as fx

from ember_symbolic import SizeEnv, SizePrinter, expr_of, fake_with_sizes, hint_of, is_symbolic

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
SIZE_READ = torch.ops.aten.sym_size.int
# Int arguments of the frame (and items of its argument containers) may become symbols; ints read
# from attributes (a module's configuration) stay constants.
_INT_SOURCE = re.compile(r"^L\[\d+\](\[[^\[\]]+\])*$")
# Parameters and buffers keep static shapes under dynamic=True (their shapes are the model's).
_STATIC_SOURCE = re.compile(r"_parameters\[|_buffers\[")

# The attribute a backend callable sets to False when it cannot compile graphs with symbolic
# sizes: capture then keeps every graph it hands to it static (ShapePolicy.symbolic).
SYMBOLIC_SIZES_ATTR = "ember_symbolic_sizes"


def takes_symbolic_sizes(backend) -> bool:
    """Whether ``backend`` compiles graphs with symbolic sizes (True unless it says otherwise)."""
    return bool(getattr(backend, SYMBOLIC_SIZES_ATTR, True))


def mark_dynamic(t: torch.Tensor, dim) -> None:
    """Make ``t``'s dimension ``dim`` (an int or a list of them) symbolic in the next compiles
    that see ``t``, whatever the ``dynamic`` policy.

        >>> import torch
        >>> x = torch.randn(8, 3)
        >>> mark_dynamic(x, 0)
    """
    _mark(t, dim, "_ember_dynamic_dims", "_ember_static_dims")


def mark_static(t: torch.Tensor, dim) -> None:
    """Keep ``t``'s dimension ``dim`` (an int or a list of them) static (specialized), even
    under ``dynamic=True`` or after it changed between calls."""
    _mark(t, dim, "_ember_static_dims", "_ember_dynamic_dims")


def _mark(t, dim, attr: str, other: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"dimension {d!r} out of range for a tensor of {t.dim()} dimensions")
    dims = {d % t.dim() for d in dims}
    setattr(t, attr, set(getattr(t, attr, set())) | dims)
    setattr(t, other, set(getattr(t, other, set())) - dims)


@dataclasses.dataclass
class FrameShapes:
    """What a frame saw in earlier compiles (automatic dynamic, ``dynamic=None``): the sizes of
    each tensor source and the value of each int source, and which of them changed."""

    seen: dict = dataclasses.field(default_factory=dict)  # source -> sizes tuple, or int
    dynamic: dict = dataclasses.field(default_factory=dict)  # source -> dims (tensors) / {None} (ints)


class ShapePolicy:
    """Decides which sizes of one trace are symbols, and owns that trace's ``SizeEnv``."""

    def __init__(self, dynamic: bool | None, symbolic: bool, frame: FrameShapes, describe=str):
        self.dynamic = dynamic
        self.symbolic = symbolic  # False: the backend takes static graphs only
        self.frame = frame
        self.describe = describe  # source -> the user's name for it
        self.env = SizeEnv()
        self.origins: dict[sympy.Symbol, tuple[str, int | None]] = {}  # symbol -> (source, dim)
        self.became_dynamic: list[str] = []  # "x.size(0)" for dims this trace made dynamic
        self.kept_static: list[str] = []  # dims that changed, kept static for a static-only backend

    # -- tensors ----------------------------------------------------------------------------------
    def tensor_dims(self, source: str, t: torch.Tensor) -> list[int]:
        """The dimensions of the tensor input ``t`` (read from ``source``) that are symbolic."""
        sizes = tuple(t.shape)
        before = set(self.frame.dynamic.get(source, ()))
        changed = self._remember(source, sizes)
        if not self.symbolic:
            self.kept_static += [f"{self.describe(source)}.size({d})" for d in sorted(changed)]
            return []
        if t.storage_offset() != 0:  # a view into a larger storage: its fake could not say where
            return []
        marked = set(getattr(t, "_ember_dynamic_dims", ()))
        static = set(getattr(t, "_ember_static_dims", ()))
        if self.dynamic is True and not _STATIC_SOURCE.search(source):
            wanted = set(range(len(sizes)))
        else:
            wanted = before | changed | marked
        dims = sorted(d for d in wanted - static if d < len(sizes) and sizes[d] >= 2)
        self.became_dynamic += [f"{self.describe(source)}.size({d})" for d in dims if d in changed - before]
        return dims

    def fake_input(self, fake_mode, source: str, t: torch.Tensor, dims: list[int]) -> torch.Tensor:
        sizes = [self.symbol(t.shape[d], f"{source}.size({d})", (source, d)) if d in dims else t.shape[d]
                 for d in range(t.dim())]
        fake = fake_with_sizes(fake_mode, t, sizes)
        if t.requires_grad and not t.is_leaf:  # as from_tensor makes it: in-place ops stay legal
            with fake_mode:
                fake = fake.clone()
        return fake

    def _remember(self, source: str, value) -> set:
        """Record ``value`` for ``source``; the dimensions (or {None} for an int) that differ from
        what an earlier compile saw become dynamic for this frame (dynamic=None only)."""
        seen = self.frame.seen.setdefault(source, value)
        if seen == value or self.dynamic is not None:
            return set()
        if isinstance(value, tuple):
            if not isinstance(seen, tuple) or len(seen) != len(value):
                return set()
            changed = {d for d, (a, b) in enumerate(zip(seen, value)) if a != b}
        else:
            changed = {None}
        if self.symbolic:
            self.frame.dynamic.setdefault(source, set()).update(changed)
        return changed

    # -- ints -------------------------------------------------------------------------------------
    def int_is_symbolic(self, source: str, value: int) -> bool:
        """Whether the int argument ``value`` (read from ``source``) is a symbol."""
        if type(value) is not int or not _INT_SOURCE.match(source):
            return False
        before = None in self.frame.dynamic.get(source, ())
        changed = self._remember(source, value)
        if not self.symbolic or value < 2:
            return False
        if self.dynamic is True or before or changed:
            if changed and not before:
                self.became_dynamic.append(self.describe(source))
            return True
        return False

    def symbol(self, hint: int, source: str, origin) -> torch.SymInt:
        value = self.env.symint(hint, source)
        self.origins[expr_of(value)] = origin
        return value

    # -- guards -----------------------------------------------------------------------------------
    def relation_checks(self) -> list[tuple[str, str]]:
        """The env's guards, each as (Python over the inputs, readable text)."""
        names = dict(self.env.sources)
        readable = {s: self.describe(src) for s, src in self.env.sources.items()}
        code, text = SizePrinter(names), SizePrinter(readable)
        return [(code.doprint(g), text.doprint(g)) for g in self.env.guards]

    def guard_lines(self) -> list[str]:
        """Statements of the entry's guard function that check the env's relations (after every
        input's own guard): each symbol is read once into a local (``_z0 = L[0].size(0)``)."""
        if not self.env.guards:
            return []
        local = {s: f"_z{i}" for i, s in enumerate(self.env.sources)}
        reads = "; ".join(f"{local[s]} = {src}" for s, src in self.env.sources.items())
        return [reads, f"if not ({self.env.guard_code(local)}): return _MISS"]

    def dynamic_inputs(self) -> list[str]:
        """``x.size(0) (s0)`` for each symbol of this trace that no guard pins to one value."""
        pinned = self.env.specialized()
        return [f"{self.describe(source)}{'' if dim is None else f'.size({dim})'} ({s})"
                for s, (source, dim) in self.origins.items() if s not in pinned]


def tensor_guard(ns, t: torch.Tensor, fake: torch.Tensor, device_check: str) -> tuple[str, str]:
    """The guard of a tensor input with symbolic dimensions: as a static one, except that a
    symbolic size is only checked to be at least 2 and the strides by their relation to the
    sizes (a dense tensor stays dense: ``X.is_contiguous()``)."""
    sizes = fake.shape
    names = {expr_of(s): f"X.size({d})" for d, s in enumerate(sizes) if is_symbolic(s)}
    parts = [f"X.dim() == {t.dim()}"]
    for d, s in enumerate(sizes):
        parts.append(f"X.size({d}) >= 2" if is_symbolic(s) else f"X.size({d}) == {int(s)}")
    strides = fake.stride()
    if all(hint_of(s) >= 2 for s in sizes) and _is_row_major(sizes, strides):
        parts.append("X.is_contiguous()")
    else:
        printer = SizePrinter(names)
        parts.append("X.stride() == (" + "".join(f"{printer.doprint(expr_of(s))}, " for s in strides) + ")")
    check = (f"type(X) is {ns.ref(type(t))} and X.dtype is {ns.ref(t.dtype)} and {device_check} and "
             + " and ".join(parts) + f" and X.requires_grad is {t.requires_grad}")
    shown = tuple(str(s) for s in sizes)
    note = (f"{{}}: {type(t).__name__} {t.dtype} {t.device} shape=({', '.join(shown)}) (symbolic) "
            f"requires_grad={t.requires_grad}")
    return check, note


def _is_row_major(sizes, strides) -> bool:
    expected = sympy.Integer(1)
    for s, st in zip(reversed(sizes), reversed(strides)):
        if sympy.simplify(expr_of(st) - expected) != 0:
            return False
        expected = expected * expr_of(s)
    return True


# -- values -------------------------------------------------------------------------------------

def has_sym(value) -> bool:
    """Whether ``value`` is, or holds (in a tuple, list, torch.Size or slice), a symbolic size."""
    if isinstance(value, SYM_TYPES):
        return True
    if isinstance(value, (tuple, list)):
        return any(has_sym(v) for v in value)
    if isinstance(value, slice):
        return has_sym((value.start, value.stop, value.step))
    return False


def concrete(value):
    """``value`` with every symbolic size replaced by its value in this call, each replacement
    recorded as a guard (ember_symbolic's Note [symbolic sizes]): for uses that need a number."""
    if isinstance(value, torch.SymFloat) or (isinstance(value, SYM_TYPES) and _has_float(value)):
        # by the symbols' values (exact), not by the float's (a guard `0.9**s0 == 0.81` would
        # compare floats printed in decimal; `n * 0.1 < 0.3000000000000001` became `s0 >= 3.0`)
        return _by_symbols(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.Size):
        return torch.Size([concrete(v) for v in value])
    if isinstance(value, (tuple, list)) and has_sym(value):
        items = [concrete(v) for v in value]
        if type(value) in (tuple, list):
            return type(value)(items)
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    if isinstance(value, slice) and has_sym(value):
        return slice(concrete(value.start), concrete(value.stop), concrete(value.step))
    return value


def _has_float(value) -> bool:
    """Whether a symbolic value's expression holds a float constant: sympy computes and prints
    those to 15 digits, so relations and code made from it are not Python's (Note [symbolic floats])."""
    return bool(value.node.expr.atoms(sympy.Float))


def _by_symbols(value):
    """``value``'s value in this call, guarded by the values of the symbols it is made of."""
    node = value.node
    for symbol in node.expr.free_symbols:
        node.env.specialize(symbol, node.env.hints[symbol])
    return node.hint


# Note [untrusted size expressions]: a symbolic int carries its value in this call (computed by
# Python on the values) and a sympy expression (simplified by sympy). Where sympy simplifies
# wrongly, they disagree (`(2**(10*n) + m) % 1000` dropped the power: sympy 1.14's Mod), and the
# expression, rebuilt after the graph or written into it, would compute another number than
# eager. Before an expression is used, it is checked against the value; one that disagrees is
# not used: the value is, guarded by the symbols' values. So is an int made from floats
# (`math.floor(n * 0.1 * 3)`): sympy folds the float constants (`0.3*s0`) in another order than
# eager rounds them, so it may agree on this call's sizes and not on the next call's.
def _agrees(value) -> bool:
    node = value.node
    hints = node.env.hints
    try:
        got = node.expr.xreplace({s: sympy.Integer(hints[s]) for s in node.expr.free_symbols})
        return bool(got == node.hint)
    except Exception:  # noqa: BLE001 - an expression that does not evaluate is not trusted
        return False


# Note [symbolic floats]: eager rounds each step of float arithmetic on sizes (`n / 3 * 2`,
# `k / 0.7`, `n / 7 - n / 11`), where sympy folds the steps into one exact rational printed with
# 15-digit constants (2.16666666666667 for 2.166666666666667). Inside the graph a float of sizes
# only scales tensors, and stays symbolic (an LR schedule's `0.9 ** step`: one graph for every
# step). As a Python value rebuilt outside the graph (returned, stored), it must be eager's float
# exactly: one true division of ints (`n / 3`, `a / b`, `float(n)`), which Python rounds once,
# is computed from the inputs as numerator / denominator; any other is this call's value, its
# symbols guarded (`concrete`): a recompile for other sizes.
_ROUNDED_ONCE = (operator.truediv, operator.itruediv, torch.sym_float)
_ONE_ROUNDING: "weakref.WeakSet" = weakref.WeakSet()  # SymNodes of the floats rounded once


def note_float(fn, result, operands):
    """``result`` of ``fn(*operands)``, remembered when it is a float rounded once (Note
    [symbolic floats])."""
    if isinstance(result, torch.SymFloat):
        exact = fn in _ROUNDED_ONCE and not any(isinstance(v, (float, torch.SymFloat)) for v in operands)
        if exact or (fn in (operator.neg, operator.pos, operator.abs) and operands[0].node in _ONE_ROUNDING):
            _ONE_ROUNDING.add(result.node)
    return result


def python_code(value, names: dict, size_class: str = "__Size") -> str:
    """Python that computes ``value`` (a symbolic size, or a container of them) from the inputs;
    ``names`` maps each symbol to the runtime expression it was read from, ``size_class`` names
    torch.Size in the generated code."""
    if isinstance(value, SYM_TYPES):
        expr, node = expr_of(value), value.node
        printer = SizePrinter(names)
        if node.pytype is float:  # Note [symbolic floats]
            if node not in _ONE_ROUNDING or expr.atoms(sympy.Float):
                return repr(concrete(value))
            # as eager divided: sympy keeps n / -3 as -1/3 * n, a product that rounds differently
            numerator, denominator = sympy.fraction(sympy.together(expr))
            return f"(({printer.doprint(numerator)}) / ({printer.doprint(denominator)}))"
        if (node.pytype is int and not _agrees(value)) or expr.atoms(sympy.Float):  # Note [untrusted size expressions]
            return repr(_by_symbols(value))
        text = printer.doprint(expr)
        if node.pytype is int and expr_of(value).atoms(sympy.Float, sympy.Rational) - expr_of(value).atoms(sympy.Integer):
            return f"int({text})"
        return f"({text})"
    if isinstance(value, torch.Size):
        return f"{size_class}(({''.join(python_code(v, names) + ', ' for v in value)}))"
    if isinstance(value, tuple) and type(value) is tuple:
        return "(" + "".join(python_code(v, names, size_class) + ", " for v in value) + ")"
    if isinstance(value, list) and type(value) is list:
        return "[" + "".join(python_code(v, names, size_class) + ", " for v in value) + "]"
    if isinstance(value, slice):
        parts = (value.start, value.stop, value.step)
        return "slice(" + ", ".join(python_code(v, names, size_class) for v in parts) + ")"
    if value is None or type(value) in (int, float, bool):
        return repr(value)
    raise ValueError(f"a {type(value).__name__} holding symbolic sizes cannot be rebuilt")


# -- sizes as graph nodes ------------------------------------------------------------------------

class CannotMaterialize(Exception):
    pass


class SizeNodes:
    """Writes symbolic sizes into the graph as int-valued nodes (Note [Dynamic shapes in
    capture]); each expression is written once per trace."""

    def __init__(self, graph: fx.Graph, policy: ShapePolicy, annotate):
        self.graph = graph
        self.policy = policy
        self.annotate = annotate  # (node, example value) -> None: meta of the OutputGraph
        self.placeholders: dict[str, fx.Node] = {}  # source -> placeholder
        self.cache: dict = {}

    def arg(self, value):
        """The FX argument for ``value``: a node for a symbolic size, the value otherwise."""
        if isinstance(value, SYM_TYPES):
            if not is_symbolic(value):
                return hint_of(value)
            if isinstance(value, torch.SymBool):
                return concrete(value)
            if value.node.pytype is int and (_has_float(value) or not _agrees(value)):  # Note [untrusted size expressions]
                return _by_symbols(value)
            try:
                return self._node(expr_of(value), value.node.pytype)
            except CannotMaterialize:
                return concrete(value)
        if isinstance(value, (tuple, list)) and has_sym(value):  # torch.Size, a shape list
            items = [self.arg(v) for v in value]
            return list(items) if isinstance(value, list) else tuple(items)
        if isinstance(value, slice) and has_sym(value):
            return slice(self.arg(value.start), self.arg(value.stop), self.arg(value.step))
        return value

    def _node(self, expr, pytype: type):
        key = (expr, pytype)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._build(expr, pytype)
        return hit

    def _call(self, fn, args, expr, pytype):
        node = self.graph.call_function(fn, tuple(args))
        self.annotate(node, self.policy.env.wrap(expr, pytype))
        return node

    def _build(self, expr, pytype):
        if expr.is_Integer:
            return int(expr)
        if expr.is_Float:
            return float(expr)
        if pytype is float and not expr.atoms(sympy.Float):
            numerator, denominator = sympy.fraction(sympy.together(expr))
            num = self._node(numerator, int)
            if denominator == 1:
                return self._call(torch.sym_float, [num], expr, float)
            return self._call(operator.truediv, [num, self._node(denominator, int)], expr, float)
        if isinstance(expr, sympy.Symbol):
            return self._symbol(expr)
        rule = _BUILD.get(type(expr))
        if rule is None:
            raise CannotMaterialize(str(expr))
        return rule(self, expr, pytype)

    def _symbol(self, symbol):
        origin = self.policy.origins.get(symbol)
        if origin is None:
            raise CannotMaterialize(str(symbol))
        source, dim = origin
        ph = self.placeholders[source]
        if dim is None:
            return ph
        node = self.graph.call_function(SIZE_READ, (ph, dim))
        self.annotate(node, self.policy.env.wrap(symbol, int))
        return node

    def _fold(self, fn, args, expr, pytype):
        nodes = [self._node(a, pytype) for a in args]  # a float's terms are floats (s0/100 is no floordiv)
        out = nodes[0]
        for i, n in enumerate(nodes[1:], 1):
            partial = expr.func(*args[:i + 1]) if i + 1 < len(args) else expr
            out = self._call(fn, [out, n], partial, pytype)
        return out


def _add(self: SizeNodes, expr, pytype):
    return self._fold(operator.add, list(expr.args), expr, pytype)


def _mul(self: SizeNodes, expr, pytype):
    if any(a.is_Rational and not a.is_Integer for a in expr.args):
        if pytype is not int:
            raise CannotMaterialize(str(expr))
        numerator, denominator = sympy.fraction(sympy.together(expr))
        return self._call(operator.floordiv, [self._node(numerator, int), self._node(denominator, int)], expr, int)
    return self._fold(operator.mul, list(expr.args), expr, pytype)


def _pow(self: SizeNodes, expr, pytype):
    base, exponent = expr.args
    if exponent.is_Integer and exponent > 0:
        return self._call(operator.pow, [self._node(base, pytype), int(exponent)], expr, pytype)
    if pytype is float and exponent.free_symbols and not exponent.atoms(sympy.Float):  # 0.9 ** step
        return self._call(operator.pow, [self._node(base, float), self._node(exponent, int)], expr, float)
    raise CannotMaterialize(str(expr))


def _fraction(expr):
    """(numerator, denominator) of a rounding's argument, both integer polynomials."""
    numerator, denominator = sympy.fraction(sympy.together(expr))
    if numerator.atoms(sympy.Float) or denominator.atoms(sympy.Float):
        raise CannotMaterialize(str(expr))
    return numerator, denominator


def _floor(self: SizeNodes, expr, pytype):
    numerator, denominator = _fraction(expr.args[0])
    if denominator == 1:
        return self._node(numerator, int)
    return self._call(operator.floordiv, [self._node(numerator, int), self._node(denominator, int)], expr, int)


def _ceiling(self: SizeNodes, expr, pytype):  # ceil(a / b) == -((-a) // b)
    numerator, denominator = _fraction(expr.args[0])
    if denominator == 1:
        return self._node(numerator, int)
    quotient = _floor(self, sympy.floor(-numerator / denominator), int)
    return self._call(operator.neg, [quotient], expr, int)


def _mod(self: SizeNodes, expr, pytype):
    a, b = expr.args
    return self._call(operator.mod, [self._node(a, pytype), self._node(b, pytype)], expr, pytype)


_BUILD = {
    sympy.Add: _add,
    sympy.Mul: _mul,
    sympy.Pow: _pow,
    sympy.floor: _floor,
    sympy.ceiling: _ceiling,
    sympy.Mod: _mod,
    sympy.Max: lambda self, expr, pytype: self._fold(torch.sym_max, list(expr.args), expr, pytype),
    sympy.Min: lambda self, expr, pytype: self._fold(torch.sym_min, list(expr.args), expr, pytype),
}
