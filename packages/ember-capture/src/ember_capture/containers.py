"""Methods of the builtin containers called through their descriptors (``dict.get``,
``OrderedDict.__setitem__``, ``list.__len__``): how user subclasses of dict, list, tuple and
OrderedDict reach their inherited methods (``super().get(key)``, ``dict.get(self, key)``).

Note [Builtin methods on subclasses]: a descriptor of a builtin container runs C code that
reads or writes the container's own storage and calls no Python override, so its meaning is
the container's: on a symbolic container (a DictVar, ListVar, ...) it is that container's
method; on a real object read from the inputs (an instance of a dict subclass held by a
library, such as a registry), a read-only method runs at trace time and its result is wrapped
with the call itself as its source (``dict.get(<source>, key)``), so that everything the trace
reads from the result is guarded by re-running the same call.
"""
from __future__ import annotations

from . import semantics as S
from .builder import wrap
from .config import Unsupported
from .protocol import call_method
from .variables import ConstVar, DictVar, ListVar, ObjVar, SetVar, TupleVar, Var

# Read-only methods run natively on a real container; views are read as lists (what the
# symbolic containers' own keys/values/items return).
PURE_READS = frozenset({"get", "__getitem__", "__contains__", "__len__", "index", "count"})
VIEW_READS = frozenset({"keys", "values", "items"})



def call_container_method(fr, descr, args: list, kwargs: dict) -> Var:
    """``descr(receiver, *args)`` where ``descr`` is e.g. ``dict.get`` (Note [Builtin methods on subclasses])."""
    if not args:
        raise Unsupported("unsupported_call", f"{descr.__qualname__} without a receiver")
    receiver, rest = args[0], list(args[1:])
    name = descr.__name__
    storage = getattr(receiver, "storage", None)  # a user-class instance with a builtin base
    if storage is not None:
        receiver = storage
    if isinstance(receiver, (DictVar, ListVar, TupleVar, SetVar)):
        result = S.container_dunder(fr, receiver, name, rest)
        if result is not S.NO_DUNDER:
            return result
        return call_method(fr, receiver, name, rest, kwargs)
    if isinstance(receiver, ObjVar) and receiver.source is not None and isinstance(receiver.value, descr.__objclass__):
        if not kwargs and all(isinstance(a, (ConstVar, ObjVar)) for a in rest):
            if name in PURE_READS or name in VIEW_READS:
                return _native_read(fr, descr, receiver, rest)
    raise Unsupported("unsupported_call", f"{descr.__qualname__} on {S.describe(receiver)}")


def _native_read(fr, descr, receiver: ObjVar, rest: list) -> Var:
    tr = fr.tr
    values = [a.value for a in rest]
    tr.check_native(receiver.value, descr.__qualname__)  # Note [Mutated input dicts]
    try:
        result = descr(receiver.value, *values)
    except Exception as e:  # the eager code raises here too: let it, eagerly
        raise Unsupported("trace_error", f"{descr.__qualname__} raised {type(e).__name__}: {e}") from None
    call = f"{tr.ns.ref(descr)}({receiver.source}{''.join(', ' + tr.ns.ref(v) for v in values)})"
    if descr.__name__ in VIEW_READS:
        return wrap(tr, list(result), f"list({call})", descr.__name__)
    return wrap(tr, result, call, descr.__name__)
