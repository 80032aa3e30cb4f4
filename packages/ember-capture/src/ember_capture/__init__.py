"""ember_capture: Python bytecode -> torch-level FX graph + guards, in pure Python.

    >>> import torch, ember_capture
    >>> def f(x, y):
    ...     return torch.sin(x) + torch.cos(y)
    >>> g = ember_capture.capture(f, lambda gm, inputs: gm.forward)
    >>> x, y = torch.randn(3), torch.randn(3)
    >>> torch.allclose(g(x, y), f(x, y))
    True
"""
from ember_capture.__about__ import __version__
from ember_capture.api import capture, disable, explain, reset, ExplainOutput
from ember_capture.config import BreakReason, CaptureConfig, CaptureStats, FrameEvent, Unsupported
from ember_capture.kinds import BreakKind
from ember_capture.sizes import SYMBOLIC_SIZES_ATTR, mark_dynamic, mark_static, takes_symbolic_sizes
from ember_capture.verify import SpecError, verify_graph

__all__ = ["__version__", "capture", "disable", "explain", "reset", "ExplainOutput", "BreakKind", "BreakReason",
           "CaptureConfig", "CaptureStats", "FrameEvent", "SYMBOLIC_SIZES_ATTR", "SpecError", "Unsupported",
           "mark_dynamic", "mark_static", "takes_symbolic_sizes", "verify_graph"]
