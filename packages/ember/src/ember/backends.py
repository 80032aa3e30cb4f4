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
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

import ember_autograd
import ember_capture
import ember_inductor
import ember_prims
from ember import warm_start
from ember.cudagraphs import CUDAGraphs, Logger
from ember.checks import check_captured, check_outputs
from ember.errors import BackendUnavailable, InvalidArgument
from ember.fallback import Fallback, Site, site_of
from ember.introspect import attr_or
from ember.record import CompileRecord
from ember.settings import INDUCTOR_LOGS, INDUCTOR_TRACE, Settings, make_settings

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable]

# Note [static graphs for ember_autograd]: the ONE switch for dynamic shapes in the compositions
# built on ember_autograd (aot_eager, inductor, cudagraphs, any AotComposition). While it is False
# they declare that they compile static graphs only (`ember_symbolic_sizes`, the capability
# ember_capture reads through `takes_symbolic_sizes`), and capture keeps every graph it hands
# them static: a new shape recompiles (up to the recompile limit), whatever `dynamic` says. Set it
# to True once ember_autograd, ember_prims and ember_inductor compile graphs with symbolic sizes
# (issue #18's contract, /work/wt/_brief/DYNAMIC.md); backends that run the captured graph as it
# is ("eager", user callables) take symbolic graphs already.
AOT_TAKES_SYMBOLIC_SIZES = True


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


def build_compiler(backend: str | Callable, settings: Settings, record: CompileRecord | None = None,
                   from_capture: bool = True) -> CompilerFn:
    """The compiler that capture will call for each graph, with the facade's fallback around it;
    what it does is added to `record` (Note [compile record]). `from_capture=False`: the graphs
    come from elsewhere (torch's compiler through the entry points below, a hand-built graph), so
    the capture -> backend boundary check (interface 1) does not apply to them."""
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
    return _with_fallback(compiler, settings, record if record is not None else CompileRecord(), from_capture)


