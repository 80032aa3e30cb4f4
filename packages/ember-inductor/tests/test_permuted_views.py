"""Note [permuted views] (wrapper.py): an extern op that reads a variable through a permutation of
its layout gets `x.t()` / `x.permute(dims)`, not `x.as_strided(...)`; the result is eager's, also
for inputs that do not start their storage (a parameter that is a view of a larger tensor)."""
from __future__ import annotations

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.wrapper import _permutation

P = ember_prims.ops
aten = torch.ops.aten


def test_permutation_of_a_layout():
    base = ((2, 3, 4), (12, 4, 1), 0)
    assert _permutation(base, ((4, 2, 3), (1, 12, 4), 0)) == (2, 0, 1)
    assert _permutation(((8, 8), (8, 1), 0), ((8, 8), (1, 8), 0)) == (1, 0)
    assert _permutation(base, ((4, 2, 3), (1, 12, 4), 1)) is None  # another offset
    assert _permutation(base, ((4, 6), (1, 4), 0)) is None  # a reshape, not a permutation
    assert _permutation(base, ((2, 3, 4), (12, 1, 4), 0)) is None  # strides not the sizes' own
    assert _permutation(None, ((2, 3), (3, 1), 0)) is None
    assert _permutation(((1, 1), (1, 1), 0), ((1, 1), (1, 1), 0)) == (0, 1)  # equal pairs: any order


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_linear_weight_read_through_a_transpose(backend, tmp_path):
    x, w, bias = torch.randn(2, 8), torch.randn(8, 8), torch.randn(8)
    b = GraphBuilder()
    nx, nw, nb = b.input(x), b.input(w), b.input(bias)
    wt = b.call(P.permute.default, nw, [1, 0])
    y = b.call(aten.addmm.default, nb, nx, wt)
    b.output(b.call(P.mul.default, y, y))
    cg = compile_graph(b.build(), b.examples, InductorOptions(cache_dir=str(tmp_path), backend=backend))
    assert ".t()" in cg.source and ".as_strided(" not in cg.source, cg.source
    storage = torch.randn(100)
    weights = [torch.randn(8, 8), storage[7:71].view(8, 8)]  # the second does not start its storage
    for weight in weights:
        fresh_x = torch.randn(2, 8)
        want = torch.addmm(bias, fresh_x, weight.t()) ** 2
        torch.testing.assert_close(cg([fresh_x, weight, bias])[0], want)


def test_a_4d_permutation_read_by_an_extern(tmp_path):
    a, m = torch.randn(2, 3, 4, 5), torch.randn(4, 6)
    b = GraphBuilder()
    na, nm = b.input(a), b.input(m)
    pa = b.call(P.permute.default, na, [0, 1, 3, 2])  # (2, 3, 5, 4)
    out = b.call(aten.matmul.default, pa, nm)
    b.output(out)
    cg = compile_graph(b.build(), b.examples, InductorOptions(cache_dir=str(tmp_path), backend="cpp"))
    fresh = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(cg([fresh, m])[0], fresh.permute(0, 1, 3, 2) @ m)
