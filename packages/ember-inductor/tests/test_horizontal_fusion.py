"""Note [horizontal fusion]: independent Triton kernels share one launch (a combo kernel), and
kernels with a dependency between them do not, on CPU tensors (Triton's interpreter).

Each graph is compiled, called on fresh inputs and compared with eager (pure elementwise
float32: rtol=1e-5, atol=1e-6). The interpreter runs a combo's programs one after the other, in
the parts' order, so a wrongly combined pair would still compute the right values here: the
dependency tests also check the wrapper's launches and their order.
"""
from __future__ import annotations

import re

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
TOL = dict(rtol=1e-5, atol=1e-6)
LAUNCH = re.compile(r"^\s+((?:kernel|combo)\d+)(?:_c)?\(", re.M)


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    return InductorOptions(cache_dir=str(tmp_path_factory.mktemp("horizontal")), backend="triton")


def compile_and_check(build, examples, options, mutations=()):
    """Compile build(b, *inputs) -> outputs; call it on fresh inputs (in the examples' layouts)
    and compare with eager. Returns the compiled graph."""
    b = GraphBuilder()
    b.output(*build(b, *[b.input(x) for x in examples]))
    gm = b.build()
    gm.graph.output_node().meta["ember_mutations"] = tuple(mutations)
    cg = compile_graph(gm, b.examples, options)
    fresh = [torch.randn(x.shape).as_strided(x.shape, x.stride()) if x.is_contiguous() else
             torch.randn(x.shape[::-1]).t() for x in examples]
    ref = GraphBuilder()
    ref.output(*build(ref, *[ref.input(x.clone()) for x in fresh]))
    for got, want in zip(cg(fresh), ref.values):
        torch.testing.assert_close(got, want, **TOL)
    return cg


def launches(cg) -> list[str]:
    return LAUNCH.findall(cg.source)


def parts_of(cg) -> dict[str, tuple]:
    return {k.name: k.meta.get("parts", (k.name,)) for k in cg.kernels}


SHAPES = [(16, 16), (), (7,), (5, 3), (33,), (2, 3, 4)]


def updates(b, *xs):
    """An SGD-like update per input, each over its own shape: one kernel each."""
    return [b.call(P.sub.default, x, b.call(P.mul.default, b.call(P.sin.default, x), x)) for x in xs]


def test_independent_kernels_share_one_launch(options):
    examples = [torch.randn(s) for s in SHAPES] + [torch.randn(6, 4).t()]  # a non-contiguous input
    cg = compile_and_check(updates, examples, options)
    assert launches(cg) == ["combo0"], cg.source
    assert len(parts_of(cg)["combo0"]) == len(examples)
    alone = compile_and_check(updates, examples, options.replace(combo_kernels=False))
    assert len(launches(alone)) == len(examples), alone.source


def test_independent_reductions_share_one_launch(options):
    """Reductions too: persistent (a row in one block), looped (over a strided dim: the part
    gets its RBLOCK), next to a pointwise kernel; a split reduction's second stage (Note [split
    reductions]) reads its first stage: the two run in two launches, in order."""
    def build(b, x, c, y, z):
        return (b.call(P.sum.default, x, [1]), b.call(P.amax.default, x, [1]), b.call(P.sum.default, c, [0]),
                b.call(P.sum.default, y, [0]), b.call(P.cos.default, z))
    examples = [torch.randn(4, 5), torch.randn(300, 64), torch.randn(20000), torch.randn(7)]
    cg = compile_and_check(build, examples, options)
    first, second = launches(cg)
    assert len(parts_of(cg)[first]) == 4 and len(parts_of(cg)[second]) == 1, cg.source  # sum, amax: one kernel
    combo = next(k for k in cg.kernels if k.name == first)
    assert "for roffset" in combo.source and combo.meta["layout"] == "combo", combo.source


def test_combo_size_is_capped(options, monkeypatch):
    from ember_inductor import horizontal
    monkeypatch.setattr(horizontal, "COMBO_MAX_PARTS", 3)
    examples = [torch.randn(n) for n in range(3, 10)]
    cg = compile_and_check(updates, examples, options)
    assert sorted(len(p) for p in parts_of(cg).values()) == [1, 3, 3], cg.source


def args_of(cg, name: str, written: bool) -> set:
    k = next(k for k in cg.kernels if k.name == name)
    return {a.name for a in k.kernel.args if (a.role != "in") == written}


def test_kernel_reading_what_another_wrote_is_not_combined(options):
    """y = sin(x) is written for the matmul (an extern); after the extern, a kernel of another
    shape reads y: it needs y's kernel to have finished, so it may not share its launch. A
    kernel independent of both (cos(v)) joins y's."""
    def build(b, x, w, v):
        y = b.call(P.sin.default, x)
        m = b.call(torch.ops.aten.mm.default, y, w)
        c = b.call(P.cos.default, v)
        z = b.call(P.mul.default, b.call(P.broadcast_in_dim.default, y, [3, 8, 8], [1, 2]),
                   b.call(P.broadcast_in_dim.default, x, [3, 8, 8], [1, 2]))
        return m, c, z
    cg = compile_and_check(build, [torch.randn(8, 8), torch.randn(8, 8), torch.randn(5)], options)
    order = launches(cg)
    assert len(order) == 2, cg.source
    first, second = order
    assert args_of(cg, first, written=True) & args_of(cg, second, written=False), cg.source
    assert len(parts_of(cg)[first]) == 2, cg.source  # sin(x) and cos(v)


