"""compile_graph: the inductor's pipeline, one named pass per step."""
from __future__ import annotations

import json
import logging
import operator
import os
import sys
import time
from contextlib import contextmanager

import torch
import torch.fx as fx

from ember_inductor.kernel import format_kernel

from ember_inductor.codegen.common import KernelSource, choose_backend, get_backend
from ember_inductor.diagram import fused_graph, to_dot, to_svg
from ember_inductor.finalize import finalize
from ember_inductor.horizontal import plan_combos
from ember_inductor.inplace import confirm_takeovers, plan_in_place, rewrite_spec
from ember_inductor.kernel_analysis import narrow_indices
from ember_inductor.ir import InputBuffer
from ember_inductor.layout import plan_layouts
from ember_inductor.lowering import lower_graph
from ember_inductor.passes import (
    bias_into_matmul, fold_permutes, products_viewed_out, scatter_into_sum, transpose_matmul_outputs,
)
from ember_inductor.options import InductorOptions
from ember_inductor.planner import plan_buffers
from ember_inductor.scheduler import KernelGroup, fuse
from ember_inductor.shape_padding import pad_matmul_shapes
from ember_inductor.templates import use_gemm_templates
from ember_inductor.verify import verify_graph
from ember_inductor.wrapper import generate_wrapper

log = logging.getLogger("ember_inductor")


class CompiledGraph:
    """A compiled prims graph: call it on real tensors (a list or tuple, in placeholder order).

    Inspect `source` (the Python wrapper), `kernels` (each KernelSource: `.source`, `.kernel`),
    `ir` (the lowered loop-level IR), `timings` (seconds per pass), `fallbacks` (ops run
    eagerly, with the reason) and `schedule` (each kernel and extern call with what it reads and
    writes, the `DiagramStep`s `diagram.to_svg(compiled.schedule)` draws).
    """

    schedule: list = []

    def __init__(self, fn, source, kernels, ir, timings, fallbacks, input_layouts, backend):
        self._fn = fn
        self.source = source
        self.kernels: list[KernelSource] = kernels
        self.ir = ir
        self.timings = timings
        self.fallbacks = fallbacks
        self.backend = backend
        # (sizes, strides, must start its storage) per tensor input, None for scalars (Note [input offsets])
        self._layouts = input_layouts
        # positions of the mutated inputs the kernels write in place, returned as themselves
        # (Note [mutated inputs written in place])
        self.written_in_place: list[int] = []
        # the backend of each of `kernels` ("cpp" for the CPU kernels of a GPU graph: Note [host scalars])
        self.kernel_backends: list[str] = [backend] * len(kernels)
        self._as_compiled = _LayoutCheck.of(input_layouts)

    def __call__(self, inputs):
        return self.run_owned(list(inputs))  # a copy: the caller's list is left as it was

    def run_owned(self, inputs: list):
        """Call with a list the caller hands over: it is emptied during the call, so each input
        is freed after its last use in the graph, unless the caller holds it elsewhere (Note
        [inputs freed early] in wrapper.py). A backward graph's saved activations take this
        path; `__call__` leaves the caller's list as it was."""
        if self._as_compiled is None or not self._as_compiled(inputs):
            for i, lay in enumerate(self._layouts):
                t = inputs[i]
                if lay is not None and (t.shape != lay[0] or t.stride() != lay[1]
                                        or (lay[2] and t.storage_offset())):
                    inputs[i] = _relayout(t, lay)
        return self._fn(inputs)

    @property
    def kernel_sources(self) -> str:
        return "\n".join(f"// {k.name}\n{k.source}" for k in self.kernels)

    def __repr__(self):
        return f"CompiledGraph({len(self.kernels)} kernels, backend={self.backend})"


_SHAPE, _STRIDE, _OFFSET = operator.attrgetter("shape"), torch.Tensor.stride, torch.Tensor.storage_offset


