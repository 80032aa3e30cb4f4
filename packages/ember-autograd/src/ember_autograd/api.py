"""`aot`: the layer's entry point. Reads top to bottom as its passes:
trace (joint or inference) -> verify -> partition -> verify -> compile forward -> (first
backward) compile backward."""
from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.fx

from ember_autograd.config import AotConfig
from ember_autograd.errors import AotError, AotTraceError, ErrorKind
from ember_autograd.joint import Signature, Traced, symbolic_inputs, trace_inference, trace_joint
from ember_autograd.partition import JointGraph, Partitioner, default_partition
from ember_autograd.runtime import InferenceRunner, RequiresGradChanged, TrainingRunner
from ember_autograd.unreached import prune_unreached, zero_like_meta
from ember_autograd.verify import verify_functional

Compiler = Callable[[torch.fx.GraphModule, list], Callable]


@dataclass
class CompiledArtifacts:
    """What one compilation produced, for inspection (facade debugging, benchmarks).

    mode: "inference" or "training". forward: the forward graph (in inference, the only one).
    backward, joint: training only. saved: names of the values the forward saves for the
    backward; saved_bytes: their total size. timings: seconds per pass ("trace", "partition",
    "fw_compile", and "bw_compile" after the first backward; "cache_load" instead of "trace" and
    "partition" when `AotConfig.lowering_cache` had them, and then `joint` is None)."""

    mode: str
    signature: Signature
    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule | None = None
    joint: torch.fx.GraphModule | None = None
    saved: list[str] = field(default_factory=list)
    saved_bytes: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [f"== {self.mode} forward ==", self.forward.print_readable(print_output=False)]
        if self.backward is not None:
            parts += [f"== backward (saved {len(self.saved)} values, {self.saved_bytes} bytes) ==",
                      self.backward.print_readable(print_output=False)]
        parts.append("timings: " + ", ".join(f"{k}={v * 1e3:.1f}ms" for k, v in self.timings.items()))
        return "\n".join(parts)


