"""Options, pass-level golden tests, logs/trace, build errors, caching, compile-time scaling."""
import os
import time

import pytest
import torch
import ember_prims

from ember_inductor import BuildError, InductorOptions, compile_graph
from ember_inductor.kernel import Op, compute_stages, format_kernel
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.lowering import lower_graph
from ember_inductor.scheduler import fuse

P = ember_prims.ops


def test_options_from_dict_validates():
    o = InductorOptions.from_dict({"trace.enabled": True, "backend": "cpp", "logs": ["output_code"]})
    assert o.trace_enabled and o.backend == "cpp" and o.logs == frozenset({"output_code"})
    with pytest.raises(ValueError, match="valid options: .*trace.enabled"):
        InductorOptions.from_dict({"trace.enable": True})
    with pytest.raises(ValueError, match="backend"):
        InductorOptions(backend="cuda")
    with pytest.raises(TypeError):
        InductorOptions(max_fusion_size="3")
    with pytest.raises(dataclass_error()):
        o.backend = "triton"


def dataclass_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


def _softmax_graph():
    b = GraphBuilder()
    x = b.input(torch.randn(4, 8))
    m = b.call(P.broadcast_in_dim.default, b.call(P.amax.default, x, [1]), [4, 8], [0])
    e = b.call(P.exp.default, b.call(P.sub.default, x, m))
    s = b.call(P.broadcast_in_dim.default, b.call(P.sum.default, e, [1]), [4, 8], [0])
    b.output(b.call(P.div.default, e, s))
    return b


def test_golden_lower_and_fuse(options):
    b = _softmax_graph()
    lowered = lower_graph(b.build(), b.examples, options)
    assert lowered.format() == (
        "inputs: in0[4, 8]:float32\n"
        "buf1[4]:float32 = reduction amax dims=[1] of [4, 8]  # amax_default\n"
        "buf2[4]:float32 = reduction sum dims=[1] of [4, 8]  # sum_default\n"
        "buf3[4, 8]:float32 = pointwise  # div_default\n"
        "outputs: buf3[4, 8]:float32")
    groups = fuse(lowered.steps, options.max_fusion_size)
    assert len(groups) == 1 and [n.name for n in groups[0].nodes] == ["buf1", "buf2", "buf3"]


def test_golden_kernel_description(options):
    b = _softmax_graph()
    compiled = compile_graph(b.build(), b.examples, options)
    assert format_kernel(compiled.kernels[0].kernel) == (
        "kernel kernel0: ranges=[4] reduction_ranges=[8]\n"
        "  args: in0:float32:in, buf3:float32:out\n"
        "  tmp0 = load in0 [r0 + 8*x0]() : float32\n"
        "  tmp1 = reduce amax(tmp0) : float32\n"
        "  tmp3 = pointwise sub(tmp0, tmp1) : float32\n"
        "  tmp4 = pointwise exp(tmp3) : float32\n"
        "  tmp5 = reduce sum(tmp4) : float32\n"
        "  tmp7 = pointwise div(tmp4, tmp5) : float32\n"
        "  tmp8 = store buf3 [r0 + 8*x0](tmp7) : -")
    stages = compiled.kernels[0].kernel.stages
    assert [(s.inner, s.ops, s.reduces) for s in stages] == [
        (True, (0,), (1,)), (False, (1,), ()), (True, (0, 3, 4), (5,)), (False, (5,), ()),
        (True, (0, 3, 4, 7, 8), ())]


def test_stages_reduce_of_outer_value():
    ops = [Op(0, "load", "a", (), torch.float32, None), Op(1, "reduce", "sum", (0,), torch.float32),
           Op(2, "store", "b", (1,), None, None)]
    st = compute_stages(ops)
    assert [(s.inner, s.ops, s.reduces) for s in st] == [(False, (0,), ()), (True, (), (1,)), (False, (1, 2), ())]


def simple_fn_graph(n_steps):
    b = GraphBuilder()
    x = b.input(torch.randn(64))
    for _ in range(n_steps):
        x = b.call(P.add.default, x, b.call(P.sin.default, x))
    b.output(x)
    return b


def test_compile_time_is_linear(options):
    def front_end_seconds(n):
        b = simple_fn_graph(n)
        cg = compile_graph(b.build(), b.examples, options)
        assert len(cg.kernels) == 1
        return sum(v for k, v in cg.timings.items() if k != "build"), cg
    t20, cg = front_end_seconds(20)
    t160, _ = front_end_seconds(160)
    assert t20 < 0.5 and t160 < 20 * max(t20, 0.005), (t20, t160)
    assert cg.kernels[0].meta["body"].count("sinf(") == 20  # each producer evaluated once


def test_output_code_log_and_trace(options, tmp_path, capsys):
    b = simple_fn_graph(2)
    opts = options.replace(logs=frozenset({"output_code", "timings"}), trace_enabled=True,
                           trace_dir=str(tmp_path))
    compile_graph(b.build(), b.examples, opts)
    err = capsys.readouterr().err
    assert "def call(args)" in err and 'extern "C" void kernel' in err and "pass timings" in err
    (folder,) = os.listdir(tmp_path)
    assert {"graph.py", "ir.txt", "kernels.txt", "kernel0.cpp", "wrapper.py", "timings.json"} <= \
        set(os.listdir(tmp_path / folder))


def test_missing_compiler_is_a_clear_error(options, tmp_path):
    b = simple_fn_graph(1)
    opts = options.replace(cpp_compiler="no-such-compiler++", cache_dir=str(tmp_path))
    with pytest.raises(BuildError, match="not found"):
        compile_graph(b.build(), b.examples, opts)