class _LayoutCheck:
    """Note [layout check in one pass]: every call checks that each tensor input has the sizes
    and strides the graph was compiled for (and, for Triton, starts its storage: Note [input
    offsets]). A model passes hundreds of parameters: checked one by one in Python that was
    ~1 µs each (0.2-0.3 ms of a resnet50 or BERT call on an H100's host). Here the common case,
    every input as compiled, is three C-level passes (`map` of the tensor getters, list
    equality); anything else (or a layout with non-integer sizes) takes the per-input loop,
    which copies what does not fit."""

    def __init__(self, positions, shapes, strides, starts):
        self.get = operator.itemgetter(*positions)
        self.single = len(positions) == 1
        self.shapes, self.strides = shapes, strides
        self.starts = operator.itemgetter(*starts) if starts else None
        self.single_start = len(starts) == 1

    @classmethod
    def of(cls, layouts) -> _LayoutCheck | None:
        positions = [i for i, lay in enumerate(layouts) if lay is not None]
        if not positions or not all(type(v) is int for i in positions for v in (*layouts[i][0], *layouts[i][1])):
            return None
        return cls(positions, [tuple(layouts[i][0]) for i in positions], [tuple(layouts[i][1]) for i in positions],
                   [k for k, i in enumerate(positions) if layouts[i][2]])

    def __call__(self, inputs) -> bool:
        """True when every tensor input is laid out as compiled (nothing to copy)."""
        try:
            ts = self.get(inputs)
            if self.single:
                ts = (ts,)
            if list(map(_STRIDE, ts)) != self.strides or list(map(_SHAPE, ts)) != self.shapes:
                return False
            if self.starts is None:
                return True
            starts = self.starts(ts)
            return not (starts.storage_offset() if self.single_start else any(map(_OFFSET, starts)))
        except (TypeError, IndexError):  # not a tensor where one was compiled: the loop says why
            return False


def _relayout(t: torch.Tensor, layout):
    """A copy of `t` in the layout the graph was compiled for, at the start of its storage.

    Note [input offsets]: Triton kernels are handed the start of each tensor's storage
    (`_storage_base` in triton_launch.py) and index an input from there, so an input that does
    not start its storage (x[8:16]: the same shape and strides as x[0:8]) would be read at the
    wrong place; a graph with Triton kernels copies such an input first (`layout[2]`). The C++
    kernels take the tensor's own data pointer and need no copy. A mutated input copied here
    gets its new value through the runtime's write-back (its memory is not the value the graph
    returns)."""
    sizes, strides, _ = layout
    if tuple(t.shape) != tuple(sizes):
        raise ValueError(f"input of shape {tuple(t.shape)} where the graph was compiled for {tuple(sizes)}")
    out = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


@contextmanager
def _timed(timings: dict, name: str):
    start = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start


def _device_of(gm, example_inputs) -> torch.device:
    """The graph's device: an accelerator's when any tensor is on one (0-d CPU tensors, an
    optimizer's step counts, may join a CUDA graph: Note [0-d CPU operands] in ember_prims)."""
    first = None
    values = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    values += [n.meta.get("val") for n in gm.graph.nodes]
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.device.type != "cpu":
                return v.device
            first = first or v.device
    return first or torch.device("cpu")


def build_launchers(sources: list, backends: list[str], options) -> dict:
    """kernel name -> its launcher, each kernel built by its own backend (a GPU graph's CPU
    kernels are C++: Note [host scalars]); one build call per backend, so each compiles its
    kernels in parallel. Also what a warm start calls (artifacts.py)."""
    launchers = {}
    for b in dict.fromkeys(backends):
        mine = [src for src, kb in zip(sources, backends) if kb == b]
        launchers.update(zip((src.name for src in mine), get_backend(b).build(mine, options)))
    return launchers


def _kernel_backends(planned, backend_name: str, device: torch.device) -> list[str]:
    """The backend of each kernel: the graph's, but the CPU's for a kernel over CPU values in
    a graph of another device (the scalar arithmetic on an optimizer's CPU step counts)."""
    out = []
    for ps in planned:
        if isinstance(ps.step, KernelGroup):
            own = ps.step.nodes[0].device
            out.append(backend_name if own.type == device.type else choose_backend("auto", own))
    return out


