"""The size environment: the symbols of one compile, their hints, and the guards the trace put on them.

Note [symbolic sizes]: a dynamic size is a sympy ``Symbol`` (``s0``, ``s1``, ...; integer,
positive). Every symbol has a *hint*, the value it had in the call being compiled. Tensors carry
``torch.SymInt`` sizes whose node is an ``ember_symbolic.SymNode`` (``node.expr``: the sympy
expression; ``node.hint``: its value in this call; ``node.env``: this environment). Arithmetic on
sizes builds expressions; a decision the trace takes on a size (``if n > 8``, ``int(n)``, a
meta kernel's ``size == 1`` test) is answered from the hints and recorded here as a *guard*: a
relation over symbols that must hold for the compiled code to be reused. A relation the bounds
already decide (every symbol is >= 2, because sizes 0 and 1 are specialized) records nothing.

Layers meet only through ``torch.SymInt``: capture creates symbols for the dimensions it makes
dynamic, autograd traces with the same SymInts, the inductor reads ``node.expr`` to index and to
size its loops, and every guard lands in the one environment the symbols came from, which capture
turns into its guard function.
"""
from __future__ import annotations

from collections.abc import Iterable

import sympy
import torch
from sympy.printing.pycode import PythonCodePrinter

from ember_symbolic.node import SymNode

# Symbols are >= 2 (0 and 1 are specialized): relations are decided by writing s = t + 2, t >= 0.
_MIN_SIZE = 2