class AotFunction:
    """The callable `aot` returns: takes the same arguments as the captured graph. Compiles a
    training path (autograd.Function) when grad is enabled and a tensor input requires grad,
    else an inference path; each once per requires-grad pattern and autocast state, on first
    need."""

    def __init__(self, gm, fw_compiler, bw_compiler, decompositions, partition, config):
        self.gm = gm
        self.fw_compiler, self.bw_compiler = fw_compiler, bw_compiler
        self.decompositions, self.partition, self.config = decompositions, partition, config
        self._runners: dict = {}
        self._last_training: tuple | None = None  # (autocast state, TrainingRunner)
        self._warned_aliasing = False
        self.symbolic = symbolic_inputs(gm)  # Note [symbolic traces] (joint.py)
        self.inference: CompiledArtifacts | None = None
        self.training: CompiledArtifacts | None = None

    @property
    def artifacts(self) -> CompiledArtifacts | None:
        """The training artifacts if a training path was compiled, else the inference ones."""
        return self.training or self.inference

    def __call__(self, *args):
        try:
            # Note [speculative requires-grad key]: in grad mode, the training runner of the
            # last call first, which checks the key itself, for free.
            last = self._last_training if torch.is_grad_enabled() else None
            if last is not None and last[0] == _autocast_state():
                try:
                    return last[1](args, speculative=True)
                except RequiresGradChanged:
                    pass
            return self._runner(args)(args)
        except AotError as e:
            # The graphs treat inputs as independent: a call whose mutated input shares memory
            # with another input (a view and its base, passed across a graph break) runs the
            # captured graph eagerly, where the write is seen through both. So does a call that
            # would leave a saved value of a written input's history stale (Note [a written
            # input's saved history], runtime.py).
            if e.kind not in (ErrorKind.ALIASED_MUTATED_INPUT, ErrorKind.WRITTEN_SAVED_INPUT,
                              ErrorKind.STALE_INPUT_HISTORY):
                raise
            if not self._warned_aliasing:
                self._warned_aliasing = True
                warnings.warn(f"ember: {e.reason}; calls with such inputs run eagerly", stacklevel=2)
            return self.gm(*args)

    def _runner(self, args):
        # The requires-grad pattern of the inputs, in one C-level pass (a model's ~300 inputs
        # are read on every call): numbers have no `requires_grad` and read False.
        grads = tuple(map(getattr, args, _REQUIRES_GRAD, _FALSE)) if torch.is_grad_enabled() else ()
        needs_grad = True in grads
        key = (grads if needs_grad else None, _autocast_state())
        runner = self._runners.get(key)
        if runner is None:
            runner = self._compile_training(args) if needs_grad else self._compile_inference(args)
            self._runners[key] = runner
        self._last_training = (key[1], runner) if isinstance(runner, TrainingRunner) else None
        return runner

    def _compile_inference(self, args) -> InferenceRunner:
        timings: dict[str, float] = {}
        cache = self._cache()
        with _timed(timings, "cache_load"):
            cached = cache.load(self.gm, args, "inference", self.config) if cache is not None else None
        if cached is not None:
            traced = Traced(cached[1], cached[0])
        else:
            del timings["cache_load"]
            with _timed(timings, "trace"):
                traced = trace_inference(self.gm, args, self.decompositions)
            self._check(traced.gm)
            if cache is not None:
                cache.store(self.gm, args, "inference", self.config, (traced.signature, traced.gm))
        _mark_mutations(traced.gm, traced.signature)
        with _timed(timings, "fw_compile"):
            forward = self.fw_compiler(traced.gm, _example_inputs(traced.gm))
        self.inference = CompiledArtifacts("inference", traced.signature, traced.gm, timings=timings)
        return InferenceRunner(traced.signature, forward)

    def _compile_training(self, args) -> TrainingRunner:
        timings: dict[str, float] = {}
        cache = self._cache()
        with _timed(timings, "cache_load"):
            cached = cache.load(self.gm, args, "training", self.config) if cache is not None else None
        if cached is not None:
            (sig, part), joint_gm = cached, None
        else:
            del timings["cache_load"]
            with _timed(timings, "trace"):
                try:
                    traced = trace_joint(self.gm, args, self.decompositions)
                except AotTraceError as e:
                    # Note [inference-only graphs]: a graph that differentiates nothing but updates
                    # inputs that require grad in place (an optimizer step, under no_grad) is an
                    # inference graph whose mutations are replayed under no_grad.
                    if e.kind is not ErrorKind.INFERENCE_ONLY:
                        raise
                    return self._compile_inference(args)
            self._check(traced.gm)
            sig, joint_gm = traced.signature, traced.gm
            joint = JointGraph(traced.gm, len(sig.tensor_inputs) + len(sig.sym_inputs), sig.num_fw_outputs, self.config)
            with _timed(timings, "partition"):
                part = self.partition(joint)
            self._check(part.forward)
            self._check(part.backward)
            if cache is not None:
                cache.store(self.gm, args, "training", self.config, (sig, part))
        # Outputs from here on are saved for the backward, which is compiled (at the first
        # backward) for the layouts they arrive in: the forward's compiler may choose them.
        part.forward.graph.output_node().meta["ember_saved_outputs"] = sig.num_fw_outputs
        _mark_mutations(part.forward, sig)
        with _timed(timings, "fw_compile"):
            forward = self.fw_compiler(part.forward, _example_inputs(part.forward))
        part.backward.meta["ember_compiled_forward"] = forward  # Note [compiler metadata]
        self.training = CompiledArtifacts("training", sig, part.forward, part.backward, joint_gm,
                                          part.saved, part.saved_bytes, timings)
        backward = part.backward
        compile_backward = lambda real: self.bw_compiler(backward, _example_inputs(backward, real))  # noqa: E731
        compile_pruned = None if self.symbolic else self._pruned_compiler(backward)
        compiled_backward = None
        if self.symbolic:  # Note [symbolic backward]
            with _timed(timings, "bw_compile"):
                compiled_backward = self.bw_compiler(backward, _example_inputs(backward))
        requires_grad = tuple(getattr(args[i], "requires_grad", False) for i in sig.tensor_inputs + sig.sym_inputs)
        return TrainingRunner(sig, forward, compile_backward, timings, requires_grad,
                              len(getattr(part, "saved_symbols", ())), compiled_backward, compile_pruned,
                              backward)

    def _pruned_compiler(self, backward: torch.fx.GraphModule) -> Callable:
        """(real inputs, absent tangents) -> the backward specialized to them, compiled, with its
        zero inputs and kept results; None where it cannot be specialized (Note [unreached
        outputs], unreached.py)."""
        def compile_pruned(real: list, absent: tuple[bool, ...]):
            pruned = prune_unreached(backward, absent)
            if pruned is None:
                return None
            zeros = [zero_like_meta(z) for z in pruned.zeros]
            taken = [r for k, r in enumerate(real) if k not in pruned.dropped]
            compiled = self.bw_compiler(pruned.gm, _example_inputs(pruned.gm, [*taken, *zeros]))
            return compiled, pruned.zeros, pruned.kept, pruned.lost, pruned.dropped
        return compile_pruned

    def _cache(self):
        # a symbolic trace is tied to its SizeEnv (guards recorded now): never stored or loaded
        return None if self.symbolic else self.config.lowering_cache

    def _check(self, gm):
        if self.config.verify:
            verify_functional(gm)


