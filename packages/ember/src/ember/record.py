"""The compile record: what each layer did to each graph, with its time and what it made.

Note [compile record]: one `CompileRecord` per `ember.compile` call. Each captured graph gets an
index; the facade adds a step when the backend takes the graph ("capture"), ember_autograd's
passes ("trace", "partition", "fw_compile", "bw_compile" at the first backward) and the
inductor's ("plan_layouts", "lower", "fuse", "plan_buffers", "render", "build"), each with its seconds and its
artifact (a graph, a CompiledGraph with its source). `ember.compile_record(compiled)` returns it;
`ember.explain(fn, backend=...)` prints it.
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Step:
    graph: int  # the captured graph's index in this compile, in capture order
    layer: str  # "capture", "backend" (the whole compile of the graph), "autograd", "inductor"
    stage: str  # the pass
    seconds: float | None  # None where the layer does not time it
    artifact: Any = None  # what the pass made: an FX graph, a CompiledGraph...


@dataclasses.dataclass
class CompileRecord:
    """Every step of every graph one `ember.compile` compiled, in the order they ran."""

    steps: list[Step] = dataclasses.field(default_factory=list)
    graphs: int = 0
    function: str = ""  # the compiled function's qualified name
    backend: str = ""
    capture: Any = None  # ember_capture.CaptureStats of the capture feeding this record
    # called with each new step (the progress line, kernel profiling: trace.py, progress.py)
    listeners: list = dataclasses.field(default_factory=list, repr=False)

    def new_graph(self, gm: Any) -> int:
        index = self.graphs
        self.graphs += 1
        self.add(index, "capture", "graph", None, gm)
        return index

    def add(self, graph: int, layer: str, stage: str, seconds: float | None, artifact: Any = None,
            at: int | None = None) -> None:
        """Append a step, or insert it at index `at` (a pass whose time is known only later)."""
        step = Step(graph, layer, stage, seconds, artifact)
        self.steps.insert(len(self.steps) if at is None else at, step)
        for listener in self.listeners:
            listener(self, step)

    def begin(self, graph: int, what: str) -> None:
        """A compile of `graph` starts ("forward" or "backward"): listeners with a `begin`
        (the progress line) start their clock."""
        for listener in self.listeners:
            if hasattr(listener, "begin"):
                listener.begin(self, graph, what)

    def end(self) -> None:
        for listener in self.listeners:
            if hasattr(listener, "end"):
                listener.end(self)

    def add_timings(self, graph: int, layer: str, timings: dict, artifact: Any = None,
                    at: int | None = None) -> None:
        for k, (stage, seconds) in enumerate(timings.items()):
            self.add(graph, layer, stage, seconds, artifact, None if at is None else at + k)

    def seconds(self, layer: str, stage: str | None = None) -> float:
        """Total time of a layer's steps (of one stage); the "backend" steps contain the others."""
        return sum(s.seconds or 0.0 for s in self.steps
                   if s.layer == layer and (stage is None or s.stage == stage))

    def __str__(self) -> str:
        lines = [f"Compile record: {self.graphs} graph(s)"]
        for s in self.steps:
            took = "" if s.seconds is None else f"{s.seconds * 1e3:9.2f} ms"
            what = type(s.artifact).__name__ if s.artifact is not None else ""
            lines.append(f"  graph {s.graph}  {s.layer:<9} {s.stage:<20} {took:>12}  {what}")
        return "\n".join(lines)
