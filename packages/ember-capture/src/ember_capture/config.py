"""Configuration, errors and the records capture keeps about what it did."""
from __future__ import annotations

import dataclasses
import linecache

from .kinds import BreakKind

LOG_NAMES = frozenset({"graph_breaks", "recompiles", "guards", "graph"})


@dataclasses.dataclass(frozen=True)
class CaptureConfig:
    """What a capture may do. Frozen and passed in: nothing here is global.

    ``dynamic`` (Note [Dynamic shapes in capture], sizes.py): False specializes every size (a
    new shape recompiles); True makes every dimension of the tensor arguments, and every int
    argument, symbolic from the first compile (parameters and buffers, and sizes 0 and 1, stay
    static); None (the default) compiles static first, and when a later call changes a size
    (or an int argument), recompiles once with that one symbolic.
    """

    fullgraph: bool = False
    recompile_limit: int = 8
    dynamic: bool | None = None
    logs: frozenset[str] = frozenset()
    # Note [internal errors]: an exception raised by capture's own code while tracing (not by the
    # user's program) is ember's bug. By default it is reported as one (kind "internal", with a
    # warning that says so) and the code runs eagerly; with raise_internal it propagates, with
    # ember's traceback (tests run this way; the facade sets it from EMBER_RAISE_INTERNAL=1).
    raise_internal: bool = False
    # Note [hidden frames] (tracebacks.py): exceptions leaving a captured function show the
    # user's frames only. Off by default for this layer alone; the facade turns it on unless
    # EMBER_DEBUG=1.
    hide_frames: bool = False

    def __post_init__(self):
        if not isinstance(self.fullgraph, bool):
            raise TypeError(f"fullgraph must be a bool, got {self.fullgraph!r}")
        if not isinstance(self.recompile_limit, int) or self.recompile_limit < 1:
            raise ValueError(f"recompile_limit must be a positive int, got {self.recompile_limit!r}")
        for flag in ("raise_internal", "hide_frames"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool, got {getattr(self, flag)!r}")
        if self.dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got {self.dynamic!r}")
        unknown = set(self.logs) - LOG_NAMES
        if unknown:
            raise ValueError(f"unknown log names {sorted(unknown)}; valid: {sorted(LOG_NAMES)}")
        object.__setattr__(self, "logs", frozenset(self.logs))


@dataclasses.dataclass(frozen=True)
class BreakReason:
    """Why capture stopped: a stable ``kind``, one sentence, and the user's line."""

    kind: BreakKind
    reason: str
    filename: str | None = None
    lineno: int | None = None
    source_line: str | None = None
    function: str | None = None  # the qualified name of the function holding the line

    @property
    def hint(self) -> str:
        """What the user can do about it (one line)."""
        return BreakKind.of(self.kind).hint

    def where(self) -> str:
        if self.filename is None:
            return "<unknown location>"
        in_function = f" in {self.function}" if self.function else ""
        return f"{self.filename}:{self.lineno}{in_function}: {self.source_line or ''}".rstrip()

    def __str__(self):
        return f"[{self.kind}] {self.reason} at {self.where()}"


class Unsupported(Exception):
    """Raised under ``fullgraph=True`` at the first graph break.

    The message holds the reason, the user's ``file:line`` and the source line.
    Internally, the interpreter raises it at any construct it will not trace.
    """

    def __init__(self, kind: BreakKind | str, reason: str, location: tuple | None = None):
        self.kind = BreakKind.of(kind)
        self.reason = reason
        self.location = location  # (filename, lineno, function) of the user's line, once known
        super().__init__(reason)

    def with_location(self, filename, lineno, function=None):
        if self.location is None:
            self.location = (filename, lineno, function)
        return self

    def to_reason(self) -> BreakReason:
        filename, lineno, function = (tuple(self.location) + (None,))[:3] if self.location else (None, None, None)
        line = linecache.getline(filename, lineno).strip() if filename and lineno else None
        return BreakReason(self.kind, self.reason, filename, lineno, line, function)

    def __str__(self):
        return str(self.to_reason())


@dataclasses.dataclass(frozen=True)
class FrameEvent:
    """One compile of one frame (``kind`` "entry": a new guarded entry, with the index of its
    graph in ``CaptureStats.graphs`` or None, its guards and the break that ended it; "eager":
    the frame runs eagerly, ``reason`` says why) or a guard miss before it ("recompile",
    ``reason`` names the failed guard). Read by the facade's compile report."""

    kind: str
    frame: str  # the frame's qualified name ("f (resumed at offset 40)" for a resume function)
    filename: str
    firstlineno: int
    graph: int | None = None
    guards: tuple = ()
    reason: object = None  # a BreakReason ("entry", "eager") or a str ("recompile")


@dataclasses.dataclass
class CaptureStats:
    """What one capture (and the resume functions it spawned) did; read by explain()."""

    graphs: list = dataclasses.field(default_factory=list)
    breaks: list = dataclasses.field(default_factory=list)
    fallbacks: list = dataclasses.field(default_factory=list)
    recompiles: int = 0
    events: list = dataclasses.field(default_factory=list)  # FrameEvent, in the order they happened
    # per graph (as `graphs`): its symbolic inputs, "x.size(0) (s0)" (Note [Dynamic shapes in capture])
    dynamic_inputs: list = dataclasses.field(default_factory=list)
