"""ember.disable: functions capture never traces.

``disable(fn)`` marks ``fn`` (and everything it calls) as run natively. With
``recursive=False`` only ``fn``'s own body runs natively: the user functions it looks up in
its globals are replaced, for that call, by their capture wrappers, so they are compiled.
"""
from __future__ import annotations

import functools
import types

from .library import inlinable_file


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
        value = self.real[name]
        if getattr(value, "_ember_disabled", None) is None and isinstance(value, types.FunctionType) \
                and inlinable_file(value.__code__.co_filename):
            return self.session.callee(value)
        return value


def run_shallow(disabled_fn, session, args, kwargs):
    """Run a ``disable(recursive=False)`` function natively; its callees go through capture."""
    fn = getattr(disabled_fn, "_ember_original", disabled_fn)
    copy = types.FunctionType(fn.__code__, _CapturingGlobals(fn.__globals__, session), fn.__name__,
                              fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy(*args, **kwargs)


