"""The compile report: one compile's frames, guards, breaks, recompiles and every graph at every
stage, assembled from the compile record (Note [compile record]) and capture's events.

Note [compile report]: `CompileReport.of(record)` reads, and never changes, what the layers
left: the `CompileRecord` steps (each stage's artifact and the pass that made it, with its
time) and the `ember_capture.FrameEvent`s of the capture that fed it (frames, guards, breaks,
failed guards). The same object backs `ember.compile_report(fn)` for tools and tests and the
HTML page (report_html.py): the page shows nothing the API does not return.

The stages of one graph, in order (`STAGES`): the captured graph (capture), the joint,
forward and backward graphs (ember_autograd's trace and partition), the prims graphs handed to
the backend's compilers (their decompositions ran during the trace), the fused kernels (the
inductor's lower, fuse and plan_buffers: loop IR, kernel schedule, diagram) and the generated
source (render and build: the wrapper and each kernel's source)::

    import torch, ember
    f = ember.compile(lambda x: torch.sin(x) + 1)
    f(torch.randn(8))
    report = ember.compile_report(f)
    assert [s.name for s in report.graphs[0].stages][:2] == ["captured", "forward"]
    assert report.graphs[0].stage("generated source").kernels  # (name, source) per kernel
"""
from __future__ import annotations

import dataclasses
import inspect
import linecache
import re
from typing import Any

import torch
from ember_inductor.diagram import to_svg

from ember.record import CompileRecord

STAGES = ("captured", "joint", "forward", "backward",
          "prims forward", "fused kernels forward", "generated source forward",
          "prims backward", "fused kernels backward", "generated source backward")
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_FUSE_PASSES = ("verify", "rewrite", "plan_layouts", "lower", "fuse", "plan_buffers")


@dataclasses.dataclass
class Stage:
    """One graph at one stage: what made it (`passes`: pass -> seconds, None if untimed) and it."""

    name: str  # one of STAGES; "generated source" and "fused kernels" stand for both directions
    layer: str
    passes: dict[str, float | None]
    text: str  # the graph's code, the IR, or the wrapper source
    kernels: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (name, source)
    diagram: str = ""  # an SVG (fused kernels only)
    kernel_times: dict[str, tuple[int, float]] = dataclasses.field(default_factory=dict)  # name -> (calls, s)

    @property
    def seconds(self) -> float:
        return sum(v or 0.0 for v in self.passes.values())


@dataclasses.dataclass
class GraphReport:
    index: int
    frame: str  # the frame it was captured from
    site: str  # file:line of its first operation
    ops: int
    stages: list[Stage]
    seconds: float  # the backend's whole compile of it (forward), as timed by the facade

    def stage(self, name: str) -> Stage:
        """The first stage named `name` or starting with it ("generated source" -> forward's)."""
        for s in self.stages:
            if s.name == name or s.name.startswith(name + " "):
                return s
        raise KeyError(f"graph {self.index} has no stage {name!r}; it has {[s.name for s in self.stages]}")


@dataclasses.dataclass
class Entry:
    graph: int | None
    guards: tuple[str, ...]
    ended_by: Any = None  # the BreakReason of the break that ended the graph, or None (a return)


@dataclasses.dataclass
class FrameReport:
    """A compiled Python frame (and its resume functions): source, which lines the graphs
    captured, where it broke, the guards of each entry and why it recompiled."""

    name: str
    filename: str
    firstlineno: int
    source: list[tuple[int, str]]  # (line number, text); empty when the source is not available
    captured: set[int]
    breaks: dict[int, list[str]]  # line -> reasons
    entries: list[Entry]
    recompiles: list[str]
    eager: list[str]  # why (parts of) it run eagerly


@dataclasses.dataclass
class CompileReport:
    """Everything one `ember.compile` did so far (Note [compile report])."""

    function: str
    backend: str
    frames: list[FrameReport]
    graphs: list[GraphReport]
    breaks: list  # ember_capture.BreakReason, in order
    recompiles: list[tuple[str, str, str]]  # (frame, its file:line, the failed guard and value)

    @property
    def compile_seconds(self) -> float:
        return sum(g.seconds for g in self.graphs)

    @classmethod
    def of(cls, record: CompileRecord) -> "CompileReport":
        stats = record.capture
        events = list(stats.events) if stats is not None else []
        graphs = [_graph_report(record, i) for i in range(record.graphs)]
        frames = _frame_reports(events, record)
        for g in graphs:
            owner = next((e.frame for e in events if e.kind == "entry" and e.graph == g.index), "")
            g.frame = owner or g.frame
        return cls(record.function, record.backend, frames, graphs,
                   list(stats.breaks) if stats is not None else [],
                   [(e.frame, f"{e.filename}:{e.firstlineno}", e.reason) for e in events if e.kind == "recompile"])