def _with_fallback(compiler: CompilerFn, settings: Settings, record: CompileRecord,
                   from_capture: bool = True) -> CompilerFn:
    # Note [one failure path] (fallback.py): a backend that cannot compile a graph must not lose
    # the user's program. Without fullgraph the graph runs as captured (eagerly, by torch), with
    # one warning at the user's line; with fullgraph=True the failure is raised. An
    # AotComposition is also handed the policy, for what it compiles later (backward, new grad
    # modes) and for the first calls of what it compiled.
    if isinstance(compiler, AotComposition) and settings.check:  # Note [checked boundaries]
        compiler = dataclasses.replace(compiler, config=_checked(compiler.config or ember_autograd.AotConfig()))
    if isinstance(compiler, AotComposition) and "aot_graphs" in settings.logs:
        compiler = dataclasses.replace(compiler, show_graphs=True)

    def compile_one(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        if settings.check and from_capture:
            check_captured(gm, example_inputs)
        graph = record.new_graph(gm)
        fallback = Fallback(settings.backend_name, settings.fullgraph, site_of(gm))
        start = time.perf_counter()
        record.begin(graph, "forward")  # Note [progress line]
        try:
            if isinstance(compiler, AotComposition):
                compiled = fallback.compile(lambda g, ex: compiler(g, ex, fallback=fallback, record=record, graph=graph),
                                            gm, example_inputs, "forward", boxed=False)
            else:
                compiled = fallback.compile(compiler, gm, example_inputs, "forward", boxed=False)
        finally:
            record.end()
        record.add(graph, "backend", f"compile ({settings.backend_name})", time.perf_counter() - start, compiled)
        return compiled

    setattr(compile_one, ember_capture.SYMBOLIC_SIZES_ATTR, ember_capture.takes_symbolic_sizes(compiler))
    return compile_one


@dataclasses.dataclass(frozen=True)
class AotComposition:
    """A backend made of ember_autograd's lowering and compilers for its functional graphs.

    `fw_compiler` and `bw_compiler` (default: fw_compiler) follow the backend protocol and
    receive ATen- (or, with ember_prims' decompositions, prims-) level graphs. Given to
    `ember.compile` as the backend, each of their failures, when compiling or at the first call,
    reruns that graph with torch (Note [one failure path])::

        import warnings
        import torch, ember
        from ember.backends import AotComposition

        def broken_backward(gm, example_inputs):
            raise RuntimeError("no backward today")

        f = ember.compile(torch.sin, backend=AotComposition(lambda gm, ex: gm.forward, broken_backward))
        x = torch.randn(3, requires_grad=True)
        with warnings.catch_warnings(record=True):  # "... failed at the backward compile ..."
            f(x).sum().backward()
        torch.testing.assert_close(x.grad, torch.cos(x))
    """

    fw_compiler: CompilerFn
    bw_compiler: CompilerFn | None = None
    decompositions: Any = None  # a callable () -> {OpOverload: fn}, called per graph
    config: Any = None  # ember_autograd.AotConfig
    partition: Any = None  # ember_autograd's default_partition unless given
    name: str = "aot"  # how warnings and errors name this backend
    cudagraphs: CUDAGraphs | None = None  # the guarded forward and backward replay as CUDA graphs
    show_graphs: bool = False  # print each forward and backward graph to stderr (EMBER_LOGS=aot_graphs)

    @property
    def __name__(self) -> str:
        return self.name

    @property
    def ember_symbolic_sizes(self) -> bool:
        """Whether this composition compiles graphs with symbolic sizes (Note [static graphs for
        ember_autograd]); never with CUDA graphs, which replay recorded shapes."""
        return AOT_TAKES_SYMBOLIC_SIZES and self.cudagraphs is None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list, fallback: Fallback | None = None,
                 record: CompileRecord | None = None, graph: int = 0) -> Callable:
        if fallback is None:  # called through the plain backend protocol (torch.compile)
            fallback = Fallback(self.name, False, site_of(gm))
        record = record if record is not None else CompileRecord()

        def compile_graph(compiler: CompilerFn, g: torch.fx.GraphModule, ex: list, stage: str) -> Callable:
            start = time.perf_counter()
            record.begin(graph, stage)  # the backward compiles at the first backward, alone
            try:
                compiled = fallback.compile(compiler, g, ex, stage, boxed=True)
            finally:
                record.end()
            if self.config is not None and self.config.verify:  # Note [checked boundaries]
                compiled = check_outputs(g, compiled)
            record.add(graph, "autograd", f"{stage}_compile", time.perf_counter() - start, g)
            inner = attr_or(compiled, "compiled_graph")  # the inductor's, with its passes
            if isinstance(attr_or(inner, "timings"), dict):
                record.add_timings(graph, "inductor", inner.timings, inner)
            return compiled

        fw, bw = self.fw_compiler, self.bw_compiler or self.fw_compiler
        if self.show_graphs:
            fw, bw = _shown(fw, "forward", fallback.site), _shown(bw, "backward", fallback.site)
        first_step = len(record.steps)
        fw_compiler = lambda g, ex: compile_graph(fw, g, ex, "forward")  # noqa: E731
        bw_compiler = lambda g, ex: compile_graph(bw, g, ex, "backward")  # noqa: E731
        if self.cudagraphs is not None:  # outside the fallback: what it falls back to replays too
            fw_compiler, bw_compiler = self.cudagraphs(gm, example_inputs, fw_compiler, bw_compiler)
        # Note [attention kernel choice under fake tensors] (ember_prims/attention.py)
        traced = ember_prims.with_fused_attention(gm) if self.decompositions else gm
        compiled = ember_autograd.aot(
            traced, example_inputs,
            fw_compiler=fw_compiler,
            bw_compiler=bw_compiler,
            decompositions=self.decompositions() if self.decompositions else None,
            partition=self.partition, config=self.config)
        artifacts = compiled.artifacts
        if artifacts is not None:
            record.add_timings(graph, "autograd", {k: v for k, v in artifacts.timings.items()
                                                   if k in ("trace", "partition", "cache_load")}, artifacts,
                               at=first_step)
        return fallback.every_call(compiled, gm.forward)


def _shown(compiler: CompilerFn, stage: str, site: Site | None) -> CompilerFn:
    """`compiler`, printing each graph it is given first (the aot_graphs log)."""
    def show_then_compile(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        where = f" of {site}" if site is not None else ""
        print(f"[ember:aot_graphs] {stage} graph{where}:\n{gm.print_readable(print_output=False)}",
              file=sys.stderr)
        return compiler(gm, example_inputs)

    return show_then_compile


# --- the named backends -------------------------------------------------------------------------

def _eager_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


_aot_eager_compiler = AotComposition(_eager_compiler, name="aot_eager")


def _checked(config: Any) -> Any:
    return dataclasses.replace(config, verify=True)


def _inductor_options(settings: Settings) -> Any:
    given = dict(settings.options)
    given.setdefault("cache_dir", settings.cache_dir)
    # The trace options given to this compile also ask the inductor for its own trace folders
    # (one per graph, next to the compile report; trace.py); EMBER_TRACE asks for the report only.
    given.update({name: settings.trace[name] for name in settings.trace["given"] if name in INDUCTOR_TRACE})
    if settings.check:  # Note [checked boundaries]
        given["debug_verify"] = True
    try:
        return ember_inductor.InductorOptions.from_dict(given, logs=settings.logs & INDUCTOR_LOGS)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"ember.compile: {exc}") from exc


