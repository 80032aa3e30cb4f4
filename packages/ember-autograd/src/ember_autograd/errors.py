"""Errors raised by ember_autograd. Each carries a stable `kind`, the op and the user's line."""
from __future__ import annotations


class AotError(Exception):
    """Base class. `kind` is stable (the facade keys its fallback on it); `op` names the ATen
    or torch-level op; `stack_trace` is the user's source line when known."""

    def __init__(self, kind: str, reason: str, *, op: object = None, stack_trace: str | None = None):
        self.kind = kind
        self.reason = reason
        self.op = op
        self.stack_trace = stack_trace
        where = f"\n  at user code:\n{_indent(stack_trace)}" if stack_trace else ""
        what = f" in {op}" if op is not None else ""
        super().__init__(f"[{kind}]{what}: {reason}{where}")


class AotTraceError(AotError):
    """An op the tracer cannot turn into a static functional ATen graph (data-dependent output,
    unsupported mutation, operator without a fake kernel...)."""


class VerificationError(AotError):
    """A graph broke the functional-graph contract (see `verify_functional`)."""


def _indent(text: str) -> str:
    lines = text.rstrip().splitlines()[-4:]
    return "\n".join("    " + line for line in lines)