def compile_graph(gm: fx.GraphModule, example_inputs, options=None) -> CompiledGraph:
    """Compile a prims-level FX graph into fused kernels; see the package README for an example.

    `options`: an InductorOptions, a dict for InductorOptions.from_dict, or None.
    """
    if not isinstance(options, InductorOptions):
        options = InductorOptions.from_dict(options or {})
    t: dict[str, float] = {}
    if options.debug_verify:
        with _timed(t, "verify"):  # the input spec: prims ops, meta["val"] everywhere, no mutation
            verify_graph(gm)
    device = _device_of(gm, example_inputs)
    backend_name = choose_backend(options.backend, device)
    backend = get_backend(backend_name)
    if device.type not in backend.device_types:  # its kernels would read memory they cannot address
        raise ValueError(f"ember_inductor: the {backend_name} backend runs on "
                         f"{' or '.join(backend.device_types)} tensors, not {device.type} ones")
    with _timed(t, "rewrite"):  # graph-level rewrites of matrix products, before their lowering
        rewritten = rewrite(gm, options, backend_name)
    with _timed(t, "plan_layouts"):  # before lowering: every buffer it makes consults the plan
        layout = plan_layouts(rewritten, options.conv_layout, options.cudagraphs)
    with _timed(t, "lower"):  # prims -> index functions: each op's meaning lives in one table
        lowered = lower_graph(rewritten, example_inputs, options, layout, split_reductions=backend_name == "triton")
    with _timed(t, "fuse"):  # sees whole index functions, so producers inline into consumers
        steps = fuse(lowered.steps, options.max_fusion_size)
    with _timed(t, "plan_buffers"):  # after fusion: only kernel boundaries need memory
        input_names = {b.name for b in lowered.inputs if isinstance(b, InputBuffer)}
        input_names |= {c.name for c in lowered.constants}
        planned = plan_buffers(steps, lowered.outputs, input_names)
    kernel_backends = _kernel_backends(planned, backend_name, device)
    with _timed(t, "render"):  # kernel descriptions -> backend source text
        specs, names = [], {}
        for ps in planned:
            if isinstance(ps.step, KernelGroup):
                name = f"kernel{len(specs)}"
                names[id(ps.step)] = name
                on_device = kernel_backends[len(specs)] == "triton" and ps.step.nodes[0].device.type != "cpu"
                specs.append(finalize(ps.step, ps.live_out, name, lowered.hints,
                                      lowered.host_scalars if on_device else frozenset()))
        # Triton: 32-bit indices for symbolic kernels, under guards (Note [32-bit indices of symbolic kernels])
        triton_at = [i for i, b in enumerate(kernel_backends) if b == "triton"]
        for i, narrowed in zip(triton_at, narrow_indices([specs[i] for i in triton_at], lowered.env)):
            specs[i] = narrowed
        # mutated inputs whose kernel may write them in place (Note [mutated inputs written in place])
        in_place = plan_in_place(lowered, planned, dict(zip(names, specs)), _mutations(gm))
        if in_place:
            specs = [rewrite_spec(s, in_place) for s in specs]
            for ps in planned:
                for a in ps.allocs:
                    a.alias = in_place.get(a.name)
        specs = confirm_takeovers(planned, names, specs)
        sources = [get_backend(b).render(s, options) for s, b in zip(specs, kernel_backends)]
        # independent Triton kernels launched together (Note [horizontal fusion])
        backend_of, by_name = {s.name: b for s, b in zip(sources, kernel_backends)}, {s.name: s for s in sources}
        combos = plan_combos(planned, names, by_name,
                             lambda s: get_backend(backend_of[s.name]).combinable(s)) if options.combo_kernels else []
        combo_sources = [get_backend(backend_of[c.at]).render_combo(f"combo{i}", [by_name[n] for n in c.parts])
                         for i, c in enumerate(combos)]
        in_combo = {n for c in combos for n in c.parts}
        launched = [(s, b) for s, b in zip(sources, kernel_backends) if s.name not in in_combo]
        launched += [(src, backend_of[c.at]) for src, c in zip(combo_sources, combos)]
    with _timed(t, "build"):  # compile (parallel, cached on disk) and load
        launchers = build_launchers([src for src, _ in launched], [b for _, b in launched], options)
        # Note [host scalars]: a scalar argument is the 0-d CPU buffer's value, read at the launch
        call_args = {s.name: (s.origins, [f"{a.name}.item()" if a.role == "scalar" else a.name for a in s.args],
                              list(s.sizevars))
                     for s in specs + [c.kernel for c in combo_sources]}
        at_storage_start = backend_name == "triton" or "triton" in kernel_backends  # Note [input offsets]
        source, namespace = generate_wrapper(lowered, planned, names, launchers, call_args, at_storage_start,
                                             dict(zip((c.name for c in combo_sources), combos)))
        exec(compile(source, "<ember_inductor wrapper>", "exec"), namespace)  # noqa: S102
    # a symbolic input's layout is checked by the wrapper, against its bound sizes (wrapper.py)
    layouts = [(tuple(x.shape), tuple(x.stride()), at_storage_start)
               if isinstance(x, torch.Tensor) and not (isinstance(b, InputBuffer) and b.is_symbolic) else None
               for x, b in zip(example_inputs, lowered.inputs)]
    compiled = CompiledGraph(namespace["call"], source, [s for s, _ in launched], lowered.format(), t,
                             lowered.fallbacks, layouts, backend_name)
    positions = {b.name: b.position for b in lowered.inputs if isinstance(b, InputBuffer)}
    compiled.written_in_place = sorted(positions[name] for name in in_place.values())
    compiled.kernel_backends = [b for _, b in launched]  # per kernel: a warm start builds each with its own
    compiled.schedule = fused_graph(planned, names, specs)  # what the diagram draws (diagram.py)
    _report(compiled, gm, specs, options, compiled.schedule if options.trace_graph_diagram else None)
    return compiled


