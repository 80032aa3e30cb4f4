"""The value protocol: what each kind of symbolic value answers, one table per operation.

Note [Value protocol]: the interpreter does not ask which kind of value it holds. Each Python
operation on a symbolic value (an attribute, its truth, iterating over it, an item, ``in``, a
call, a method call, ...) is an ``Operation``: a table from the value's class (a ``Var``
subclass, looked up along its MRO) to the rule that models the operation for that kind of
value, filled by ``@OP.rule(VarType)`` beside the code of that kind. A kind of value that cannot
answer an operation says so with ``OP.refuse(VarType)``: using it there is a graph break of the
operation's own kind and reason (what the user reads, e.g. "indexing function"). Every kind of
value either answers or refuses every operation (``tests/test_value_protocol.py`` enumerates
them), so a new kind of value is one decision per operation, not a fall through an
``isinstance`` ladder; a class that is registered nowhere is refused, as a last resort. A few
operations have an explicit default, a rule for ``Var`` itself: an operator on kinds without
one of their own computes with their constant values (BINARY, RBINARY, UNARY), and ``iter``
walks the items UNPACK gives. A real object (``ObjVar``) is dispatched on further by its Python
type where its kinds differ (``TypeTable``s: a call, an attribute of a module or a class, the
items of a container module).

Rules live in the modules of what they model: ``semantics.py`` (constant values, identity,
attributes, truth, operators, ``iter``), ``items.py`` (iteration, ``in``, items), ``queries.py``
(``len``, ``type``, ``hasattr``, ``callable``), ``calls.py`` (calls) and ``methods.py`` (methods
of builtin receivers, by name).
"""
from __future__ import annotations

from .config import Unsupported
from .tables import TypeTable
from .variables import ConstVar, ObjVar, Var


def describe(v: Var) -> str:
    """How a graph-break reason names a value: ``list``, ``tensor``, ``function my_fn``."""
    if isinstance(v, (ObjVar, ConstVar)):
        return f"{type(v.value).__name__} {_qualname(v.value)}".strip()
    return type(v).__name__.replace("Var", "").lower()


def _qualname(value) -> str:
    """A function's or class's ``__qualname__``; "" for other objects, whose class's
    ``__getattr__`` (the user's) may raise anything or answer for every name."""
    try:
        name = getattr(value, "__qualname__", "")
    except Exception:  # noqa: BLE001 -- the user's __getattr__, not capture's
        return ""
    return name if isinstance(name, str) else ""


class Operation:
    """One operation of the value protocol: ``OP.lookup(type(v))(*args)`` runs the rule of
    ``v``'s kind. ``reason(*args)`` is the graph-break reason when the kind refuses it."""

    def __init__(self, name: str, kind: str, reason):
        self.name = name
        self.kind = kind
        self.reason = reason
        self.rules = TypeTable()  # Var class -> rule
        self._resolved = self.rules.resolved  # the hot path of lookup()
        self._refusal = self.refusal  # one bound method, registered and compared
        OPERATIONS[name] = self

    def rule(self, *types):
        """Decorator: ``fn`` answers this operation for values of ``types`` (and subclasses)."""
        return self.rules.register(*types)

    def refuse(self, *types):
        """Values of ``types`` do not answer this operation: a graph break with its reason."""
        self.rule(*types)(self._refusal)

    def refusal(self, *args):
        raise Unsupported(self.kind, self.reason(*args))

    def lookup(self, cls):
        """The rule for values of class ``cls`` (the refusal for a class registered nowhere)."""
        rule = self._resolved.get(cls)
        return rule if rule is not None else self.rules.find(cls, self._refusal)

    def declared(self, cls) -> str | None:
        """``"rule"`` or ``"refused"`` where ``cls`` or a base is registered (a rule for ``Var``
        itself is an operation's explicit default: the operators compute on constant values)."""
        for k in cls.__mro__:
            if k in self.rules:
                return "refused" if self.rules[k] is self._refusal else "rule"
        return None

    def __repr__(self):
        return f"Operation({self.name!r})"


OPERATIONS: dict[str, Operation] = {}

