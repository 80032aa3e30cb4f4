"""SymNode: the object inside a ``torch.SymInt`` / ``SymFloat`` / ``SymBool`` that ember creates.

torch's C++ side calls a SymInt's node by method name (``add``, ``mul``, ``eq``, ``guard_int``,
``is_contiguous``, ...): this class answers that protocol with sympy. Each node is an expression
(``expr``), its Python type (``pytype``), its value in the call being compiled (``hint``) and the
environment that owns its symbols (``env``). Decisions on a node (``guard_bool``, ``guard_int``,
``expect_true``, ``guard_size_oblivious``) return the hint's answer and record a guard in the
environment (Note [symbolic sizes] in env.py). The node has no ``shape_env`` attribute: torch's
helpers then take their path for nodes of other systems (they call ``guard_bool``).
"""
from __future__ import annotations

import math
import operator

import sympy
import torch

_WRAPPERS = {int: torch.SymInt, float: torch.SymFloat, bool: torch.SymBool}


def _floordiv(a, b):
    return sympy.floor(a / b)


def _truediv(a, b):
    return a / b


def _python_floordiv(a, b):
    return a // b


# Binary operations: name -> (sympy function, Python function on hints, result type or None for
# "the operands' type" (float if either is float)).
_BINARY = {
    "add": (operator.add, operator.add, None),
    "sub": (operator.sub, operator.sub, None),
    "mul": (operator.mul, operator.mul, None),
    "mod": (sympy.Mod, operator.mod, None),
    "int_floordiv": (_floordiv, _python_floordiv, int),
    "floordiv": (_floordiv, _python_floordiv, None),
    "truediv": (_truediv, operator.truediv, float),
    "int_truediv": (_truediv, operator.truediv, float),
    "float_truediv": (_truediv, operator.truediv, float),
    "pow": (operator.pow, operator.pow, None),
    "pow_by_natural": (operator.pow, operator.pow, int),
    "float_pow": (operator.pow, operator.pow, float),
    "sym_max": (sympy.Max, max, None),
    "sym_min": (sympy.Min, min, None),
    "eq": (sympy.Eq, operator.eq, bool),
    "ne": (sympy.Ne, operator.ne, bool),
    "lt": (sympy.Lt, operator.lt, bool),
    "le": (sympy.Le, operator.le, bool),
    "gt": (sympy.Gt, operator.gt, bool),
    "ge": (sympy.Ge, operator.ge, bool),
    "and_": (sympy.And, lambda a, b: a and b, bool),
    "or_": (sympy.Or, lambda a, b: a or b, bool),
    "lshift": (lambda a, b: a * 2 ** b, operator.lshift, int),
    "rshift": (lambda a, b: sympy.floor(a / 2 ** b), operator.rshift, int),
}

# Unary operations: name -> (sympy function, Python function on hints, result type or None).
_UNARY = {
    "neg": (operator.neg, operator.neg, None),
    "pos": (lambda a: a, lambda a: a, None),
    "abs": (sympy.Abs, abs, None),
    "sym_not": (sympy.Not, operator.not_, bool),
    "ceil": (sympy.ceiling, math.ceil, int),
    "floor": (sympy.floor, math.floor, int),
    "trunc": (lambda a: sympy.sign(a) * sympy.floor(sympy.Abs(a)), math.trunc, int),
    "sym_float": (lambda a: a, float, float),
    "sym_int": (lambda a: sympy.sign(a) * sympy.floor(sympy.Abs(a)), int, int),
    "sym_sqrt": (sympy.sqrt, math.sqrt, float),
    "sym_log2": (lambda a: sympy.log(a, 2), math.log2, float),
    "sym_cos": (sympy.cos, math.cos, float),
    "sym_sin": (sympy.sin, math.sin, float),
    "sym_tan": (sympy.tan, math.tan, float),
    "sym_cosh": (sympy.cosh, math.cosh, float),
    "sym_sinh": (sympy.sinh, math.sinh, float),
    "sym_tanh": (sympy.tanh, math.tanh, float),
    "sym_acos": (sympy.acos, math.acos, float),
    "sym_asin": (sympy.asin, math.asin, float),
    "sym_atan": (sympy.atan, math.atan, float),
}


