"""Backends: what receives each captured graph.

A backend is the torch.compile protocol, `backend(gm, example_inputs) -> callable`. Named
backends live in one registry; each entry builds its compiler from validated Settings, so
options are checked when `ember.compile` is called, not at the first call of the result.

The compositions (the brief: "composition lives in the facade"):
  eager       the captured graph, run by torch as it is (tests capture alone)
  aot_eager   ember_autograd lowering (functional forward/backward ATen graphs), run by torch
  inductor    ember_autograd + ember_prims decompositions + ember_inductor kernels
  cudagraphs  aot_eager whose forward and backward replay as CUDA graphs
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch

import ember_autograd
import ember_inductor
import ember_prims
from ember.cudagraphs import Logger, cudagraph_compilers, graph_label, static_positions
from ember.errors import BackendCompilerFailed, BackendUnavailable, InvalidArgument
from ember.settings import INDUCTOR_LOGS, Settings, make_settings

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable]


@dataclasses.dataclass(frozen=True)
class BackendEntry:
    name: str
    build: Callable[[Settings], CompilerFn]  # validated settings -> compiler
    takes_options: bool = False
    unavailable: Callable[[], str | None] = lambda: None  # the reason it cannot run here, or None
    doc: str = ""


_REGISTRY: dict[str, BackendEntry] = {}


def _add(entry: BackendEntry) -> BackendEntry:
    _REGISTRY[entry.name] = entry
    return entry


def register_backend(name: str, compiler_fn: CompilerFn | None = None):
    """Register `compiler_fn(gm, example_inputs) -> callable` under `name`.

    Usable as a decorator::

        @ember.register_backend("my_backend")
        def my_backend(gm, example_inputs):
            return gm.forward
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"register_backend: name must be a non-empty string, got {name!r}")

    def add(fn: CompilerFn) -> CompilerFn:
        if not callable(fn):
            raise InvalidArgument(f"register_backend({name!r}): {fn!r} is not callable")
        if name in _REGISTRY:
            raise InvalidArgument(f"register_backend: a backend named {name!r} exists already")
        _add(BackendEntry(name, build=lambda settings: fn, doc=(fn.__doc__ or "").strip()))
        return fn

    return add if compiler_fn is None else add(compiler_fn)


def list_backends() -> list[str]:
    """The names of the registered backends that can run on this machine."""
    return sorted(n for n, e in _REGISTRY.items() if e.unavailable() is None)


def lookup(name: str) -> BackendEntry:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise InvalidArgument(f"ember.compile: unknown backend {name!r}; valid backends: "
                              f"{sorted(_REGISTRY)}, or a callable (gm, example_inputs) -> callable")
    reason = entry.unavailable()
    if reason is not None:
        raise BackendUnavailable(f"ember.compile: backend {name!r} is not available: {reason}")
    return entry


def build_compiler(backend: str | Callable, settings: Settings) -> CompilerFn:
    """The compiler that capture will call for each graph, with the facade's fallback around it."""
    if callable(backend):
        if settings.options:
            raise InvalidArgument("ember.compile: options and mode apply to named backends that take "
                                  "them (inductor); a custom backend callable takes none")
        compiler = backend
    else:
        entry = lookup(backend)
        if settings.options and not entry.takes_options:
            raise InvalidArgument(f"ember.compile: backend {backend!r} takes no options or mode; "
                                  f"backends that do: {sorted(n for n, e in _REGISTRY.items() if e.takes_options)}")
        compiler = entry.build(settings)
    return _with_fallback(compiler, settings)


def _with_fallback(compiler: CompilerFn, settings: Settings) -> CompilerFn:
    # Note [backend fallback]: a backend that cannot compile a graph must not lose the user's
    # program. Without fullgraph the graph runs as captured (eagerly, by torch), with one warning
    # naming the backend and the reason; with fullgraph=True the failure is raised.
    def compile_one(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        try:
            return compiler(gm, example_inputs)
        except Exception as exc:  # noqa: BLE001 - any backend failure is reported, never hidden
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if settings.fullgraph:
                raise BackendCompilerFailed(
                    f"backend {settings.backend_name!r} failed to compile a graph: {reason}") from exc
            warnings.warn(f"ember: backend {settings.backend_name!r} could not compile a graph "
                          f"({reason}); that graph runs eagerly", stacklevel=2)
            return gm.forward

    return compile_one


# --- the named backends -------------------------------------------------------------------------

def _eager_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


def _aot_eager_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return ember_autograd.aot(gm, example_inputs, fw_compiler=_eager_compiler)


def _inductor_options(settings: Settings) -> Any:
    given = dict(settings.options)
    given.setdefault("cache_dir", settings.cache_dir)
    try:
        return ember_inductor.InductorOptions.from_dict(given, logs=settings.logs & INDUCTOR_LOGS)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"ember.compile: {exc}") from exc