# -- the operations: each with the graph-break kind and reason of a refusal ---------------
# A value's own properties (semantics.py; queries.py for len/type/hasattr/callable).
CONST_VALUE = Operation("const_value", "unsupported_value",
                        lambda v, what="this operation": f"{what} needs a constant, got {describe(v)}")
IDENTITY = Operation("identity", "internal", lambda v: f"identity of {describe(v)}")  # what `is` compares
TRUTH = Operation("truth", "unsupported_value", lambda fr, v: f"truth value of {describe(v)}")
LEN = Operation("len", "unsupported_value", lambda fr, v: f"this operation needs a constant, got {describe(v)}")
TYPE = Operation("type", "unsupported_value", lambda v: f"type of {describe(v)}")
HASATTR = Operation("hasattr", "unsupported_value", lambda fr, obj, name: f"type of {describe(obj)}")
CALLABLE = Operation("callable", "unsupported_value", lambda v: f"callable() of {describe(v)}")
# Attributes (semantics.py).
GETATTR = Operation("getattr", "unsupported_attr", lambda fr, obj, name: f"attribute {name!r} of {describe(obj)}")
SETATTR = Operation("setattr", "side_effect",
                    lambda fr, obj, name, value: f"setting attribute {name!r} on {describe(obj)}")
# Operators (semantics.py): the left operand's rule, then the right one's (RBINARY).
BINARY = Operation("binary", "unsupported_operator",
                   lambda fr, fn, a, b: f"{fn.__name__} on {describe(a)} and {describe(b)}")
RBINARY = Operation("rbinary", "unsupported_operator",
                    lambda fr, fn, a, b: f"{fn.__name__} on {describe(a)} and {describe(b)}")
UNARY = Operation("unary", "unsupported_operator", lambda fr, fn, a: f"{fn.__name__} on {describe(a)}")
# Iteration, `in` and items (items.py; ITER in semantics.py).
ITER = Operation("iter", "unsupported_iter", lambda fr, v: f"iterating over {describe(v)}")
UNPACK = Operation("unpack", "unsupported_iter", lambda fr, v: f"iterating over {describe(v)}")
CONTAINS = Operation("contains", "unsupported_iter", lambda fr, c, item: f"iterating over {describe(c)}")
GETITEM = Operation("getitem", "unsupported_subscript", lambda fr, obj, key: f"indexing {describe(obj)}")
SETITEM = Operation("setitem", "side_effect", lambda fr, obj, key, value: f"item assignment on {describe(obj)}")
DELITEM = Operation("delitem", "side_effect", lambda fr, obj, key: f"del on {describe(obj)}")
# Calls (calls.py) and methods of builtin receivers (methods.py).
CALL = Operation("call", "unsupported_call", lambda fr, fn, args, kwargs: f"calling {describe(fn)}")
METHOD = Operation("method", "unsupported_call",
                   lambda fr, receiver, name, args, kwargs: f"method {name!r} of {describe(receiver)}")


# -- the dispatchers of the operations that are called from many places -------------------
def unpack(fr, v: Var) -> list[Var]:
    """The items of an iterable value, as a list."""
    return UNPACK.lookup(type(v))(fr, v)


def contains(fr, container: Var, item: Var) -> bool:
    """``item in container``."""
    return CONTAINS.lookup(type(container))(fr, container, item)


def getitem(fr, obj: Var, key: Var) -> Var:
    """``obj[key]``."""
    return GETITEM.lookup(type(obj))(fr, obj, key)


def setitem(fr, obj: Var, key: Var, value: Var):
    """``obj[key] = value``."""
    SETITEM.lookup(type(obj))(fr, obj, key, value)


def delitem(fr, obj: Var, key: Var):
    """``del obj[key]``."""
    DELITEM.lookup(type(obj))(fr, obj, key)


def call(fr, fn: Var, args: list, kwargs: dict) -> Var:
    """``fn(*args, **kwargs)``."""
    return CALL.lookup(type(fn))(fr, fn, args, kwargs)


def call_method(fr, receiver: Var, name: str, args: list, kwargs: dict) -> Var:
    """``receiver.name(*args, **kwargs)`` for a method of a builtin kind (a ``MethodVar``)."""
    return METHOD.lookup(type(receiver))(fr, receiver, name, args, kwargs)
