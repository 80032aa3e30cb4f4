"""ember.disable: functions capture never traces.

``disable(fn)`` marks ``fn`` (and everything it calls) as run natively. With
``recursive=False`` only ``fn``'s own body runs natively: the user functions it looks up in
its globals, or reads from its closure cells, are replaced, for that call, by their capture
wrappers, so they are compiled.
"""
from __future__ import annotations

import dis
import functools
import types

from .builder import instance_dict
from .library import inlinable_file


def own_attr(obj, name: str):
    """The attribute ``name`` from ``obj``'s own ``__dict__`` (a bound method's: its function's),
    or None. For what ember and torch set on the objects they make (``_ember_disabled``,
    ``_ember_original``, ``_ember_state``, a custom op's ``_opoverload``): read without the
    object's attribute protocol, since a user's ``__getattr__`` may raise anything (a KeyError,
    a ValueError) or answer for every name, and looking for a marker must neither fail nor find
    one that is not there."""
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    own = instance_dict(obj)
    return None if own is None else own.get(name)


def disable(fn=None, recursive: bool = True):
    """Never trace ``fn``; with ``recursive=False`` the functions it calls are still captured.

    Usable as ``@disable``, ``@disable(recursive=False)`` or ``disable(fn)``.

        >>> @disable
        ... def helper(x):
        ...     return x + 1
        >>> helper(1)
        2
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        return fn(*args, **kwargs)

    disabled._ember_disabled = "recursive" if recursive else "shallow"
    disabled._ember_original = fn
    return disabled


class _CapturingGlobals(dict):
    """Globals for a shallow-disabled function: user functions it looks up are captured."""

    def __init__(self, real: dict, session):
        super().__init__(__builtins__=real.get("__builtins__", __builtins__))
        self.real = real
        self.session = session

    def __getitem__(self, name):
        return _captured(self.real[name], self.session)


def _captured(value, session):
    """The capture wrapper of a user function (the value itself for anything else)."""
    if own_attr(value, "_ember_disabled") is None and isinstance(value, types.FunctionType) \
            and inlinable_file(value.__code__.co_filename):
        return session.callee(value)
    return value


def _closure(fn, session):
    """``fn``'s closure with each cell that holds a user function, and that ``fn`` never writes
    (``nonlocal``), replaced by a new cell holding its capture wrapper: an inner function
    reached through a closure is compiled like one reached through the globals."""
    if not fn.__closure__:
        return fn.__closure__
    written = {i.argval for i in dis.get_instructions(fn.__code__) if i.opname in ("STORE_DEREF", "DELETE_DEREF")}
    cells = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            cells.append(cell)
            continue
        wrapped = _captured(value, session)
        cells.append(cell if wrapped is value or name in written else types.CellType(wrapped))
    return tuple(cells)


def run_shallow(disabled_fn, session, args, kwargs):
    """Run a ``disable(recursive=False)`` function natively; its callees go through capture."""
    fn = own_attr(disabled_fn, "_ember_original") or disabled_fn
    copy = types.FunctionType(fn.__code__, _CapturingGlobals(fn.__globals__, session), fn.__name__,
                              fn.__defaults__, _closure(fn, session))
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy(*args, **kwargs)