class SizeEnv:
    """The symbols of one compile: hints, where each came from, and the guards recorded on them."""

    def __init__(self) -> None:
        self.hints: dict[sympy.Symbol, int] = {}
        self.sources: dict[sympy.Symbol, str] = {}
        self.guards: list[sympy.Basic] = []
        # Note [replacements]: a guard that pins a symbol (s2 == 32, s3 == s1) replaces it from then
        # on: every node's expr reads through this map, so later checks compare 32 with 32.
        self.replacements: dict[sympy.Symbol, sympy.Expr] = {}
        self._shift: dict[sympy.Symbol, sympy.Expr] = {}

    # -- symbols ---------------------------------------------------------------------------------
    def create_symbol(self, hint: int, source: str) -> sympy.Symbol:
        """A fresh symbol ``s<n>`` whose value in this call is ``hint``; ``source`` says where it
        was read (``"L['x'].size()[0]"``), for guards and messages."""
        if hint < _MIN_SIZE:
            raise ValueError(f"sizes below {_MIN_SIZE} are specialized, not symbolic ({source} = {hint})")
        symbol = sympy.Symbol(f"s{len(self.hints)}", integer=True, positive=True)
        self.hints[symbol] = int(hint)
        self.sources[symbol] = source
        self._shift[symbol] = sympy.Symbol(f"_t{len(self.hints)}", integer=True, nonnegative=True) + _MIN_SIZE
        return symbol

    def symint(self, hint: int, source: str) -> int | torch.SymInt:
        """A size for a dynamic dimension: a plain int for 0 and 1, else a SymInt of a new symbol."""
        if hint < _MIN_SIZE:
            return int(hint)
        return self.wrap(self.create_symbol(hint, source), int)

    def wrap(self, expr: sympy.Basic, pytype: type) -> torch.SymInt | torch.SymFloat | torch.SymBool:
        """The torch value for ``expr`` (its hint computed from this environment's hints)."""
        node = SymNode(self, sympy.sympify(expr), pytype, self.evaluate(expr, pytype))
        return node.wrapped()

    # -- values ----------------------------------------------------------------------------------
    def evaluate(self, expr: sympy.Basic, pytype: type = int, values: dict | None = None):
        """``expr``'s value under the hints (or under ``values``: symbol or name -> int)."""
        bound = self.hints if values is None else {
            (s if isinstance(s, sympy.Symbol) else sympy.Symbol(s, integer=True, positive=True)): v
            for s, v in values.items()}
        value = sympy.sympify(expr).xreplace(bound)
        if pytype is bool:
            return bool(value)
        return pytype(value)

    def static_truth(self, relation: sympy.Basic) -> bool | None:
        """True or False when the bounds alone decide ``relation`` (for every value of its
        symbols), else None."""
        relation = sympy.sympify(relation)
        if relation in (sympy.true, sympy.false):
            return bool(relation)
        shifted = relation.xreplace(self._shift)
        by_sign = _decide_by_sign(shifted)
        if by_sign is not None:
            return by_sign
        try:
            decided = sympy.simplify(shifted) if not isinstance(shifted, (sympy.logic.boolalg.BooleanAtom,)) else shifted
        except (TypeError, ValueError, ArithmeticError):  # sympy's evalf can divide by zero on floor()
            return None
        if decided in (sympy.true, sympy.false):
            return bool(decided)
        return None

    # -- guards ----------------------------------------------------------------------------------
    def record(self, relation: sympy.Basic, outcome: bool) -> None:
        """The trace decided ``relation`` was ``outcome`` (from the hints): keep that as a guard,
        unless the bounds already decide it."""
        fact = relation if outcome else sympy.Not(relation)
        if self.static_truth(fact) is True:
            return
        try:
            fact = sympy.simplify(fact) if not isinstance(fact, sympy.Symbol) else fact
        except (TypeError, ValueError, ArithmeticError):  # sympy cannot compare Max(1, floor(..))
            pass
        if fact is sympy.true or fact in self.guards:
            return
        self.guards.append(fact)
        self._learn(fact)

    def _learn(self, fact: sympy.Basic) -> None:
        """Note [replacements]: from ``Eq(symbol, integer)`` or ``Eq(newer symbol, older symbol)``,
        replace the symbol everywhere."""
        if not isinstance(fact, sympy.Eq):
            return
        lhs, rhs = self.simplify(fact.lhs), self.simplify(fact.rhs)
        order = {s: i for i, s in enumerate(self.hints)}
        for symbol, value in ((lhs, rhs), (rhs, lhs)):
            if not isinstance(symbol, sympy.Symbol) or symbol not in order:
                continue
            if value.is_Integer or (isinstance(value, sympy.Symbol) and order.get(value, len(order)) < order[symbol]):
                self.replacements[symbol] = value
                for known, was in list(self.replacements.items()):
                    self.replacements[known] = was.xreplace({symbol: value})
                return

    def simplify(self, expr: sympy.Basic) -> sympy.Basic:
        """``expr`` with the replaced symbols substituted (Note [replacements])."""
        if not self.replacements or not getattr(expr, "free_symbols", None):
            return expr
        return expr.xreplace(self.replacements)

    def specialize(self, expr: sympy.Expr, value) -> None:
        """Record that ``expr`` was used as the concrete ``value`` (``int(n)``, a branch on a size)."""
        self.record(sympy.Eq(expr, value), True)

    def guards_hold(self, values: dict) -> bool:
        """Whether every recorded guard holds for ``values`` (symbol or name -> int)."""
        return all(self.evaluate(g, bool, values) for g in self.guards)

    def specialized(self) -> dict[sympy.Symbol, int]:
        """Symbols a guard pins to one value (``Eq(s0, 8)``): the dimensions that are not really
        dynamic any more."""
        pinned = {}
        for g in self.guards:
            if isinstance(g, sympy.Eq) and isinstance(g.lhs, sympy.Symbol) and g.rhs.is_Integer:
                pinned[g.lhs] = int(g.rhs)
            elif isinstance(g, sympy.Eq) and isinstance(g.rhs, sympy.Symbol) and g.lhs.is_Integer:
                pinned[g.rhs] = int(g.lhs)
        return pinned

    def guard_code(self, names: dict[sympy.Symbol, str] | None = None) -> str:
        """The guards as one Python boolean expression over the symbols' names (or the given
        names, e.g. ``{s0: "x.shape[0]"}``); ``"True"`` when there are none."""
        if not self.guards:
            return "True"
        printer = SizePrinter(names or {})
        return " and ".join(f"({printer.doprint(g)})" for g in self.guards)

    def describe(self) -> list[str]:
        """One line per symbol: ``s0 = L['x'].size()[0] (hint 8)``."""
        return [f"{s} = {self.sources[s]} (hint {h})" for s, h in self.hints.items()]


def _sign(expr: sympy.Expr) -> int | None:
    """1 if ``expr`` > 0, 0 if it is >= 0, -1 if < 0, -2 if <= 0, for every value of its (non-negative
    integer) symbols, decided from a polynomial's coefficients; None when they do not decide it."""
    expr = sympy.expand(expr)
    if expr.is_number:
        return 1 if expr > 0 else -1 if expr < 0 else 0
    if not expr.is_polynomial(*expr.free_symbols):
        return None
    poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str))
    coeffs = poly.coeffs()
    constant = poly.as_expr().subs({s: 0 for s in expr.free_symbols})
    if all(c >= 0 for c in coeffs):
        return 1 if constant > 0 else 0
    if all(c <= 0 for c in coeffs):
        return -1 if constant < 0 else -2
    return None