def test_kernel_after_an_extern_it_reads_is_not_moved_before_it(options):
    """A combo is launched where its first part was: a kernel reading an extern's result may
    not join a combo that starts before the extern (here: the kernel feeding the extern)."""
    def build(b, x, w):
        m = b.call(torch.ops.aten.mm.default, b.call(P.sin.default, x), w)
        return m, b.call(P.cos.default, b.call(P.reshape.default, m, [64]))
    cg = compile_and_check(build, [torch.randn(8, 8), torch.randn(8, 8)], options)
    lines = [line.strip() for line in cg.source.splitlines()]
    at = {name: next(i for i, line in enumerate(lines) if line.startswith(name + "(")) for name in launches(cg)}
    mm = next(i for i, line in enumerate(lines) if "extern op" in line)
    assert sorted(at.values())[0] < mm < sorted(at.values())[1] and len(at) == 2, cg.source


def test_in_place_update_of_a_buffer_another_kernel_reads_is_ordered(options):
    """z reads the input x; x's new value (x + cos(x)) is written into x itself (Note [mutated inputs
    written in place]) by a kernel of another shape after z's: the two may not share a launch
    (the update would overwrite what z reads), and z's launch comes first. A third, independent
    update of y joins one of them."""
    def build(b, x, w, y):
        z = b.call(P.mul.default, b.call(P.broadcast_in_dim.default, x, [4, 8], [1]), w)
        x1 = b.call(P.add.default, x, b.call(P.cos.default, x))
        y1 = b.call(P.add.default, y, b.call(P.sin.default, y))
        return z, x1, y1
    examples = [torch.randn(8), torch.randn(4, 8), torch.randn(5)]
    cg = compile_and_check(build, examples, options, mutations=[(1, 0), (2, 2)])
    assert cg.written_in_place == [0, 2], cg.source
    assert max(len(p) for p in parts_of(cg).values()) == 2, cg.source  # y's update joined one
    order = launches(cg)
    assert len(order) == 2, cg.source
    first, second = order
    assert "in0" in args_of(cg, first, written=False) and "in0" in args_of(cg, second, written=True), cg.source


def test_in_place_updates_after_their_readers_are_combined_where_the_last_was(options):
    """z1 reads x, then x is updated in place; z2 reads y, then y is updated in place (an
    optimizer's step counters: each update overwrites what the kernel before it read). The
    updates may not move up past the readers, but x's update may move down past z2's kernel:
    the readers share one launch (at z1's place), the updates a second (at y's update)."""
    def build(b, x, w, y, v):
        z1 = b.call(P.mul.default, b.call(P.broadcast_in_dim.default, x, [4, 8], [1]), w)
        x1 = b.call(P.add.default, x, b.call(P.cos.default, x))
        z2 = b.call(P.mul.default, b.call(P.broadcast_in_dim.default, y, [3, 5], [1]), v)
        y1 = b.call(P.add.default, y, b.call(P.sin.default, y))
        return z1, x1, z2, y1
    examples = [torch.randn(8), torch.randn(4, 8), torch.randn(5), torch.randn(3, 5)]
    cg = compile_and_check(build, examples, options, mutations=[(1, 0), (3, 2)])
    assert cg.written_in_place == [0, 2], cg.source
    readers, updates = launches(cg)
    assert {"in0", "in2"} <= args_of(cg, readers, written=False), cg.source
    assert args_of(cg, updates, written=True) == {"in0", "in2"}, cg.source
    assert [len(p) for p in parts_of(cg).values()] == [2, 2], cg.source


def test_cpu_backend_does_not_combine(tmp_path):
    """Note [independent loops on the CPU]: C++ kernels are never combined."""
    examples = [torch.randn(s) for s in SHAPES]
    cg = compile_and_check(updates, examples, InductorOptions(cache_dir=str(tmp_path), backend="cpp"))
    assert all("parts" not in k.meta for k in cg.kernels) and len(cg.kernels) == len(SHAPES)


def test_combo_kernels_round_trip_as_artifacts(options):
    """A warm start rebuilds the combo launchers from the stored sources (artifacts.py)."""
    import pickle

    from ember_inductor.artifacts import from_artifact, to_artifact
    examples = [torch.randn(s) for s in SHAPES]
    cg = compile_and_check(updates, examples, options)
    loaded = from_artifact(pickle.loads(pickle.dumps(to_artifact(cg))), options)
    fresh = [torch.randn(s) for s in SHAPES]
    for got, want in zip(loaded(fresh), cg(fresh)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert [k.name for k in loaded.kernels] == ["combo0"]