class SymNode:
    """A sympy expression with its hint, owned by a SizeEnv; see the module docstring."""

    def __init__(self, env, expr: sympy.Basic, pytype: type, hint) -> None:
        self.env = env
        self._expr = expr
        self.pytype = pytype
        self.hint = pytype(hint)
        self._hint = self.hint  # read by torch's helpers to disprove statically-known facts

    @property
    def expr(self) -> sympy.Basic:
        """The expression, with the environment's replaced symbols substituted (Note [replacements])."""
        return self.env.simplify(self._expr)

    def wrapped(self):
        """This node as the torch value users and meta kernels hold (SymInt, SymFloat, SymBool)."""
        if not self.expr.free_symbols:
            return self.hint
        return _WRAPPERS[self.pytype](self)

    def _make(self, expr, pytype: type, hint) -> "SymNode":
        return SymNode(self.env, expr, pytype, hint)

    # -- kind --------------------------------------------------------------------------------------
    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def nested_int(self):
        return None

    def is_symbolic(self) -> bool:
        return bool(self.expr.free_symbols)

    def is_constant(self) -> bool:
        return not self.expr.free_symbols

    def has_hint(self) -> bool:
        return True

    def require_hint(self, fallback=None):
        return self.hint

    def maybe_as_int(self):
        return int(self.expr) if self.pytype is int and not self.expr.free_symbols else None

    def maybe_as_float(self):
        return float(self.expr) if self.pytype is float and not self.expr.free_symbols else None

    def maybe_as_bool(self):
        return bool(self.expr) if self.pytype is bool and not self.expr.free_symbols else None

    def constant_int(self):
        return self.maybe_as_int()

    def constant_bool(self):
        return self.maybe_as_bool()

    # -- constants ---------------------------------------------------------------------------------
    def wrap_int(self, value: int) -> "SymNode":
        return self._make(sympy.Integer(value), int, value)

    def wrap_float(self, value: float) -> "SymNode":
        return self._make(sympy.Float(value), float, value)

    def wrap_bool(self, value: bool) -> "SymNode":
        return self._make(sympy.true if value else sympy.false, bool, value)

    def clone(self) -> "SymNode":
        return self

    # -- decisions (Note [symbolic sizes]) ---------------------------------------------------------
    def guard_bool(self, file: str = "", line: int = 0) -> bool:
        outcome = bool(self.hint)
        self.env.record(self.expr if self.pytype is bool else sympy.Ne(self.expr, 0), outcome)
        return outcome

    def guard_int(self, file: str = "", line: int = 0) -> int:
        if self.expr.free_symbols:
            self.env.specialize(self.expr, int(self.hint))
        return int(self.hint)

    def guard_float(self, file: str = "", line: int = 0) -> float:
        if self.expr.free_symbols:
            self.env.specialize(self.expr, self.hint)
        return float(self.hint)

    expect_true = guard_bool
    guard_size_oblivious = guard_bool
    guard_or_false = guard_bool
    guard_or_true = guard_bool

    def statically_known_true(self, file: str = "", line: int = 0) -> bool:
        return self.env.static_truth(self.expr) is True

    def expect_size(self, file: str = "", line: int = 0) -> bool:
        return self.ge(self.wrap_int(0)).expect_true(file, line)

    def bool_(self) -> bool:
        return self.guard_bool()

    def int_(self) -> int:
        return self.guard_int()

    # -- printing ----------------------------------------------------------------------------------
    def str(self) -> str:  # noqa: A003 (the protocol's name)
        return str(self.expr)

    def _graph_repr(self) -> str:
        return str(self.expr)

    def __str__(self) -> str:
        return str(self.expr)

    def __repr__(self) -> str:
        return f"SymNode({self.expr}, hint={self.hint})"

    # -- several operands --------------------------------------------------------------------------
    def sym_ite(self, then_node: "SymNode", else_node: "SymNode") -> "SymNode":
        chosen = then_node if self.guard_bool() else else_node
        return chosen

    def sym_sum(self, args) -> "SymNode":
        expr = sum((a.expr for a in args), sympy.Integer(0))
        hint = sum(a.hint for a in args)
        return self._make(expr, float if any(a.pytype is float for a in args) else int, hint)

    # -- sizes and strides: decided on the hints, each decision a guard ----------------------------
    def _nodes(self, values) -> list["SymNode"]:
        return [v if isinstance(v, SymNode) else self.wrap_int(int(v)) for v in values]

    def _strides_match(self, sizes, strides, order) -> bool:
        expected = self.wrap_int(1)
        for dim in order:
            size, stride = sizes[dim], strides[dim]
            if size.eq(self.wrap_int(1)).guard_bool():
                continue
            if not stride.eq(expected).guard_bool():
                return False
            expected = expected.mul(size)
        return True

    def is_contiguous(self, sizes, strides) -> "SymNode":
        sizes, strides = self._nodes(sizes), self._nodes(strides)
        if any(s.eq(self.wrap_int(0)).guard_bool() for s in sizes):
            return self.wrap_bool(True)
        return self.wrap_bool(self._strides_match(sizes, strides, range(len(sizes) - 1, -1, -1)))

    def _channels_last(self, sizes, strides, rank: int) -> "SymNode":
        sizes, strides = self._nodes(sizes), self._nodes(strides)
        if len(sizes) != rank:
            return self.wrap_bool(False)
        order = [1] + list(range(rank - 1, 1, -1)) + [0]
        return self.wrap_bool(self._strides_match(sizes, strides, order))

    def is_channels_last_contiguous_2d(self, sizes, strides) -> "SymNode":
        return self._channels_last(sizes, strides, 4)

    def is_channels_last_contiguous_3d(self, sizes, strides) -> "SymNode":
        return self._channels_last(sizes, strides, 5)

    def is_channels_last_strides_2d(self, sizes, strides) -> "SymNode":
        return self._channels_last(sizes, strides, 4)

    def is_channels_last_strides_3d(self, sizes, strides) -> "SymNode":
        return self._channels_last(sizes, strides, 5)

    def is_non_overlapping_and_dense_indicator(self, sizes, strides) -> "SymNode":
        sizes, strides = self._nodes(sizes), self._nodes(strides)
        if any(s.eq(self.wrap_int(0)).guard_bool() for s in sizes):
            return self.wrap_int(1)
        order = sorted(range(len(sizes)), key=lambda d: (int(strides[d].hint), int(sizes[d].hint)))
        return self.wrap_int(1 if self._strides_match(sizes, strides, order) else 0)

    def is_non_overlapping_and_dense(self, sizes, strides) -> "SymNode":
        return self.is_non_overlapping_and_dense_indicator(sizes, strides).eq(self.wrap_int(1))


