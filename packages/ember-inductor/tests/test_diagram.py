"""The fused-graph diagram (diagram.py) and a CompiledGraph as data (artifacts.py)."""
import os

import torch
import ember_prims

from ember_inductor import compile_graph
from ember_inductor.artifacts import from_artifact, to_artifact
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
aten = torch.ops.aten


def _graph():
    """mul -> mm (an extern) -> sin: two kernels around a library call."""
    b = GraphBuilder()
    x, w = b.input(torch.randn(8, 6)), b.input(torch.randn(6, 4))
    scaled = b.call(P.mul.default, x, x)
    product = b.call(aten.mm.default, scaled, w)
    b.output(b.call(P.sin.default, product))
    return b


def test_schedule_and_diagram_file(options, tmp_path):
    b = _graph()
    opts = options.replace(trace_enabled=True, trace_graph_diagram=True, trace_dir=str(tmp_path))
    compiled = compile_graph(b.build(), b.examples, opts)
    kinds = [s.kind for s in compiled.schedule]
    assert kinds == ["kernel", "extern", "kernel"], compiled.schedule
    first, extern, last = compiled.schedule
    assert set(first.writes) <= set(extern.reads) and set(extern.writes) <= set(last.reads)
    (folder,) = os.listdir(tmp_path)
    svg = open(tmp_path / folder / "graph_diagram.svg").read()
    assert svg.startswith("<svg") and svg.count("<rect") == 5 and "mm" in svg


def test_a_compiled_graph_round_trips_as_data(options):
    b = _graph()
    compiled = compile_graph(b.build(), b.examples, options)
    loaded = from_artifact(to_artifact(compiled), options)
    x, w = torch.randn(8, 6), torch.randn(6, 4)
    torch.testing.assert_close(loaded([x, w]), compiled([x, w]))
    torch.testing.assert_close(loaded([x, w])[0], torch.sin((x * x) @ w))
    assert loaded.source == compiled.source and loaded.schedule == compiled.schedule