def _sign_with_remainders(expr: sympy.Expr) -> int | None:
    """_sign, where each ``Mod(x, c)`` (c a positive integer) is replaced by a non-negative symbol
    ``m`` or by ``c - 1 - m``: each covers every value the remainder can take (0 .. c-1), so a
    sign found for either holds for the original; the first that decides is taken."""
    mods = [m for m in expr.atoms(sympy.Mod) if m.args[1].is_Integer and m.args[1] > 0][:3]
    if not mods:
        return _sign(expr)
    fresh = [sympy.Symbol(f"_m{i}", integer=True, nonnegative=True) for i in range(len(mods))]
    for choice in range(2 ** len(mods)):
        subs = {m: (f if not (choice >> i) & 1 else m.args[1] - 1 - f)
                for i, (m, f) in enumerate(zip(mods, fresh))}
        sign = _sign(expr.xreplace(subs))
        if sign is not None:
            return sign
    return None


def _decide_by_sign(relation: sympy.Basic) -> bool | None:
    """Decide ``a <op> b`` from the sign of ``a - b`` (see _sign), for Eq/Ne/Lt/Le/Gt/Ge and Not."""
    if isinstance(relation, sympy.Not):
        inner = _decide_by_sign(relation.args[0])
        return None if inner is None else not inner
    if not isinstance(relation, sympy.core.relational.Relational):
        return None
    sign = _sign_with_remainders(relation.lhs - relation.rhs)
    if sign is None:
        return None
    positive, nonneg, negative, nonpos = sign == 1, sign in (0, 1), sign == -1, sign in (-1, -2)
    if isinstance(relation, sympy.Eq):
        return False if (positive or negative) else None
    if isinstance(relation, sympy.Ne):
        return True if (positive or negative) else None
    if isinstance(relation, sympy.Gt):
        return True if positive else False if nonpos else None
    if isinstance(relation, sympy.Ge):
        return True if nonneg else False if negative else None
    if isinstance(relation, sympy.Lt):
        return True if negative else False if nonneg else None
    if isinstance(relation, sympy.Le):
        return True if nonpos else False if positive else None
    return None


class SizePrinter(PythonCodePrinter):
    """Prints size expressions as plain Python integer arithmetic (``//`` for floor division,
    ``%`` for Mod), names substituted where given."""

    def __init__(self, names: dict[sympy.Symbol, str] | None = None) -> None:
        super().__init__({"fully_qualified_modules": False})
        self._names = names or {}

    def _print_Symbol(self, expr):
        return self._names.get(expr, expr.name)

    def _print_floor(self, expr):
        numerator, denominator = sympy.fraction(sympy.together(expr.args[0]))
        if denominator == 1:
            return self._print(numerator)
        return f"(({self._print(numerator)}) // ({self._print(denominator)}))"

    def _print_ceiling(self, expr):
        numerator, denominator = sympy.fraction(sympy.together(expr.args[0]))
        if denominator == 1:
            return self._print(numerator)
        return f"(-((-({self._print(numerator)})) // ({self._print(denominator)})))"

    def _print_Mod(self, expr):
        return f"(({self._print(expr.args[0])}) % ({self._print(expr.args[1])}))"

    def _print_Max(self, expr):
        return "max(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Min(self, expr):
        return "min(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Not(self, expr):
        return f"(not {self._print(expr.args[0])})"

    def _print_And(self, expr):
        return "(" + " and ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " or ".join(self._print(a) for a in expr.args) + ")"


def expr_of(value) -> sympy.Basic:
    """The sympy expression of an int, a SymInt/SymFloat/SymBool made here, or a sympy value."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr
    return sympy.sympify(value)


def hint_of(value):
    """The concrete value of ``value`` in the call being compiled (ints pass through)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.hint
    return value


def is_symbolic(value) -> bool:
    """Whether ``value`` is a size that is an expression over symbols (not a plain number)."""
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(value.node.expr.free_symbols)


def env_of(values: Iterable) -> SizeEnv | None:
    """The environment of the first symbolic value among ``values`` (None when all are plain)."""
    for v in values:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) and isinstance(v.node, SymNode):
            return v.node.env
    return None