def _binary(name: str, sym_fn, py_fn, result: type | None):
    def method(self: SymNode, other: SymNode) -> SymNode:
        if not isinstance(other, SymNode):
            other = self.wrap_float(other) if isinstance(other, float) else self.wrap_int(int(other))
        pytype = result or (float if float in (self.pytype, other.pytype) else int)
        hint = py_fn(self.hint, other.hint)  # first: Python's own error (`n % 0`), not sympy's
        return self._make(sym_fn(self.expr, other.expr), pytype, hint)
    method.__name__ = name
    return method


def _unary(name: str, sym_fn, py_fn, result: type | None):
    def method(self: SymNode) -> SymNode:
        return self._make(sym_fn(self.expr), result or self.pytype, py_fn(self.hint))
    method.__name__ = name
    return method


for _name, (_sym, _py, _result) in _BINARY.items():
    setattr(SymNode, _name, _binary(_name, _sym, _py, _result))
for _name, (_sym, _py, _result) in _UNARY.items():
    setattr(SymNode, _name, _unary(_name, _sym, _py, _result))


def _round(self: SymNode, ndigits=None) -> SymNode:
    # Python rounds halves to even: no sympy function says that, so rounding specializes.
    value = round(self.hint, ndigits) if ndigits is not None else round(self.hint)
    self.guard_float()
    return self._make(sympy.sympify(value), type(value), value)


SymNode.round = _round
# torch calls the boolean connectives by two names: the node's (``and_``) and the user's (``sym_and``).
SymNode.sym_and = SymNode.and_
SymNode.sym_or = SymNode.or_
