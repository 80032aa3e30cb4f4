"""Symbolic values: what the interpreter keeps on its stack and in its locals.

Note [Sources]: a value read from the frame's inputs (arguments, globals, closure cells, or
attributes/items of those) carries ``source``, a Python expression over ``L`` (the frame's
argument tuple) and named constants. Guards and graph-input extraction are generated from
sources; a value built during tracing has ``source=None`` and is rebuilt from its parts.
"""
from __future__ import annotations


class Var:
    source: str | None = None

    def __repr__(self):
        return f"{type(self).__name__}({self._repr()})"

    def _repr(self):
        return ""


class NullVar(Var):
    """CPython's NULL stack marker (before a callable)."""


NULL = NullVar()


class ConstVar(Var):
    """A Python value known at trace time (guarded when it has a source)."""

    def __init__(self, value, source=None):
        self.value = value
        self.source = source

    def _repr(self):
        return repr(self.value)


class TensorVar(Var):
    """A tensor in the graph: its FX node and fake example value."""

    def __init__(self, node, fake, source=None, ident=None):
        self.node = node
        self.fake = fake
        self.source = source
        self.ident = ident if ident is not None else self  # in-place results share the identity

    def _repr(self):
        return f"{self.node.name}: {tuple(self.fake.shape)} {self.fake.dtype}"


class ObjVar(Var):
    """A real Python object read from the inputs: module, function, class, nn.Module, ...
    ``pin``, where set, adds the guard that this source is this very object, for a use that
    depends on more than the guarded type (Note [Identity of real objects])."""

    pin = None

    def __init__(self, value, source=None):
        self.value = value
        self.source = source

    def _repr(self):
        return f"{type(self.value).__name__} @ {self.source}"


class ListVar(Var):
    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source


class TupleVar(Var):
    """A tuple; ``cls`` is a namedtuple/structseq class when not a plain tuple."""

    def __init__(self, items, source=None, cls=tuple, fields=None):
        self.items = list(items)
        self.source = source
        self.cls = cls
        self.fields = fields  # attribute name -> index, for namedtuples and structseqs


class DictVar(Var):
    def __init__(self, items: dict, source=None, cls=dict):
        self.items = dict(items)  # python key -> Var
        self.source = source
        self.cls = cls


class DictViewVar(Var):
    """``d.keys()``, ``d.values()`` or ``d.items()``: a live view, so it reads its dict when
    used (its length, membership, iteration), not when it was made."""

    def __init__(self, dict_var: "DictVar", kind: str):
        self.dict = dict_var
        self.kind = kind  # "keys" | "values" | "items"

    def view_items(self) -> list:
        items = self.dict.items
        if self.kind == "keys":
            return [ConstVar(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVar([ConstVar(k), v]) for k, v in items.items()]


class SetVar(Var):
    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source


def _none():
    return ConstVar(None)


class IterVar(Var):
    """An iterator over values known at trace time.

    Note [lazy iterators]: a generator, map() or filter() produces its items when asked
    (``pull`` appends the next one to ``items``, or returns False when exhausted), as Python
    does: a generator's side effects (an in-place op, an append) happen only for the items
    consumed, in the order they are consumed."""

    def __init__(self, items, live=False, pull=None, py_type=type(iter([]))):
        self.items = items if live else list(items)
        self.pos = 0
        self.pull = pull
        self.py_type = py_type  # what type() says: list_iterator, generator, map, zip, ...
        # an iterator from the inputs: where it was read, and its position then (Note
        # [Iterators from the inputs] in builder.py); None for one the trace made
        self.source: str | None = None
        self.start = 0
        self.check = None  # before each next(): the error it raises (a dict iterator's, its dict changed size), or None
        self.returned = _none  # once exhausted: a generator's return value (the result of `yield from`)

    def more(self) -> bool:
        """Whether a next item exists (producing it if needed)."""
        error = self.check() if self.check is not None else None
        if error is not None:
            raise error
        while self.pos >= len(self.items) and self.pull is not None:
            if not self.pull(self):
                self.pull = None
        return self.pos < len(self.items)

    def take(self):
        self.pos += 1
        return self.items[self.pos - 1]

    def drain(self) -> list:
        """The remaining items, all produced and consumed."""
        out = []
        while self.more():
            out.append(self.take())
        return out


class CellVar(Var):
    def __init__(self, contents=None):
        self.contents = contents


class FunctionVar(Var):
    """A function made by MAKE_FUNCTION during tracing (closure cells are CellVars)."""

    def __init__(self, code, globals_, name, defaults, kwdefaults, closure):
        self.code = code
        self.globals = globals_
        self.name = name
        self.defaults = defaults  # tuple of Var
        self.kwdefaults = kwdefaults  # dict of Var
        self.closure = closure  # tuple of CellVar or None


class BoundVar(Var):
    """``obj.method`` where the method is a Python function to inline with ``self`` bound."""

    def __init__(self, func, self_var):
        self.func = func  # Var: ObjVar(function) or FunctionVar
        self.self_var = self_var


class MethodVar(Var):
    """A method of a builtin kind on a symbolic receiver: tensor.view, list.append, dict.items."""

    def __init__(self, receiver, name):
        self.receiver = receiver
        self.name = name


class PartialVar(Var):
    def __init__(self, func, args, kwargs):
        self.func = func
        self.args = list(args)
        self.kwargs = dict(kwargs)


class GradModeVar(Var):
    """``torch.no_grad()`` / ``torch.enable_grad()`` / ``torch.set_grad_enabled(b)`` object."""

    def __init__(self, enabled):
        self.enabled = enabled


class AutocastVar(Var):
    """``torch.autocast(...)`` and its aliases, with constant arguments."""

    def __init__(self, device_type, dtype, enabled, cache_enabled):
        self.args = (device_type, dtype, enabled, cache_enabled)


class NoOpContextVar(Var):
    """A context manager that capture enters as a no-op (Note [Profiler contexts])."""

    def __init__(self, cls):
        self.cls = cls


class ExitVar(Var):
    """The ``__exit__`` that BEFORE_WITH pushes: restores the grad mode it saved, or leaves
    the autocast region it entered (``node`` is the graph's _enter_autocast); with neither, a
    no-op (Note [Profiler contexts])."""

    def __init__(self, restore=None, node=None, context=None):
        self.restore = restore
        self.node = node
        self.context = context


class SuperVar(Var):
    def __init__(self, cls, obj):
        self.cls = cls
        self.obj = obj


class NewObjVar(Var):
    """An instance of a user class created during tracing: its ``__dict__`` (``attrs``) and, for a
    subclass of dict, OrderedDict or list (a Hugging Face ``ModelOutput``), the builtin base's own
    contents (``storage``: a DictVar or ListVar; Note [Builtin methods on subclasses])."""

    def __init__(self, cls, attrs, base=None, storage=None):
        self.cls = cls
        self.attrs = dict(attrs)
        self.base = base  # the builtin container class in cls.__mro__, or None
        self.storage = storage
