"""Size expressions as FX graph nodes: what a tracer needs to put a SymInt argument in its graph.

Note [sizes in graphs]: an op recorded with a symbolic size argument (``view(x, [s0, 4])``) needs
a graph value that computes that size when the graph runs. ``SizeNodes`` binds every symbol to a
node that reads it at run time (``aten.sym_size.int(x, d)`` of a tensor placeholder whose size
``d`` is that symbol, ``aten.sym_stride.int`` likewise, or an int placeholder), and builds any
expression over bound symbols from ``operator`` nodes (``operator.mul(s0, 4)``), one node per
expression. Every node carries ``meta["val"]``: the SymInt (or SymFloat) it computes. The graph
then runs unchanged on real tensors of any size, and a compiler reads each node's expression
from its ``meta["val"]``.
"""
from __future__ import annotations

import operator

import sympy
import torch

from ember_symbolic.env import expr_of

_SYM = (torch.SymInt, torch.SymFloat)

# Every target a size node may have (what SizeNodes emits, and what capture emits for size
# reads and Python arithmetic on sizes): a graph verifier admits these for int-valued nodes.
SIZE_OPS = frozenset({
    torch.ops.aten.sym_size.int, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_storage_offset.default,
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod,
    operator.neg, operator.pow, torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int,
})


def is_size_node(node: torch.fx.Node) -> bool:
    """An FX node computing a size: a SIZE_OPS call whose ``meta["val"]`` is a number or SymInt."""
    return (node.op == "call_function" and node.target in SIZE_OPS
            and isinstance(node.meta.get("val"), (int, float, torch.SymInt, torch.SymFloat)))