def aot(gm: torch.fx.GraphModule, example_inputs: list, fw_compiler: Compiler,
        bw_compiler: Compiler | None = None, decompositions: Callable | dict | None = None,
        partition: Partitioner | None = None, *, config: AotConfig | None = None) -> AotFunction:
    """Lowers a torch-level FX graph to functional ATen graphs and compiles them.

    gm, example_inputs: per the backend protocol (ARCHITECTURE.md): parameters and buffers are
    placeholders; example inputs are real tensors or numbers (numbers are specialized).
    fw_compiler, bw_compiler: ``(gm, example_inputs) -> callable``; they receive a functional
    graph and *fake* example inputs (the placeholders' ``meta["val"]``); the callable is called
    ``f(*tensors)`` (or ``f(list)`` if it sets ``_boxed_call = True``) and returns a tuple.
    bw_compiler defaults to fw_compiler and runs at the first backward.
    decompositions: a decomposer, ``OpOverload -> fn | None``, asked for every op while tracing:
    the facade passes ``ember_prims.Decomposer()``, the one implementation of the rules that
    apply ember_prims' table (Note [applying the table]); a plain ``{OpOverload: fn}`` mapping
    is looked up as is.
    partition: `default_partition` (save what is needed) or `min_cut_partition`, or your own.

    Example::

        >>> import torch, torch.fx
        >>> from ember_autograd import aot
        >>> gm = torch.fx.symbolic_trace(lambda x, w: (torch.sin(x @ w),))
        >>> x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
        >>> f = aot(gm, [x, w], fw_compiler=lambda g, inputs: g)
        >>> f(x, w)[0].sum().backward()
        >>> torch.allclose(w.grad, x.t() @ torch.cos(x @ w).detach())
        True
    """
    fn = AotFunction(gm, fw_compiler, bw_compiler or fw_compiler, decompositions,
                     partition or default_partition, config or AotConfig())
    fn._runner(list(example_inputs))  # compile now for the current grad mode: errors surface here
    return fn


# Note [symbolic backward]: a symbolic graph's backward is compiled right after its forward, not
# at the first backward: the guards its compiler records (in the symbols' SizeEnv) must be known
# when capture builds the frame's guard, which it does when the backend returns. Its example
# inputs are the backward placeholders' values (the traced layouts of the saved tensors; a
# forward compiler that lays a saved value out differently must make the backward accept it).


def _mark_mutations(gm: torch.fx.GraphModule, sig: Signature) -> None:
    # Note [compiler metadata] (runtime.py): (output position, input position) of each new value
    # of a mutated input, for a compiled forward that writes them itself (`applies_mutations`).
    # Inputs written with autograd recording are copied by the runtime, outside the autograd
    # Function (Note [writes to inputs that require grad], joint.py): not listed.
    gm.graph.output_node().meta["ember_mutations"] = tuple(
        (sig.num_graph_outputs + m, k) for m, k in enumerate(sig.mutated_inputs) if k not in sig.grad_mutated)


# Note [speculative requires-grad key]: which graphs a call runs depends on which inputs require
# grad (and on grad mode and autocast). Reading `requires_grad` of a model's ~300 inputs on every
# call costs about 25 us, yet the C++ `autograd.Function.apply` reads them anyway, into
# `ctx.needs_input_grad`, before it calls the forward. So in grad mode a call goes straight to
# the training runner of the last call (same autocast state), whose forward compares
# `ctx.needs_input_grad` with the pattern it was traced for, first thing, and raises
# `RequiresGradChanged` on a difference, before anything ran or was recorded: the call then
# computes the key itself and picks (or compiles) the runner it names. Exact, since
# `needs_input_grad` is `requires_grad` of each tensor input (False for the int ones) and the
# specialized numbers are not tensors.
_REQUIRES_GRAD = itertools.repeat("requires_grad")
_FALSE = itertools.repeat(False)


def _autocast_state() -> tuple:
    # autocast sits above the tracer: its casts are baked into the graphs, so it keys the cache
    if not torch._C._is_any_autocast_enabled():
        return ()
    return tuple((device, torch.get_autocast_dtype(device)) for device in ("cpu", "cuda")
                 if torch.is_autocast_enabled(device))


def _example_inputs(gm: torch.fx.GraphModule, real: list | None = None) -> list:
    """The placeholders' traced values; given the values a graph is first called with, each
    takes their strides where they differ (same shape and dtype: a layout the forward's
    compiler chose for a saved tensor)."""
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    if real is None:
        return vals
    return [_with_layout(v, r) for v, r in zip(vals, real)]


def _with_layout(traced, real):
    if not (isinstance(traced, torch.Tensor) and isinstance(real, torch.Tensor)) or \
            traced.shape != real.shape or traced.dtype != real.dtype or traced.stride() == real.stride() \
            or getattr(traced, "fake_mode", None) is None:
        return traced
    with traced.fake_mode:
        return torch.empty_strided(real.shape, real.stride(), dtype=real.dtype, device=traced.device)


class _timed:
    def __init__(self, timings: dict, name: str):
        self.timings, self.name = timings, name

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.name] = time.perf_counter() - self.start
