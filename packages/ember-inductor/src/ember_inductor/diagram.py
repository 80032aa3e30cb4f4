"""options.trace_graph_diagram: the graph after fusion as a picture (kernels as boxes, buffers as
edges), written into the trace folder as `graph_diagram.svg` (and `graph_diagram.dot`, for
Graphviz users).

`fused_graph(planned, kernel_names, specs)` turns the planner's steps into `DiagramStep`s;
`to_svg(steps)` and `to_dot(steps)` draw them. Both take only that small description, so a
report (HTML with the SVG inline) can reuse them.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ember_inductor.ir import Buffer, ExternCall
from ember_inductor.planner import extern_buffers


@dataclass(frozen=True)
class DiagramStep:
    name: str            # kernel0, or the extern call's name
    kind: str            # "kernel" | "extern"
    label: str           # what it computes (graph node names, or the extern op)
    reads: tuple         # buffer names
    writes: tuple        # buffer names


def fused_graph(planned, kernel_names: dict, specs) -> list[DiagramStep]:
    """The steps of a compiled graph in execution order: each kernel (from its KernelSpec) and
    each extern call, with the buffers it reads and writes."""
    by_name = {s.name: s for s in specs}
    out = []
    for ps in planned:
        step = ps.step
        if isinstance(step, ExternCall):
            reads = tuple(dict.fromkeys(b.name for b in extern_buffers(step)))
            writes = tuple(b.name for b in step.outputs if isinstance(b, Buffer))
            out.append(DiagramStep(step.name, "extern", f"{_op_name(step.op)} ({step.origin})", reads, writes))
            continue
        spec = by_name[kernel_names[id(step)]]
        reads = tuple(a.name for a in spec.args if a.role in ("in", "inout", "scalar"))
        writes = tuple(a.name for a in spec.args if a.role in ("out", "inout"))
        label = ", ".join(spec.origins)
        if spec.sizevars:  # symbolic sizes print as their names (Note [symbolic sizes in the inductor])
            space = [*spec.ranges, *spec.reduction_ranges]
            label += f" over [{', '.join(str(r) for r in space)}]"
        out.append(DiagramStep(spec.name, "kernel", label, reads, writes))
    return out


def _op_name(op) -> str:
    return getattr(op, "diagram_name", None) or str(getattr(op, "__name__", op))


def _edges(steps: list[DiagramStep]):
    """(source, target, buffer): a step's read of a buffer another step wrote; buffers no step
    wrote come from "inputs"."""
    writer: dict[str, str] = {}
    for s in steps:
        for b in s.reads:
            yield writer.get(b, "inputs"), s.name, b
        for b in s.writes:
            writer[b] = s.name


def to_dot(steps: list[DiagramStep]) -> str:
    lines = ["digraph fused {", "  rankdir=TB;", '  inputs [shape=ellipse];']
    for s in steps:
        shape = "box" if s.kind == "kernel" else "box, style=dashed"
        lines.append(f'  {s.name} [shape={shape}, label="{s.name}\\n{_dot_escape(s.label)}"];')
    for src, dst, buf in _edges(steps):
        lines.append(f'  {src} -> {dst} [label="{buf}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


_BOX_W, _BOX_H, _GAP, _LEFT = 360, 44, 36, 20


def to_svg(steps: list[DiagramStep]) -> str:
    """A self-contained SVG: one box per step top to bottom in execution order (kernels solid,
    externs dashed), an arrow per buffer from its writer to each reader, labelled with its name."""
    rows = {"inputs": 0}
    for i, s in enumerate(steps, 1):
        rows[s.name] = i
    edges = list(_edges(steps))
    width = _LEFT + _BOX_W + 40 + 14 * max(1, len(edges)) + 120
    height = (len(steps) + 1) * (_BOX_H + _GAP) + _GAP
    y = lambda r: _GAP + r * (_BOX_H + _GAP)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="monospace" font-size="11">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']
    boxes = [("inputs", "graph inputs", "input")] + [(s.name, s.label, s.kind) for s in steps]
    for name, label, kind in boxes:
        r = rows[name]
        dash = ' stroke-dasharray="4,3"' if kind == "extern" else ""
        fill = {"kernel": "#e8f0fe", "extern": "#fff4e0", "input": "#eeeeee"}[kind]
        parts.append(f'<rect x="{_LEFT}" y="{y(r)}" width="{_BOX_W}" height="{_BOX_H}" rx="4" '
                     f'fill="{fill}" stroke="#333"{dash}/>')
        parts.append(f'<text x="{_LEFT + 8}" y="{y(r) + 17}" font-weight="bold">{escape(name)}</text>')
        short = label if len(label) <= 52 else label[:49] + "..."
        parts.append(f'<text x="{_LEFT + 8}" y="{y(r) + 34}"><title>{escape(label)}</title>{escape(short)}</text>')
    for i, (src, dst, buf) in enumerate(edges):
        x = _LEFT + _BOX_W + 20 + 14 * i
        y0, y1 = y(rows[src]) + _BOX_H / 2, y(rows[dst]) + _BOX_H / 2
        parts.append(f'<path d="M{_LEFT + _BOX_W},{y0} H{x} V{y1} H{_LEFT + _BOX_W}" fill="none" '
                     f'stroke="#555" marker-end="url(#arrow)"><title>{escape(buf)}</title></path>')
        parts.append(f'<text x="{x + 3}" y="{(y0 + y1) / 2}" font-size="9">{escape(buf)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
