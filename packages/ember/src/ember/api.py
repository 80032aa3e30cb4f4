"""The user-facing verbs: compile, disable, reset, explain."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

import ember_capture
from ember.backends import build_compiler
from ember.errors import InvalidArgument
from ember.module import OptimizedModule
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
    """
    if model is None:
        # Decorator with arguments: validate now, so a typo fails at the decorator line.
        _prepare(backend, fullgraph, dynamic, mode, options, disable)
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not callable(model):
        raise InvalidArgument(f"ember.compile: expected a function, method or nn.Module, "
                              f"got {type(model).__name__}")
    prepared = _prepare(backend, fullgraph, dynamic, mode, options, disable)
    if prepared is None:
        return model
    compiler, config = prepared
    if isinstance(model, torch.nn.Module):
        # Pickling or deep-copying the wrapper compiles the copied module again with these arguments.
        recompile = functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                      mode=mode, options=options)
        return OptimizedModule(model, ember_capture.capture(model, compiler, config), recompile)
    compiled = ember_capture.capture(model, compiler, config)
    if inspect.isfunction(model):
        functools.update_wrapper(compiled, model)
    return compiled


def _prepare(backend: Any, fullgraph: Any, dynamic: Any, mode: Any, options: Any, disable: Any):
    if not isinstance(disable, bool):
        raise InvalidArgument(f"ember.compile: disable={disable!r}; valid: True or False")
    if not (isinstance(backend, str) or callable(backend)):
        raise InvalidArgument(f"ember.compile: backend={backend!r} is neither a backend name nor a "
                              "callable (gm, example_inputs) -> callable")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    settings = make_settings(backend_name=name, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                             options=options)
    compiler = build_compiler(backend, settings)
    if disable:
        return None
    config = ember_capture.CaptureConfig(fullgraph=settings.fullgraph,
                                         dynamic=settings.dynamic,
                                         logs=settings.logs & CAPTURE_LOGS,
                                         raise_internal=settings.raise_internal,
                                         hide_frames=not settings.debug)
    return compiler, config


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


def explain(fn: Callable) -> Callable[..., Any]:
    """`ember.explain(fn)(*args)` runs fn once and reports its graphs and graph breaks."""
    if not callable(fn):
        raise InvalidArgument(f"ember.explain: expected a callable, got {type(fn).__name__}")

    def run(*args: Any, **kwargs: Any) -> Any:
        return ember_capture.explain(fn, *args, **kwargs)

    return run