def _inductor_build(settings: Settings) -> CompilerFn:
    options = _inductor_options(settings)

    def fw_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        compiled = ember_inductor.compile_graph(gm, example_inputs, options)

        # CompiledGraph takes its inputs as one list; ember_autograd calls such a callable
        # with the list itself when it is marked boxed (and may then free inputs early).
        def run(args: list) -> Any:
            return compiled(args)

        run._boxed_call = True
        run.compiled_graph = compiled  # for inspection: kernels, source, pass timings
        return run

    return _aot_compiler(settings, fw_compiler, options.cudagraphs,
                         dict(decompositions=ember_prims.table(), config=_AOT_CONFIG))


def _aot_compiler(settings: Settings, inner: CompilerFn, cudagraphs: bool, aot_kwargs: dict) -> CompilerFn:
    """ember_autograd.aot over `inner`; with cudagraphs, its forward and backward replay as CUDA
    graphs (Note [cudagraph replay] in cudagraphs.py): mode="reduce-overhead", the cudagraphs
    backend. Without a GPU, the graphs run as compiled and the mode says so once."""
    if cudagraphs and not torch.cuda.is_available():
        warnings.warn("ember: CUDA graphs (mode='reduce-overhead') need a CUDA device; this machine "
                      "has none, so compiled graphs run without them", stacklevel=6)
        cudagraphs = False
    log = Logger("cudagraphs" in settings.logs)

    def compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        fw = bw = inner
        if cudagraphs:
            fw, bw = cudagraph_compilers(inner, static_positions(gm, example_inputs), log, graph_label(gm))
        return ember_autograd.aot(gm, example_inputs, fw_compiler=fw, bw_compiler=bw, **aot_kwargs)

    return compiler


# The prims that only re-index one input: saved as their input, re-taken in the backward.
_AOT_CONFIG = ember_autograd.AotConfig(view_ops=frozenset(
    f"ember_prims::{name}" for name, info in ember_prims.PRIMS.items()
    if info.category == "view" and name not in ("cat", "pad")))


def _missing(module: Any, *names: str) -> str | None:
    absent = [n for n in names if not hasattr(module, n)]
    if absent:
        return f"{module.__name__} does not provide {', '.join(absent)} yet"
    return None


def _cudagraphs_unavailable() -> str | None:
    if not torch.cuda.is_available():
        return "it replays CUDA graphs and this machine has no CUDA device"
    return _missing(ember_autograd, "aot")


_add(BackendEntry("eager", build=lambda s: _eager_compiler,
                  doc="Runs each captured graph with torch, unchanged: tests capture alone."))
_add(BackendEntry("aot_eager", build=lambda s: _aot_eager_compiler,
                  unavailable=lambda: _missing(ember_autograd, "aot"),
                  doc="ember_autograd's functional forward/backward graphs, run by torch."))
_add(BackendEntry("inductor", build=_inductor_build, takes_options=True,
                  unavailable=lambda: (_missing(ember_autograd, "aot") or _missing(ember_prims, "table")
                                       or _missing(ember_inductor, "compile_graph", "InductorOptions")),
                  doc="ember_autograd + ember_prims decompositions + ember_inductor kernels "
                      "(C++/OpenMP for CPU tensors, Triton for CUDA tensors)."))
_add(BackendEntry("cudagraphs", build=lambda s: _aot_compiler(s, _eager_compiler, True, {}),
                  unavailable=_cudagraphs_unavailable,
                  doc="aot_eager whose forward and backward graphs replay as CUDA graphs."))


# --- entry points for torch.compile (pyproject: torch_dynamo_backends) ---------------------------

def _default_settings(name: str) -> Settings:

    return make_settings(backend_name=name, fullgraph=False, dynamic=None, mode=None, options=None)


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `eager` composition, registered for torch's compiler as backend "ember_eager"."""
    return _eager_compiler(gm, example_inputs)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `aot_eager` composition, registered for torch's compiler as backend "ember_aot_eager"."""
    return lookup("aot_eager").build(_default_settings("aot_eager"))(gm, example_inputs)


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `inductor` composition, registered for torch's compiler as backend "ember_inductor"."""
    return lookup("inductor").build(_default_settings("inductor"))(gm, example_inputs)