def _mutations(gm) -> tuple:
    # Note [compiler metadata] (ember_autograd/runtime.py): (output, input) positions of the
    # new values of mutated inputs; absent on a hand-built graph.
    return tuple(gm.graph.output_node().meta.get("ember_mutations", ()))


_SAID_CPU_AUTOTUNE = [False]


def rewrite(gm: fx.GraphModule, options: InductorOptions, backend_name: str) -> fx.GraphModule:
    """The rewrites that replace matrix products before lowering, each on a copy of the graph:
    permutes of permutes folded (Note [permutes folded]), transposed outputs (Note [transposed
    matmul outputs]), a bias nothing else fuses with put
    into the product (Note [bias in the matmul]), padding (Note [shape padding]), GEMM
    templates with their epilogues where they beat the library (Note [GEMM choice]).
    max_autotune has nothing to choose among on the C++ backend: it says so, once."""
    gm = transpose_matmul_outputs(fold_permutes(gm))
    gm = scatter_into_sum(products_viewed_out(bias_into_matmul(gm)))
    if options.shape_padding:
        gm = pad_matmul_shapes(gm)
    if options.max_autotune and backend_name == "triton":
        gm = use_gemm_templates(gm, options)
    if options.max_autotune and backend_name == "cpp" and not _SAID_CPU_AUTOTUNE[0]:
        _SAID_CPU_AUTOTUNE[0] = True
        log.info("ember_inductor: max_autotune has no templates for the C++ (CPU) backend; "
                 "CPU graphs compile as by default")
    return gm


def _report(compiled: CompiledGraph, gm, specs, options, diagram=None) -> None:
    if "output_code" in options.logs:
        bodies = "\n".join(f"# {k.name}\n{k.meta.get('body', k.source)}" for k in compiled.kernels)
        print(f"# ember_inductor output code ({len(compiled.kernels)} kernels; the C++ prelude "
              f"is left out)\n{compiled.source}\n{bodies}", file=sys.stderr)
    if "ir" in options.logs:
        print(f"# ember_inductor IR\n{compiled.ir}", file=sys.stderr)
    if "schedule" in options.logs:
        print("# ember_inductor schedule\n" + "\n".join(
            f"{s.name}: ranges={list(s.ranges)} reduction_ranges={list(s.reduction_ranges)} "
            f"writes={[a.name for a in s.args if a.role == 'out']} from {list(s.origins)}" for s in specs),
            file=sys.stderr)
    if "fallback" in options.logs and compiled.fallbacks:
        print("# ember_inductor eager fallbacks\n" + "\n".join(map(str, compiled.fallbacks)), file=sys.stderr)
    if "timings" in options.logs:
        print(f"# ember_inductor pass timings {compiled.timings}", file=sys.stderr)
    if options.trace_enabled or diagram is not None:
        write_trace(compiled, gm, specs, options, diagram)


_TRACE_COUNT = [0]


def write_trace(compiled: CompiledGraph, gm, specs, options, diagram=None) -> str:
    """Write graph, IR, kernel descriptions, sources, wrapper and timings to one folder (with
    trace_enabled), and the fused graph's diagram (with trace_graph_diagram: `diagram` holds
    its steps)."""
    _TRACE_COUNT[0] += 1
    folder = os.path.join(options.resolved_trace_dir,
                          f"graph_{os.getpid()}_{_TRACE_COUNT[0]}_{int(time.time())}")
    os.makedirs(folder, exist_ok=True)
    files = {}
    if options.trace_enabled:
        files.update({
            "graph.py": gm.code,
            "ir.txt": compiled.ir,
            "kernels.txt": "\n\n".join(format_kernel(s) for s in specs),
            "wrapper.py": compiled.source,
            "timings.json": json.dumps(compiled.timings, indent=1),
        })
        ext = {"cpp": "cpp", "triton": "py"}.get(compiled.backend, "txt")
        for k in compiled.kernels:
            files[f"{k.name}.{ext}"] = k.source
    if diagram is not None:
        files["graph_diagram.svg"] = to_svg(diagram)
        files["graph_diagram.dot"] = to_dot(diagram)
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return folder