def _graph_report(record: CompileRecord, index: int) -> GraphReport:
    steps = [s for s in record.steps if s.graph == index]
    stages: list[Stage] = []
    gm = next((s.artifact for s in steps if s.layer == "capture"), None)
    if isinstance(gm, torch.fx.GraphModule):
        stages.append(Stage("captured", "capture", {"capture": None}, _code(gm)))
    aot = {s.stage: s for s in steps if s.layer == "autograd"}
    art = next((s.artifact for s in steps if s.layer == "autograd" and s.stage in ("trace", "partition")), None)
    if art is not None:
        timed = {k: aot[k].seconds for k in ("trace", "partition") if k in aot}
        if art.joint is not None:
            stages.append(Stage("joint", "autograd", {"trace": timed.get("trace")}, _code(art.joint)))
        stages.append(Stage("forward", "autograd", timed, _code(art.forward)))
        if art.backward is not None:
            stages.append(Stage("backward", "autograd", {"partition": timed.get("partition")}, _code(art.backward)))
    direction = "forward"
    seen: set[int] = set()
    for s in steps:
        if s.layer == "autograd" and s.stage.endswith("_compile"):
            direction = s.stage[:-len("_compile")]
            if isinstance(s.artifact, torch.fx.GraphModule):
                stages.append(Stage(f"prims {direction}", "autograd", {s.stage: s.seconds}, _code(s.artifact)))
        elif s.layer == "inductor" and id(s.artifact) not in seen:
            seen.add(id(s.artifact))
            stages += _inductor_stages(s.artifact, direction)
    whole = sum(s.seconds or 0.0 for s in steps if s.layer == "backend")
    first = next((n for n in gm.graph.nodes if n.op != "placeholder"), None) if gm is not None else None
    match = _FRAME.search((first.meta.get("stack_trace") or "") if first is not None else "")
    ops = sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes) if gm is not None else 0
    return GraphReport(index, match["fn"] if match else "", f"{match['file']}:{match['line']}" if match else "",
                       ops, stages, whole)


def _inductor_stages(compiled: Any, direction: str) -> list[Stage]:
    timings = dict(getattr(compiled, "timings", {}) or {})
    fuse = {k: v for k, v in timings.items() if k in _FUSE_PASSES}
    build = {k: v for k, v in timings.items() if k not in _FUSE_PASSES}
    schedule = getattr(compiled, "schedule", [])
    listing = "\n".join(f"{s.name} [{s.kind}] {s.label}: reads {', '.join(s.reads) or '-'}; "
                        f"writes {', '.join(s.writes) or '-'}" for s in schedule)
    fallbacks = "\n".join(map(str, getattr(compiled, "fallbacks", []) or []))
    text = f"{compiled.ir}\n\n# schedule\n{listing}" + (f"\n\n# eager fallbacks\n{fallbacks}" if fallbacks else "")
    times = {k: (v[0], v[1]) for k, v in (getattr(compiled, "kernel_times", None) or {}).items()}
    kernels = [(k.name, k.source) for k in compiled.kernels]
    return [Stage(f"fused kernels {direction}", "inductor", fuse, text,
                  diagram=to_svg(schedule) if schedule else "", kernel_times=times),
            Stage(f"generated source {direction}", "inductor", build, compiled.source, kernels=kernels,
                  kernel_times=times)]


def _code(gm: torch.fx.GraphModule) -> str:
    try:
        return gm.print_readable(print_output=False)
    except Exception:  # a graph whose printing fails still shows its code
        return gm.code


def _frame_reports(events: list, record: CompileRecord) -> list[FrameReport]:
    frames: dict[tuple[str, int], FrameReport] = {}
    for e in events:
        key = (e.filename, e.firstlineno)
        fr = frames.get(key)
        if fr is None:
            fr = frames[key] = FrameReport(e.frame.split(" (resumed")[0], e.filename, e.firstlineno,
                                           _source(e.filename, e.firstlineno), set(), {}, [], [], [])
        if e.kind == "entry":
            fr.entries.append(Entry(e.graph, e.guards, e.reason))
            if e.reason is not None and e.reason.filename == e.filename:
                _add_once(fr.breaks.setdefault(e.reason.lineno, []), f"[{e.reason.kind}] {e.reason.reason}")
            gm = _captured(record, e.graph)
            if gm is not None:
                fr.captured |= _lines_in(gm, e.filename)
        elif e.kind == "eager":
            fr.eager.append(str(e.reason))
            fr.entries.append(Entry(None, e.guards, e.reason))
            if e.reason is not None and e.reason.filename == e.filename:
                _add_once(fr.breaks.setdefault(e.reason.lineno, []), f"[{e.reason.kind}] {e.reason.reason} (runs eagerly)")
        elif e.kind == "recompile":
            fr.recompiles.append(e.reason)
    return list(frames.values())


def _captured(record: CompileRecord, graph: int | None):
    if graph is None:
        return None
    return next((s.artifact for s in record.steps if s.graph == graph and s.layer == "capture"), None)


def _lines_in(gm: torch.fx.GraphModule, filename: str) -> set[int]:
    lines = set()
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            for m in _FRAME.finditer(n.meta.get("stack_trace") or ""):
                if m["file"] == filename:
                    lines.add(int(m["line"]))
    return lines


def _source(filename: str, firstlineno: int) -> list[tuple[int, str]]:
    lines = linecache.getlines(filename)
    if not lines or firstlineno < 1 or firstlineno > len(lines):
        return []
    try:
        block = inspect.getblock(lines[firstlineno - 1:])
    except Exception:  # not a block inspect can delimit: the next lines
        block = lines[firstlineno - 1:firstlineno + 40]
    return [(firstlineno + i, text.rstrip("\n")) for i, text in enumerate(block)]


def _add_once(items: list, item: str) -> None:
    if item not in items:
        items.append(item)
