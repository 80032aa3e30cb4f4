"""Note [mutated inputs written in place]: the kernel computing a mutated input's new value
stores it into the input itself where no reader can tell, on both backends (Triton under its
interpreter on CPU); every other case keeps the copy and stays correct. Each graph is compiled,
then called on fresh inputs and compared with eager's values."""
from __future__ import annotations

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
BACKENDS = ["cpp", "triton"]
CPU = torch.device("cpu")


@pytest.fixture(scope="module", params=BACKENDS)
def options(request, tmp_path_factory):
    return InductorOptions(cache_dir=str(tmp_path_factory.mktemp(f"inplace_{request.param}")),
                           backend=request.param)


def compile_mutating(build, examples, mutations, options):
    """build(b, *inputs) -> output nodes; `mutations`: (output, input) positions, as
    ember_autograd marks them (Note [compiler metadata])."""
    b = GraphBuilder()
    outs = build(b, *[b.input(x) for x in examples])
    b.output(*outs)
    gm = b.build()
    gm.graph.output_node().meta["ember_mutations"] = tuple(mutations)
    return compile_graph(gm, b.examples, options), build


def reference(build, inputs):
    b = GraphBuilder()
    b.output(*build(b, *[b.input(x) for x in inputs]))
    return b.values


def check(cg, build, inputs):
    fresh = [torch.randn_like(x) for x in inputs]
    expected = reference(build, [x.clone() for x in fresh])
    got = cg(fresh)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    return fresh, got


def test_pointwise_update_is_written_into_its_input(options):
    def build(b, x, g):  # x <- x - 0.1 * g (an SGD step); the old x is read first, at the same index
        return [b.call(P.sub.default, x, b.call(P.mul.default, g, b.call(P.full.default, [64], 0.1,
                                                                              dtype=torch.float32, device=CPU)))]
    cg, _ = compile_mutating(build, [torch.randn(64), torch.randn(64)], [(0, 0)], options)
    assert cg.written_in_place == [0]
    assert "= in0" in cg.source  # the buffer is the input; no allocation, no copy
    assert any(a.role == "inout" and a.name == "in0" for k in cg.kernels for a in k.kernel.args)
    fresh, got = check(cg, build, [torch.randn(64), torch.randn(64)])
    assert got[0] is fresh[0]  # the input itself, holding the new value


def test_horizontally_fused_updates_of_two_inputs(options):
    def build(b, p, q, g):  # two parameters of one shape: one kernel writes both in place
        return [b.call(P.add.default, p, g), b.call(P.mul.default, q, g)]
    cg, _ = compile_mutating(build, [torch.randn(32)] * 3, [(0, 0), (1, 1)], options)
    assert cg.written_in_place == [0, 1] and len(cg.kernels) == 1
    fresh, got = check(cg, build, [torch.randn(32)] * 3)
    assert got[0] is fresh[0] and got[1] is fresh[1]


def test_running_statistic_in_a_reduction_epilogue(options):
    def build(b, x, rm):  # batch norm's running mean: rm <- 0.9 rm + 0.1 mean(x, 0)
        mean = b.call(P.div.default, b.call(P.sum.default, x, [0]),
                      b.call(P.full.default, [8], 16.0, dtype=torch.float32, device=CPU))
        scaled = b.call(P.mul.default, rm, b.call(P.full.default, [8], 0.9, dtype=torch.float32, device=CPU))
        new = b.call(P.add.default, scaled, b.call(P.mul.default, mean,
                                                   b.call(P.full.default, [8], 0.1, dtype=torch.float32, device=CPU)))
        return [mean, new]
    cg, _ = compile_mutating(build, [torch.randn(16, 8), torch.randn(8)], [(1, 1)], options)
    assert cg.written_in_place == [1]
    check(cg, build, [torch.randn(16, 8), torch.randn(8)])


# -- cases that keep the copy ----------------------------------------------------------------
def _later_reader(b, x):  # the old x is read by a later kernel (another iteration space)
    return [b.call(P.add.default, x, b.call(P.full.default, [4, 8], 1.0, dtype=torch.float32, device=CPU)),
            b.call(P.sum.default, x, [1])]


def _other_index(b, x):  # the new x reads the old one at another index (a transpose)
    return [b.call(P.add.default, x, b.call(P.permute.default, x, [1, 0]))]


def _old_value_returned(b, x):  # the old x is an output too
    return [b.call(P.neg.default, x), x]


def _new_value_returned_twice(b, x):  # the new value is also a user output: it must be fresh memory
    new = b.call(P.neg.default, x)
    return [new, new]


def _written_before_read(b, x):  # the new x does not read x; another output reads the old x after
    return [b.call(P.full.default, [8, 8], 2.0, dtype=torch.float32, device=CPU), b.call(P.exp.default, x)]


@pytest.mark.parametrize("build,shape,mutations", [
    (_later_reader, (4, 8), [(0, 0)]),
    (_other_index, (8, 8), [(0, 0)]),
    (_old_value_returned, (8, 8), [(0, 0)]),
    (_new_value_returned_twice, (8, 8), [(0, 0)]),
], ids=["later_reader", "other_index", "old_value_returned", "new_value_returned_twice"])
def test_unsafe_cases_keep_the_copy(options, build, shape, mutations):
    cg, _ = compile_mutating(build, [torch.randn(shape)], mutations, options)
    assert cg.written_in_place == []
    fresh, got = check(cg, build, [torch.randn(shape)])
    assert got[0] is not fresh[0]


def test_store_before_a_read_of_the_old_value_in_one_kernel(options):
    """Fused into one kernel, the old x would be read after the new value's store: not in
    place whatever order the fusion chose."""
    cg, _ = compile_mutating(_written_before_read, [torch.randn(8, 8)], [(0, 0)], options)
    fresh, got = check(cg, _written_before_read, [torch.randn(8, 8)])
    if cg.written_in_place:  # only when the kernel reads x before storing
        spec = cg.kernels[0].kernel
        ops = list(spec.ops)
        store = next(k for k, o in enumerate(ops) if o.kind == "store" and o.target == "in0")
        assert all(k < store for k, o in enumerate(ops) if o.kind == "load" and o.target == "in0")
    else:
        assert got[0] is not fresh[0]


def test_no_mutation_metadata_no_aliasing(options):
    """A hand-built graph without `ember_mutations` returns fresh outputs, as before."""
    b = GraphBuilder()
    x = b.input(torch.randn(16))
    b.output(b.call(P.neg.default, x))
    cg = compile_graph(b.build(), b.examples, options)
    inp = torch.randn(16)
    assert cg.written_in_place == [] and cg([inp])[0] is not inp
