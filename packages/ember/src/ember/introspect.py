"""Reading attributes of objects that may be the user's (the model, a backend's compiled callable).

Note [Introspecting user objects]: the facade asks such objects for optional attributes
(`__qualname__`, `_boxed_call`, `compiled_graph`, `_ember_record`). `getattr(obj, name, default)`
only absorbs AttributeError; a user class's `__getattr__` may raise anything (a KeyError, a
ValueError) or answer for every name, and neither may crash a compile or a call: the default
is used, and an answer of the wrong type counts as absent where the caller says so.
"""
from __future__ import annotations

from typing import Any


def attr_or(obj: Any, name: str, default: Any = None, kind: type | tuple | None = None) -> Any:
    """`getattr(obj, name, default)` that also gives `default` when the lookup raises anything,
    or (with `kind`) when the answer is not an instance of `kind`::

        class Odd:
            def __getattr__(self, name):
                raise KeyError(name)
        assert attr_or(Odd(), "__qualname__", "Odd") == "Odd"
    """
    try:
        value = getattr(obj, name, default)
    except Exception:  # noqa: BLE001 -- the user's __getattr__, not ember's
        return default
    if kind is not None and not isinstance(value, kind):
        return default
    return value