class SizeNodes:
    """Builds the nodes of one graph that compute size expressions (Note [sizes in graphs]).

    ``bind_input(node, value)`` declares a placeholder (a tensor whose sizes and strides may be
    symbols, or a SymInt); ``node_of(value)`` returns the graph value for a SymInt/SymFloat (a
    node) or the plain number itself; ``bind(value, node)`` says that ``node`` already computes
    ``value``. Nodes are created at the graph's current insertion point, the first time an
    expression is needed.
    """

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        self.env = None
        self._nodes: dict[tuple, torch.fx.Node] = {}
        self._readers: dict[sympy.Symbol, tuple] = {}  # symbol -> (op, placeholder, dim)

    # -- inputs ------------------------------------------------------------------------------------
    def bind_input(self, node: torch.fx.Node, value) -> None:
        """A placeholder: each size (then stride) of a tensor that is a bare symbol not yet bound
        becomes readable from it; a SymInt placeholder binds its symbol to itself. Sets the
        node's ``meta["val"]`` to ``value`` where it has none."""
        node.meta.setdefault("val", value)
        if isinstance(value, _SYM):
            self.bind(value, node)
            return
        if not isinstance(value, torch.Tensor):
            return
        for op, values in ((torch.ops.aten.sym_size.int, value.shape),
                           (torch.ops.aten.sym_stride.int, value.stride())):
            for d, v in enumerate(values):
                if isinstance(v, torch.SymInt):
                    self._remember_env(v)
                    e = expr_of(v)
                    if isinstance(e, sympy.Symbol) and e not in self._readers and (e, int) not in self._nodes:
                        self._readers[e] = (op, node, d)

    def bind(self, value, node: torch.fx.Node) -> None:
        """``node`` computes ``value`` (a SymInt/SymFloat): reuse it for that expression."""
        if isinstance(value, _SYM):
            self._remember_env(value)
            self._nodes.setdefault((expr_of(value), _pytype(value)), node)

    def bound_symbols(self) -> set:
        """The symbols this graph can read (from its inputs)."""
        return set(self._readers) | {e for e, t in self._nodes if isinstance(e, sympy.Symbol)}

    # -- values ------------------------------------------------------------------------------------
    def node_of(self, value):
        """The graph value computing ``value``: a node for a SymInt/SymFloat whose expression has
        symbols, the plain number otherwise."""
        if not isinstance(value, _SYM):
            return value
        self._remember_env(value)
        expr = expr_of(value)
        if not expr.free_symbols:
            return _pytype(value)(expr)
        return self.expr_node(expr, _pytype(value))

    def expr_node(self, expr: sympy.Basic, pytype: type = int):
        """The node computing ``expr`` (created, with the nodes of its parts, if needed)."""
        expr = sympy.sympify(expr)
        if not expr.free_symbols:
            return pytype(expr)
        key = (expr, pytype)
        node = self._nodes.get(key)
        if node is not None:
            return node
        if pytype is float and (expr, int) in self._nodes or (pytype is float and expr.is_integer):
            node = self._emit(torch.sym_float, (self.expr_node(expr, int),), expr, float)
        elif isinstance(expr, sympy.Symbol):
            reader = self._readers.get(expr)
            if reader is None:
                raise KeyError(f"size symbol {expr} is not a size or stride of any input of this graph")
            op, source, d = reader
            node = self._emit(op, (source, d), expr, int)
        else:
            node = self._build(expr, pytype)
        self._nodes[key] = node
        return node

    # -- building ----------------------------------------------------------------------------------
    def _build(self, expr, pytype):
        num, den = sympy.fraction(sympy.together(expr)) if not expr.is_Function else (expr, sympy.Integer(1))
        if den != 1:
            div = operator.floordiv if pytype is int else operator.truediv
            return self._emit(div, (self.expr_node(num, pytype), self.expr_node(den, pytype)), expr, pytype)
        if expr.is_Add:
            terms = sorted(expr.args, key=lambda t: (_negative(t), str(t)))
            out = self.expr_node(terms[0], pytype)
            for t in terms[1:]:
                if _negative(t):
                    out = self._emit(operator.sub, (out, self.expr_node(-t, pytype)), None, pytype)
                else:
                    out = self._emit(operator.add, (out, self.expr_node(t, pytype)), None, pytype)
            return self._fix_val(out, expr, pytype)
        if expr.is_Mul:
            coeff, rest = expr.as_coeff_Mul()
            if coeff == -1:
                return self._emit(operator.neg, (self.expr_node(rest, pytype),), expr, pytype)
            if coeff != 1:  # the product of the symbols once, shared (4*s0*s1 reuses s0*s1)
                return self._emit(operator.mul, (self.expr_node(rest, pytype), pytype(coeff)), expr, pytype)
            factors = list(rest.args)
            out = self.expr_node(factors[0], pytype)
            for f in factors[1:]:
                out = self._emit(operator.mul, (out, self.expr_node(f, pytype)), None, pytype)
            return self._fix_val(out, expr, pytype)
        if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
            return self._emit(operator.pow, (self.expr_node(expr.base, pytype), int(expr.exp)), expr, pytype)
        if expr.is_Pow and pytype is float and expr.exp.is_number:  # sqrt(head dim): attention's scale
            return self._emit(operator.pow, (self.expr_node(expr.base, float), float(expr.exp)), expr, float)
        if isinstance(expr, sympy.floor):
            n, d = sympy.fraction(sympy.together(expr.args[0]))
            return self._emit(operator.floordiv, (self.expr_node(n), self.expr_node(d)), expr, int)
        if isinstance(expr, sympy.ceiling):
            n, d = sympy.fraction(sympy.together(expr.args[0]))
            inner = self._emit(operator.floordiv, (self.expr_node(-n), self.expr_node(d)), -expr, int)
            return self._emit(operator.neg, (inner,), expr, int)
        if isinstance(expr, sympy.Mod):
            return self._emit(operator.mod, tuple(self.expr_node(a, pytype) for a in expr.args), expr, pytype)
        if isinstance(expr, (sympy.Max, sympy.Min)):
            fn = torch.sym_max if isinstance(expr, sympy.Max) else torch.sym_min
            args = sorted(expr.args, key=str)
            out = self.expr_node(args[0], pytype)
            for a in args[1:]:
                out = self._emit(fn, (out, self.expr_node(a, pytype)), None, pytype)
            return self._fix_val(out, expr, pytype)
        raise NotImplementedError(f"no graph node for the size expression {expr}")

    def _emit(self, fn, args, expr, pytype):
        node = self.graph.call_function(fn, args)
        if expr is None:  # an intermediate: its expression from its arguments'
            expr = _SYMPY[fn](*(_expr_arg(a) for a in args))
        node.meta["val"] = self.env.wrap(expr, pytype)
        return node

    def _fix_val(self, node, expr, pytype):
        # the last node of a chain computes the whole expression: keep its exact form
        node.meta["val"] = self.env.wrap(expr, pytype)
        return node

    def _remember_env(self, value) -> None:
        if self.env is None:
            self.env = value.node.env


_SYMPY = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.truediv: operator.truediv, operator.floordiv: lambda a, b: sympy.floor(a / b),
    torch.sym_max: sympy.Max, torch.sym_min: sympy.Min,
}


def _expr_arg(a):
    return expr_of(a.meta["val"]) if isinstance(a, torch.fx.Node) else sympy.sympify(a)


def _negative(term) -> bool:
    return bool(term.as_coeff_Mul()[0] < 0)


def _pytype(value) -> type:
    return float if isinstance(value, torch.SymFloat) else int
