"""The fused-graph diagram: kernels (and extern calls) as boxes, the buffers between them as
edges, drawn as an inline SVG by this module (no graphviz, no network).

`schedule_of` records, at compile time, what each step of the wrapper reads and writes
(`CompiledGraph.schedule`); `render_svg` draws it. The facade's compile report embeds the SVG;
`options={"trace.enabled": True, "trace.graph_diagram": True}` also writes it as
`graph_diagram.svg` next to the other trace files::

    import torch
    from ember_inductor.diagram import ScheduledStep, render_svg
    steps = [ScheduledStep("kernel0", "kernel", ("arg0",), ("buf0",), ("sin",)),
             ScheduledStep("kernel1", "kernel", ("buf0",), ("buf1",), ("add",))]
    svg = render_svg(steps, outputs=("buf1",))
    assert svg.startswith("<svg") and "kernel1" in svg
"""
from __future__ import annotations

import dataclasses
import html

from ember_inductor.ir import Buffer, ExternCall
from ember_inductor.scheduler import KernelGroup

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 168, 40, 24, 44, 12
MAX_PER_ROW = 12  # a wide level wraps onto the next row (hundreds of kernels stay readable)


@dataclasses.dataclass(frozen=True)
class ScheduledStep:
    """One step of the generated wrapper, in run order."""

    name: str  # "kernel3", or the extern's result name
    kind: str  # "kernel" | "extern"
    reads: tuple[str, ...]  # buffer names (graph inputs are named as the wrapper names them)
    writes: tuple[str, ...]
    origins: tuple[str, ...] = ()  # the graph nodes it computes (an extern: its op)


def schedule_of(planned, kernel_names: dict, specs) -> list[ScheduledStep]:
    """What each planned step reads and writes (from the kernel specs and the extern calls)."""
    by_name = {s.name: s for s in specs}
    steps = []
    for ps in planned:
        step = ps.step
        if isinstance(step, KernelGroup):
            spec = by_name[kernel_names[id(step)]]
            steps.append(ScheduledStep(spec.name, "kernel",
                                       tuple(a.name for a in spec.args if a.role in ("in", "inout")),
                                       tuple(a.name for a in spec.args if a.role in ("out", "inout")),
                                       tuple(spec.origins)))
        elif isinstance(step, ExternCall):
            reads: list[str] = []
            _buffers(step.args, reads)
            _buffers(list(step.kwargs.values()), reads)
            writes = tuple(o.name for o in step.outputs if o is not None)
            steps.append(ScheduledStep(step.name, "extern", tuple(dict.fromkeys(reads)), writes,
                                       (_op_name(step.op),)))
    return steps


def _buffers(value, out: list) -> None:
    if isinstance(value, Buffer):
        out.append(value.name)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _buffers(v, out)


def _op_name(op) -> str:
    return str(getattr(op, "__name__", None) or op)


def render_svg(steps: list[ScheduledStep], outputs: tuple[str, ...] = ()) -> str:
    """An SVG of `steps`: one box per step, levelled by dependency, one edge per buffer that a
    later step reads (its name in the edge's tooltip); reads of graph inputs come from an
    "inputs" box, buffers the graph returns go to an "outputs" box."""
    producer: dict[str, int] = {}
    level: list[int] = []
    edges: list[tuple[int, int, str]] = []  # (from, to, buffer); -1: inputs, len(steps): outputs
    for i, s in enumerate(steps):
        deps = [(producer.get(b, -1), b) for b in s.reads]
        level.append(1 + max([level[d] for d, _ in deps if d >= 0], default=0))
        edges += [(d, i, b) for d, b in deps]
        for b in s.writes:
            producer[b] = i
    sink = len(steps)
    edges += [(producer[b], sink, b) for b in outputs if b in producer]
    last = max(level, default=0) + 1
    rows: dict[int, list[int]] = {}
    for i, lv in enumerate(level):
        rows.setdefault(lv, []).append(i)
    pos: dict[int, tuple[float, float]] = {}
    y = PAD
    order = [(0, [-1])] + sorted(rows.items()) + [(last, [sink])]
    width = 0.0
    for _, members in order:
        for start in range(0, len(members), MAX_PER_ROW):
            chunk = members[start:start + MAX_PER_ROW]
            for k, i in enumerate(chunk):
                pos[i] = (PAD + k * (BOX_W + GAP_X), y)
            width = max(width, PAD + len(chunk) * (BOX_W + GAP_X))
            y += BOX_H + GAP_Y
    height = y - GAP_Y + PAD
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="ember-diagram" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" '
             f'font-size="11">',
             '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" '
             'markerHeight="6" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#667"/></marker></defs>']
    for src, dst, buf in edges:
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        a, b = (x1 + BOX_W / 2, y1 + BOX_H), (x2 + BOX_W / 2, y2)
        mid = (a[1] + b[1]) / 2
        parts.append(f'<path class="edge" d="M{a[0]:.0f},{a[1]:.0f} C{a[0]:.0f},{mid:.0f} {b[0]:.0f},{mid:.0f} '
                     f'{b[0]:.0f},{b[1]:.0f}" fill="none" stroke="#889" marker-end="url(#arrow)">'
                     f'<title>{html.escape(buf)}</title></path>')
    for i, (x, y0) in pos.items():
        if i == -1 or i == sink:
            name, kind, tip = ("inputs", "io", "graph inputs") if i == -1 else ("outputs", "io", "graph outputs")
        else:
            s = steps[i]
            name, kind = s.name, s.kind
            tip = f"{s.name}: {', '.join(s.origins)}\nreads {', '.join(s.reads) or '-'}\nwrites {', '.join(s.writes) or '-'}"
        fill = {"kernel": "#dbe8ff", "extern": "#ffe7c7", "io": "#eeeeee"}[kind]
        label = name if i in (-1, sink) else f"{name} ({', '.join(steps[i].origins)})"
        if len(label) > 24:
            label = label[:23] + "\u2026"
        parts.append(f'<g class="{kind}"><title>{html.escape(tip)}</title>'
                     f'<rect x="{x:.0f}" y="{y0:.0f}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" '
                     f'stroke="#556"/><text x="{x + 8:.0f}" y="{y0 + 24:.0f}">{html.escape(label)}</text></g>')
    parts.append("</svg>")
    return "\n".join(parts)
