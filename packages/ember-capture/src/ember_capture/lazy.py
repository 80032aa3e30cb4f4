"""Locals of a resume function that are wrapped (and guarded) only when the trace uses them.

Note [Lazy locals]: a resume function receives every local of the original frame and the live
stack values. Wrapping them all would guard them all: a loop's index, the module of the current
iteration, a value the rest of the code only carries along, each specialized, so a break inside
a loop would compile the same resume function once per iteration. Instead each argument of a
resume function starts as a ``LazyVar`` holding the real value and its source. Instructions that
only move values (``PASS_THROUGH``: loads, stores, stack shuffles, jumps, returns) carry it as
is; any other instruction first wraps every ``LazyVar`` on the stack (``materialize``: the usual
wrapper, with its guards), so handlers never see one. A ``LazyVar`` still unwrapped at the end
of the trace is rebuilt from its source (the same object, unguarded: nothing traced depended on
it). Each trace (restarted at each new break) starts with fresh ``LazyVar``s, so the guards are
those of the final trace only.
"""
from __future__ import annotations

from .variables import Var

PASS_THROUGH = frozenset({
    "LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "DELETE_FAST", "LOAD_CONST", "LOAD_GLOBAL", "POP_TOP",
    "SWAP", "COPY", "PUSH_NULL", "NOP", "RESUME", "EXTENDED_ARG", "JUMP_FORWARD", "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT", "KW_NAMES", "PRECALL", "RETURN_VALUE", "COPY_FREE_VARS",
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",  # 3.13's pairs
})


class LazyVar(Var):
    def __init__(self, tr, value, source, name):
        self.tr, self.value, self.source, self.name = tr, value, source, name
        self.var = None

    def materialize(self) -> Var:
        if self.var is None:
            from .builder import wrap  # builder -> codegen -> this module
            self.var = wrap(self.tr, self.value, self.source, self.name)
        return self.var


def unpack_lazy(fr, inst) -> bool:
    """``for i, layer in enumerate(...)`` in a resume function: a tuple carried as a LazyVar is
    unpacked into LazyVars of its items, guarded by its type and length only."""
    v = fr.stack[-1]
    if type(v) is not LazyVar or v.var is not None or type(v.value) is not tuple or len(v.value) != inst.arg:
        return False
    fr.tr.guards.add(v.source, f"type(X) is tuple and len(X) == {inst.arg}")
    fr.stack.pop()
    for i in reversed(range(inst.arg)):
        fr.stack.append(LazyVar(v.tr, v.value[i], f"{v.source}[{i}]", f"{v.name}_{i}"))
    return True


def materialize_stack(stack: list):
    for i, v in enumerate(stack):
        if type(v) is LazyVar:
            stack[i] = v.materialize()


def resolved(v: Var) -> Var:
    """The wrapped value of a LazyVar once the trace used it; the LazyVar itself otherwise."""
    return v.var if type(v) is LazyVar and v.var is not None else v
