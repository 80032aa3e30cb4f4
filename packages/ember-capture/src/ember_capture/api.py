"""The public entry points: capture, disable, explain, reset."""
from __future__ import annotations

import dataclasses
import functools
import types
import warnings

import torch

from . import frame
from .config import CaptureConfig, CaptureStats, Unsupported
from .disable import disable, own_attr, run_shallow
from .runtime import FrameState, Session, reset_all


def capture(fn, backend, config: CaptureConfig = CaptureConfig(), *, stats: CaptureStats | None = None):
    """Wrap ``fn`` so that calls run captured graphs compiled by ``backend``.

    ``fn`` is a Python function, a bound method, or an ``nn.Module`` (its ``forward`` is traced
    with ``self`` bound; parameters and buffers become graph inputs). ``backend`` follows the
    torch.compile protocol: ``backend(gm, example_inputs) -> callable``.

        >>> import torch
        >>> f = capture(lambda x: x.relu() * 2, lambda gm, inputs: gm.forward)
        >>> f(torch.tensor([-1.0, 3.0]))
        tensor([0., 6.])
    """
    if not isinstance(config, CaptureConfig):
        raise TypeError(f"config must be a CaptureConfig, got {type(config).__name__}")
    if frame.VERSION not in frame.HANDLERS:
        return _eager_on_unknown_python(fn, config)
    session = Session(backend, config, stats if stats is not None else CaptureStats())
    session.root = fn
    return _capture_in(session, fn)


def _eager_on_unknown_python(fn, config: CaptureConfig):
    """A CPython whose bytecode capture has no handlers for: run ``fn`` as it is, say so once.

    Interpreting bytecode of an unknown version could misread it (opcodes change meaning between
    versions), so capture never tries: the function runs eagerly, or, under ``fullgraph=True``,
    compiling it is an error.
    """
    version = ".".join(map(str, frame.VERSION))
    known = ", ".join(".".join(map(str, v)) for v in frame.HANDLERS)
    code = getattr(getattr(fn, "forward", fn), "__code__", None)
    where = (code.co_filename, code.co_firstlineno, code.co_name) if code else None
    reason = (f"CPython {version} is not supported by ember's capture (supported: {known}); "
              f"{getattr(fn, '__qualname__', type(fn).__name__)} runs eagerly, uncompiled")
    if config.fullgraph:
        raise Unsupported("unsupported_python", reason, where)
    if where:
        warnings.warn_explicit(reason, RuntimeWarning, where[0], where[1])
    else:
        warnings.warn(reason, RuntimeWarning, stacklevel=3)
    if isinstance(fn, torch.nn.Module):
        return fn
    return functools.wraps(fn)(lambda *args, **kwargs: fn(*args, **kwargs))


def _capture_in(session: Session, fn):
    inner = own_attr(fn, "_ember_state")
    if inner is not None:  # capturing a captured function: capture what it wraps
        fn = inner.eager
    disabled = own_attr(fn, "_ember_disabled")
    if disabled == "recursive":
        return fn
    if disabled == "shallow":
        return functools.wraps(fn)(lambda *args, **kwargs: run_shallow(fn, session, args, kwargs))
    if isinstance(fn, torch.nn.Module):
        forward = type(fn).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"cannot capture {type(fn).__name__}: its forward is not a Python function")
        return FrameState(session, forward, fn, name=f"{type(fn).__name__}.forward").wrapper
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return FrameState(session, fn.__func__, fn.__self__).wrapper
    if isinstance(fn, types.FunctionType):
        return FrameState(session, fn).wrapper
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):  # a callable object: trace its __call__
        return FrameState(session, call, fn, name=f"{type(fn).__qualname__}.__call__").wrapper
    raise TypeError(f"capture() needs a Python function, bound method or nn.Module, got {type(fn).__name__}")


def reset() -> None:
    """Forget every cache and compiled entry of every capture."""
    reset_all()


@dataclasses.dataclass
class ExplainOutput:
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    ops_per_graph: list
    recompiles: int = 0
    # per graph: its symbolic inputs, "x.size(0) (s0)" (Note [Dynamic shapes in capture])
    dynamic_inputs: list = dataclasses.field(default_factory=list)

    def __str__(self):
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        for i, names in enumerate(self.dynamic_inputs, 1):
            if names:
                lines.append(f"Dynamic inputs of graph {i}: {', '.join(names)}")
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, r in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. [{r.kind}] {r.reason}")
                lines.append(f"     {r.where()}")
        for i, ops in enumerate(self.ops_per_graph, 1):
            names = ", ".join(_target_name(t) for t in ops)
            lines.append(f"Ops in graph {i}: {names}")
        return "\n".join(lines)


def _target_name(t):
    if isinstance(t, str):
        return f"Tensor.{t}"
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", None) or str(t)
    return f"{mod}.{name}" if mod else name


def explain(fn, *args, **kwargs) -> ExplainOutput:
    """Run ``fn(*args, **kwargs)`` once under capture and report graphs and graph breaks (and
    which inputs of each graph are dynamic: those marked with ``mark_dynamic``).

        >>> import torch
        >>> def f(x):
        ...     y = x * 2
        ...     print("side effect")
        ...     return y + 1
        >>> out = explain(f, torch.ones(2))
        side effect
        >>> out.graph_count, out.graph_break_count
        (2, 1)
    """
    return explain_with(fn, args, kwargs, CaptureConfig())


def explain_with(fn, args, kwargs, config: CaptureConfig) -> ExplainOutput:
    """``explain`` under ``config`` (``dynamic=True``: every input's sizes symbolic)."""
    stats = CaptureStats()
    captured = capture(fn, lambda gm, inputs: gm.forward, config, stats=stats)
    captured(*args, **kwargs)
    ops = [[n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")] for gm in stats.graphs]
    return ExplainOutput(list(stats.graphs), len(stats.graphs), len(stats.breaks), list(stats.breaks), ops,
                         stats.recompiles, [list(d) for d in stats.dynamic_inputs])