def _inductor_build(settings: Settings) -> CompilerFn:
    options = _inductor_options(settings)
    config = _AOT_CONFIG
    compile_graph = ember_inductor.compile_graph
    if settings.warm_start:  # Note [warm start]: in the inductor's cache_dir (EMBER_CACHE_DIR or the option)
        cache_dir = options.resolved_cache_dir
        compile_graph = warm_start.inductor_compile(cache_dir)
        label = "inductor, torch's random ops" if options.fallback_random else "inductor"  # the decompositions
        config = dataclasses.replace(config, lowering_cache=warm_start.LoweringCache(cache_dir, label))

    def fw_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        compiled = compile_graph(gm, example_inputs, options)

        # CompiledGraph takes its inputs as one list; ember_autograd calls such a callable
        # with the list itself when it is marked boxed. A backward's list (the saved
        # activations) is handed over: each is freed after its last use in the graph (Note
        # [inputs freed early] in ember_inductor/wrapper.py); a forward's list is left as it is
        # (ember_autograd reads its inputs after the call).
        if "ember_compiled_forward" in gm.meta:
            def run(args: list) -> Any:
                return compiled.run_owned(args)
        else:
            def run(args: list) -> Any:
                return compiled(args)

        run._boxed_call = True
        run.compiled_graph = compiled  # for inspection: kernels, source, pass timings
        return run

    decompositions = _without_random if options.fallback_random else ember_prims.Decomposer
    return AotComposition(fw_compiler, decompositions=decompositions, config=config, name="inductor",
                          cudagraphs=_cudagraphs(settings, options.cudagraphs))


def _without_random() -> "ember_prims.Decomposer":
    """options={"fallback_random": True}: the random ops stay ATen ops, which the inductor calls
    eagerly in program order, so they draw torch's generator's numbers, as eager does."""
    table = ember_prims.table()
    for op in ember_prims.RANDOM_OPS:
        table.pop(op, None)
    return ember_prims.Decomposer(table)


def _cudagraphs(settings: Settings, wanted: bool) -> CUDAGraphs | None:
    """CUDA graphs for mode="reduce-overhead" and the cudagraphs backend (Note [cudagraph replay]
    in cudagraphs.py); without a GPU, none, and the mode says so once."""
    if not wanted:
        return None
    if not torch.cuda.is_available():
        warnings.warn("ember: CUDA graphs (mode='reduce-overhead') need a CUDA device; this machine "
                      "has none, so compiled graphs run without them", stacklevel=6)
        return None
    return CUDAGraphs(Logger("cudagraphs" in settings.logs))


# The prims that only re-index one input: saved as their input, re-taken in the backward.
_AOT_CONFIG = ember_autograd.AotConfig(view_ops=frozenset(
    f"ember_prims::{name}" for name, info in ember_prims.PRIMS.items()
    if info.category == "view" and name not in ("cat", "pad")), pointwise_ops=frozenset(
    # recomputable in the backward from saved values (Note [pointwise values recomputed from
    # saved ones], ember_autograd/partition.py): elementwise prims, dtype conversions, constants
    f"ember_prims::{name}" for name, info in ember_prims.PRIMS.items()
    if info.category.startswith("elementwise_") and name not in ("clone", "device_put")
    or name in ("full", "iota")))


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
_add(BackendEntry("cudagraphs", build=lambda s: AotComposition(_eager_compiler, name="cudagraphs",
                                                                cudagraphs=_cudagraphs(s, True)),
                  unavailable=_cudagraphs_unavailable,
                  doc="aot_eager whose forward and backward graphs replay as CUDA graphs."))


# --- entry points for torch.compile (pyproject: torch_dynamo_backends) ---------------------------
# Each graph torch's compiler hands over goes through the path of `ember.compile`: settings read
# from the environment (EMBER_LOGS, EMBER_CHECK, ...) and the fallback (Note [one failure
# path]). A graph ember cannot compile, such as one with symbolic sizes (torch's compiler makes
# a graph dynamic after a shape changes; ember specializes shapes), runs as captured, with one
# warning; passing dynamic=False to torch's compiler with backend "ember" keeps every graph static.

def _entry_point(name: str, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    settings = make_settings(backend_name=name, fullgraph=False, dynamic=None, mode=None, options=None)
    return build_compiler(name, settings, from_capture=False)(gm, example_inputs)


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `eager` composition, registered for torch's compiler as backend "ember_eager"."""
    return _entry_point("eager", gm, example_inputs)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `aot_eager` composition, registered for torch's compiler as backend "ember_aot_eager"."""
    return _entry_point("aot_eager", gm, example_inputs)


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The `inductor` composition, registered for torch's compiler as backends "ember" and
    "ember_inductor" (torch's compiler called with backend="ember")."""
    return _entry_point("inductor", gm, example_inputs)
