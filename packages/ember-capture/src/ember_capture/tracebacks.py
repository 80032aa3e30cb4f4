"""Tracebacks that blame the user's code (STYLE.md rule 12).

Note [hidden frames]: an exception that leaves a captured function loses ember's frames from its
traceback: the user sees their call, then their own code, not the cache lookup, the generated
entry, the compiler passes in between. An error ember raises itself (its innermost frame is
ember's: a fullgraph break, a backend failure) also loses its chained internal exceptions; the
user's own exceptions keep theirs. `CaptureConfig(hide_frames=False)` (EMBER_DEBUG=1 at the
facade) keeps everything. Only the frame of the capture wrapper that re-raises remains.
"""
from __future__ import annotations

import types

# modules whose frames are ember's; by name, since capture imports no other ember package
EMBER_MODULES = frozenset({"ember", "ember_capture", "ember_autograd", "ember_prims", "ember_inductor"})


def is_ember_frame(frame: types.FrameType) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name.split(".")[0] in EMBER_MODULES or frame.f_code.co_filename.startswith("<ember")


def hide_ember_frames(exc: BaseException) -> BaseException:
    """`exc` with ember's frames cut out of its traceback (Note [hidden frames])."""
    kept = []
    tb = exc.__traceback__
    innermost = None
    while tb is not None:
        innermost = tb
        if not is_ember_frame(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    if innermost is not None and is_ember_frame(innermost.tb_frame):
        exc.__cause__ = None  # ember's own error: its internal causes are ember's business
        exc.__suppress_context__ = True
    new_tb = None
    for entry in reversed(kept):
        new_tb = types.TracebackType(new_tb, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return exc.with_traceback(new_tb)