def test_failing_compiler_reports_its_output(options, tmp_path):
    b = simple_fn_graph(1)
    opts = options.replace(cpp_flags=("-O1", "-fno-such-flag-at-all"), cache_dir=str(tmp_path))
    with pytest.raises(BuildError, match="no-such-flag"):
        compile_graph(b.build(), b.examples, opts)


def test_disk_cache_hit_compiles_nothing(options):
    b = simple_fn_graph(3)
    compile_graph(b.build(), b.examples, options)
    t = time.perf_counter()
    cg = compile_graph(b.build(), b.examples, options)
    assert cg.timings["build"] < 0.2 and time.perf_counter() - t < 1.0


def test_unknown_prim_falls_back_to_eager(options):
    b = GraphBuilder()
    x = b.input(torch.randn(5, 3))
    i = b.input(torch.tensor([[0, 1, 2], [4, 0, 1]]))
    s = b.call(P.scatter_add.default, x, 0, i, b.call(P.exp.default, b.call(P.slice.default, x, [0, 0],
                                                                           [2, 3], [1, 1])))
    b.output(b.call(P.neg.default, s))
    cg = compile_graph(b.build(), b.examples, options)
    assert [f[1] for f in cg.fallbacks] == ["ember_prims.scatter_add.default"]
    torch.testing.assert_close(cg(b.examples)[0], b.values[0])


def test_buffer_reuse_and_frees(options):
    b = GraphBuilder()
    x = b.input(torch.randn(16, 16))
    h = x
    for _ in range(3):  # kernel, extern, kernel, extern...: intermediates die and are recycled
        h = b.call(torch.ops.aten.mm.default, b.call(P.tanh.default, h), x)
    b.output(h)
    cg = compile_graph(b.build(), b.examples, options)
    assert "del " in cg.source
    torch.testing.assert_close(cg(b.examples)[0], b.values[0], rtol=1e-4, atol=1e-4)


def test_debug_verify_rejects_mutation(options):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.randn(3)
    n = g.call_function(torch.ops.aten.add_.Tensor, (x, x))
    n.meta["val"] = torch.randn(3)
    g.output((n,))
    with pytest.raises(ValueError, match="aten.add_.Tensor is neither a prim"):  # mutation is not prims-level
        compile_graph(torch.fx.GraphModule(torch.nn.Module(), g), [torch.randn(3)],
                      options.replace(debug_verify=True))


@torch.library.custom_op("ember_test_inductor::scaled", mutates_args=())
def _scaled(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


@_scaled.register_fake
def _(x, alpha):
    return torch.empty_like(x)


def test_debug_verify_accepts_a_user_library_op_as_an_extern(options):
    """A functional torch.library op (a user's, or one ember_autograd made for an op that writes
    its arguments) runs as an extern; debug_verify refused it unless its namespace was aten."""
    b = GraphBuilder()
    x = b.input(torch.randn(3, 4))
    b.output(b.call(P.exp.default, b.call(torch.ops.ember_test_inductor.scaled.default, x, 2.0)))
    cg = compile_graph(b.build(), b.examples, options.replace(debug_verify=True))
    torch.testing.assert_close(cg(b.examples)[0], b.values[0])
    assert [op for _, op, _ in cg.fallbacks] == ["ember_test_inductor.scaled.default"]


def test_independent_updates_split_on_the_cpu(options):
    """Note [independent loops on the CPU]: ten independent updates (a foreach optimizer step:
    each reads 3 buffers) fused into one kernel of 30 memory streams, 3x slower than eager;
    a chain reading many buffers still fuses whole."""
    b = GraphBuilder()
    outs = []
    for _ in range(10):
        p, g, m = (b.input(torch.randn(64)) for _ in range(3))
        outs.append(b.call(P.add.default, p, b.call(P.mul.default, b.call(P.add.default, m, g), p)))
    b.output(*outs)
    cg = compile_graph(b.build(), b.examples, options)
    assert len(cg.kernels) > 1
    assert all(k.source.count("const float* __restrict__") <= 12 for k in cg.kernels)
    for got, want in zip(cg(b.examples), b.values):
        torch.testing.assert_close(got, want)

    chain = GraphBuilder()
    xs = [chain.input(torch.randn(64)) for _ in range(20)]
    acc = xs[0]
    for x in xs[1:]:
        acc = chain.call(P.add.default, acc, x)
    chain.output(acc, chain.call(P.neg.default, acc))
    cg = compile_graph(chain.build(), chain.examples, options)
    assert len(cg.kernels) == 1


def test_independent_outputs_share_a_kernel(options):
    b = GraphBuilder()
    x, z = b.input(torch.randn(6, 5)), b.input(torch.randn(3))
    b.output(b.call(P.exp.default, x), b.call(P.neg.default, z), b.call(P.sin.default, x))
    cg = compile_graph(b.build(), b.examples, options)
    assert len(cg.kernels) == 2  # exp(x) and sin(x) together, neg(z) alone
    for got, want in zip(cg(b.examples), b.values):
        torch.testing.assert_close(got, want)


def test_no_fusion_across_a_dependency(options):
    b = GraphBuilder()
    x = b.input(torch.randn(4, 4))
    s = b.call(P.sum.default, x, [0, 1])                     # kernel A: a scalar
    y = b.call(P.permute.default, b.call(P.exp.default, x), [1, 0])
    b.output(s, y, b.call(P.mul.default, x, b.call(P.broadcast_in_dim.default, s, [4, 4], [])))
    cg = compile_graph(b.build(), b.examples, options)
    for got, want in zip(cg(b.examples), b.values):
        torch.testing.assert_close(got, want)
