"""The user-facing verbs: compile, disable, reset, explain."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

import torch

import ember_capture
from ember.backends import build_compiler
from ember.ddp import compile_ddp, is_ddp, split_at_ddp_buckets
from ember.errors import InvalidArgument
from ember.fsdp import compile_fsdp, has_fsdp_units
from ember.introspect import attr_or
from ember.module import OptimizedModule
from ember import trace
from ember.progress import Progress
from ember.record import CompileRecord
from ember.report import CompileReport
from ember.settings import CAPTURE_LOGS, make_settings


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable = "inductor", mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """Compile a function, bound method or nn.Module; the signature is torch.compile's.

    Works as a call and as a decorator, with or without arguments::

        import torch, ember

        @ember.compile(backend="eager")
        def foo(x, y):
            return torch.sin(x) + torch.cos(y)

        x, y = torch.randn(10), torch.randn(10)
        torch.testing.assert_close(foo(x, y), torch.sin(x) + torch.cos(y))

    Arguments are validated before anything is wrapped: a bad backend, mode or option raises
    `ember.InvalidArgument` naming the valid choices, and the model is left as it was.

    A DistributedDataParallel module, or a model holding FSDP2 units, is compiled around torch's
    distributed machinery: DDP's forward and FSDP's hooks run natively, the computation between
    them is compiled, and under DDP each graph is split at its gradient buckets
    (docs/distributed.md).
    """
    if model is None:
        # Decorator with arguments: validate now, so a typo fails at the decorator line.
        _prepare(backend, fullgraph, dynamic, mode, options, disable)
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not callable(model):
        raise InvalidArgument(f"ember.compile: expected a function, method or nn.Module, "
                              f"got {type(model).__name__}")
    record = CompileRecord(function=_model_name(model))
    prepared = _prepare(backend, fullgraph, dynamic, mode, options, disable, record)
    if prepared is None:
        return model
    compiler, config = prepared
    record.capture = stats = ember_capture.CaptureStats()  # Note [compile report]
    # Pickling or deep-copying a compiled module compiles the copied module again with these arguments.
    recompile = functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                  mode=mode, options=options)
    if is_ddp(model):  # DDP's forward runs natively; the module it wraps is compiled (ember.ddp)
        return compile_ddp(model, recompile)
    if has_fsdp_units(model):  # FSDP's hooks run natively around captured forwards (ember.fsdp)
        compiled = compile_fsdp(model, lambda fn: ember_capture.capture(fn, compiler, config, stats=stats), recompile)
        object.__setattr__(compiled, "_ember_record", record)
        return compiled
    if isinstance(model, torch.nn.Module):
        compiled = OptimizedModule(model, ember_capture.capture(model, compiler, config, stats=stats), recompile)
        object.__setattr__(compiled, "_ember_record", record)
        return compiled
    compiled = ember_capture.capture(model, compiler, config, stats=stats)
    if inspect.isfunction(model):
        functools.update_wrapper(compiled, model)
    compiled._ember_record = record
    return compiled


def _model_name(model: Any) -> str:
    """The name reports give the model: its `__qualname__`, else its class's. A user object's
    `__getattr__` may raise anything or return anything (Note [Introspecting user objects])."""
    return attr_or(model, "__qualname__", kind=str) or type(model).__qualname__


def compile_record(compiled: Any) -> CompileRecord:
    """What compiling did so far (Note [compile record]): each layer's passes per graph, with
    seconds and artifacts. `compiled` is what `ember.compile` returned::

        import torch, ember
        f = ember.compile(lambda x: torch.sin(x) * 2)
        f(torch.randn(8))
        print(ember.compile_record(f))  # capture, autograd and inductor passes of graph 0
    """
    record = attr_or(compiled, "_ember_record")
    if not isinstance(record, CompileRecord):
        raise InvalidArgument(f"ember.compile_record: {type(compiled).__name__} was not made by ember.compile")
    return record


def compile_report(compiled: Any = None) -> CompileReport:
    """What compiling `compiled` (what `ember.compile` returned) did so far, as one object: its
    frames (source, captured lines, breaks, guards, failed guards), and each graph at each stage
    with the pass that made it and its time (Note [compile report]); the HTML report
    (`options={"trace.enabled": True}`) shows the same. Without an argument: the most recent
    `ember.compile` that compiled a graph::

        import torch, ember
        f = ember.compile(lambda x: torch.cos(x) * 3)
        f(torch.randn(4))
        report = ember.compile_report(f)
        assert report.graphs[0].stage("captured").text and report.breaks == []
        assert ember.last_compile().function == report.function
    """
    if compiled is None:
        record = _LAST[0]() if _LAST[0] is not None else None
        if record is None:
            raise InvalidArgument("ember.compile_report: nothing has been compiled yet")
        return CompileReport.of(record)
    return CompileReport.of(compile_record(compiled))


def last_compile() -> CompileReport:
    """The report of the most recent `ember.compile` that compiled a graph (`compile_report()`)."""
    return compile_report()


# The record of the latest compile, while what ember.compile returned for it is alive.
_LAST: list[weakref.ref | None] = [None]


def _remember(record: CompileRecord, step: Any) -> None:
    _LAST[0] = weakref.ref(record)


def _prepare(backend: Any, fullgraph: Any, dynamic: Any, mode: Any, options: Any, disable: Any,
             record: CompileRecord | None = None):
    if not isinstance(disable, bool):
        raise InvalidArgument(f"ember.compile: disable={disable!r}; valid: True or False")
    if not (isinstance(backend, str) or callable(backend)):
        raise InvalidArgument(f"ember.compile: backend={backend!r} is neither a backend name nor a "
                              "callable (gm, example_inputs) -> callable")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    settings = make_settings(backend_name=name, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                             options=options)
    # Inside a DDP forward, each graph is split at DDP's gradient buckets (Note [DDP buckets]).
    compiler = split_at_ddp_buckets(build_compiler(backend, settings, record))
    if disable:
        return None
    if record is not None:
        record.backend = name
        record.listeners += [_remember, Progress(record.function or name, settings.progress)]
        if settings.trace["trace.enabled"]:
            trace.PROGRAM.add(record, settings.trace)  # Note [one report per run]
    config = ember_capture.CaptureConfig(fullgraph=settings.fullgraph,
                                         dynamic=settings.dynamic,
                                         logs=settings.logs & CAPTURE_LOGS,
                                         raise_internal=settings.raise_internal,
                                         hide_frames=not settings.debug)
    return compiler, config


def mark_dynamic(t: torch.Tensor, dim: int | list[int]) -> None:
    """Make dimension `dim` of `t` symbolic in the compiles that see `t` (issue #18), whatever
    `dynamic` says, so that other sizes there reuse the compiled code::

        import torch, ember
        f = ember.compile(lambda x: x * 2, backend="eager")
        x = torch.randn(8, 3)
        ember.mark_dynamic(x, 0)
        f(x)
        torch.testing.assert_close(f(torch.ones(5, 3)), torch.full((5, 3), 2.0))  # no recompile

    A backend that compiles static graphs only (Note [static graphs for ember_autograd] in
    backends.py) gets static graphs regardless.
    """
    try:
        ember_capture.mark_dynamic(t, dim)
    except (TypeError, IndexError) as exc:
        raise InvalidArgument(f"ember.mark_dynamic: {exc}") from exc


def mark_static(t: torch.Tensor, dim: int | list[int]) -> None:
    """Keep dimension `dim` of `t` specialized, even under `dynamic=True` or after its size
    changed between calls (a new size recompiles)."""
    try:
        ember_capture.mark_static(t, dim)
    except (TypeError, IndexError) as exc:
        raise InvalidArgument(f"ember.mark_static: {exc}") from exc


def disable(fn: Callable | None = None, recursive: bool = True) -> Any:
    """Never compile `fn` (and, with recursive=True, nothing it calls). Usable as a decorator."""
    if not isinstance(recursive, bool):
        raise InvalidArgument(f"ember.disable: recursive={recursive!r}; valid: True or False")
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if not callable(fn):
        raise InvalidArgument(f"ember.disable: expected a function, got {type(fn).__name__}")
    return ember_capture.disable(fn, recursive=recursive)


def reset() -> None:
    """Forget every compiled graph and cache entry held in memory (disk caches stay)."""
    ember_capture.reset()


@dataclasses.dataclass
class ExplainOutput(ember_capture.ExplainOutput):
    """Capture's report (graphs, breaks with their kinds, hints and lines), and with a backend,
    what compiling each graph did (Note [compile record])."""

    compile_record: CompileRecord | None = None

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.compile_record is None else f"{text}\n{self.compile_record}"


def explain(fn: Callable, *, backend: str | Callable | None = None,
            dynamic: bool | None = None) -> Callable[..., Any]:
    """`ember.explain(fn)(*args)` runs fn once and reports its graphs and graph breaks, and which
    inputs of each graph are dynamic (with `dynamic=True`, every size of the tensor arguments
    and every int argument; else those marked with `ember.mark_dynamic`); with `backend` (say
    "inductor"), fn runs a second time, compiled by it, and the report adds the compile record:
    each layer's passes per graph, with their times::

        import torch, ember
        x = torch.randn(8, 4)
        ember.mark_dynamic(x, 0)
        report = ember.explain(lambda x: x.view(x.shape[0] * 2, -1).sum(1))(x)
        assert report.dynamic_inputs == [["x.size(0) (s0)"]]
        print(report)  # ... Dynamic inputs of graph 1: x.size(0) (s0)
    """
    if not callable(fn):
        raise InvalidArgument(f"ember.explain: expected a callable, got {type(fn).__name__}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise InvalidArgument(f"ember.explain: dynamic={dynamic!r}; valid: None, True or False")

    def run(*args: Any, **kwargs: Any) -> Any:
        out = ember_capture.api.explain_with(fn, args, kwargs, ember_capture.CaptureConfig(dynamic=dynamic))
        record = None
        if backend is not None:
            compiled = compile(fn, backend=backend, dynamic=dynamic)
            compiled(*args, **kwargs)
            record = compile_record(compiled)
        fields = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
        return ExplainOutput(**fields, compile_record=record)

    return run
