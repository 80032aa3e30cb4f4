"""A CompiledGraph as plain data and back (artifacts.py): what the facade's warm start stores."""
import pickle

import torch
import ember_prims

from ember_inductor import compile_graph
from ember_inductor.artifacts import from_artifact, to_artifact
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops


def test_a_compiled_graph_round_trips_as_data(options):
    b = GraphBuilder()
    x, w = b.input(torch.randn(8, 6)), b.input(torch.randn(6, 4))
    product = b.call(torch.ops.aten.mm.default, b.call(P.mul.default, x, x), w)  # kernel, extern, kernel
    b.output(b.call(P.sin.default, product))
    compiled = compile_graph(b.build(), b.examples, options)
    artifact = to_artifact(compiled)
    assert not any(k.kernel.ops for k in artifact["kernels"])  # the loops (sympy) are not kept
    loaded = from_artifact(artifact, options)
    for _ in range(2):
        x, w = torch.randn(8, 6), torch.randn(6, 4)
        torch.testing.assert_close(loaded([x, w]), compiled([x, w]))
        torch.testing.assert_close(loaded([x, w])[0], torch.sin((x * x) @ w))
    assert loaded.source == compiled.source and loaded.schedule == compiled.schedule
    assert [s.kind for s in loaded.schedule] == ["kernel", "extern", "kernel"]
    pickle.dumps(artifact["schedule"])  # plain data: the facade pickles the whole artifact
