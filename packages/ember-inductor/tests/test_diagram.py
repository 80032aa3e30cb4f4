"""options.trace_graph_diagram: the fused graph drawn into the trace folder, naming every kernel
and extern call, with an edge per buffer read."""
from __future__ import annotations

import glob
import os

import torch

import ember_prims
from ember_inductor import compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
aten = torch.ops.aten


def test_diagram_names_every_kernel_and_extern(tmp_path, options):
    b = GraphBuilder()
    x, w = b.input(torch.randn(16, 32)), b.input(torch.randn(32, 8))
    h = b.call(aten.mm.default, b.call(P.tanh.default, x), w)
    s = b.call(P.sum.default, b.call(P.exp.default, h), [1])
    b.output(b.call(P.add.default, h, b.call(P.broadcast_in_dim.default, s, [16, 8], [0])))
    opts = options.replace(trace_graph_diagram=True, trace_dir=str(tmp_path))
    compiled = compile_graph(b.build(), b.examples, opts)
    inp = [torch.randn(16, 32), torch.randn(32, 8)]
    hh = torch.tanh(inp[0]) @ inp[1]
    torch.testing.assert_close(compiled(inp)[0], hh + hh.exp().sum(1, keepdim=True))
    [folder] = glob.glob(str(tmp_path / "*"))
    assert sorted(os.listdir(folder)) == ["graph_diagram.dot", "graph_diagram.svg"]  # trace.enabled is off
    svg = open(os.path.join(folder, "graph_diagram.svg")).read()
    dot = open(os.path.join(folder, "graph_diagram.dot")).read()
    assert len(compiled.kernels) >= 2
    for k in compiled.kernels:
        assert f">{k.name}</text>" in svg and f"{k.name} [shape=box" in dot
    assert "mm.default" in svg  # the extern call is a (dashed) box too
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "ext" in dot and "-> kernel" in dot
