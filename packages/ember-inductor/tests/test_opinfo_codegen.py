"""OpInfo samples of prims-covered ops: ATen graph -> ember_prims.decompose -> kernels == eager.

Both code generators: C++ (the CPU path) and Triton (on CPU tensors its kernels run under
Triton's interpreter: how CI checks the GPU code path without a GPU).

One graph per op holds all its samples (one compile per op). Ops the decompositions do not cover
are skipped, not failed: this file checks the inductor, ember_prims' own tests check coverage.
"""
import pytest
import torch
pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (absent on the GPU machines)")
from torch.testing._internal.common_methods_invocations import op_db
from torch.fx.experimental.proxy_tensor import make_fx  # tests may trace with torch's tools
from torch.utils import _pytree as pytree

ember_prims = pytest.importorskip("ember_prims")
decompose = pytest.importorskip("ember_prims.decompose").decompose

from ember_inductor import compile_graph  # noqa: E402

OPS = """abs neg exp exp2 expm1 log log1p log2 sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh
asinh acosh atanh erf erfc erfinv lgamma floor ceil round trunc sign sgn reciprocal isnan isinf
isfinite logical_not bitwise_not signbit add sub mul div floor_divide remainder fmod pow maximum
minimum atan2 hypot copysign eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and
bitwise_or bitwise_xor where clamp sum prod amax amin mean var std argmax argmin any all
softmax log_softmax nn.functional.layer_norm nn.functional.gelu nn.functional.relu sigmoid
nn.functional.silu nn.functional.softplus lerp addcmul xlogy square cat stack flip roll
transpose permute t reshape view expand squeeze unsqueeze narrow gather index_select
nn.functional.pad masked_fill tril triu cumsum""".split()
INT_OPS = set("""abs neg sign add sub mul div floor_divide remainder fmod maximum minimum eq lt ge
bitwise_and bitwise_xor where sum prod amax argmax cat flip gather cumsum""".split())
SAMPLES = 2
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.int64: dict(rtol=0, atol=0),
       torch.bool: dict(rtol=0, atol=0)}


def _cases():
    by_name = {}
    for op in op_db:
        if op.name in OPS and op.variant_test_name == "" and op.name not in by_name:
            by_name[op.name] = op
    for name in OPS:
        if name in by_name:
            yield pytest.param(by_name[name], torch.float32, id=f"{name}-float32")
            if name in INT_OPS:
                yield pytest.param(by_name[name], torch.int64, id=f"{name}-int64")


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("op,dtype", list(_cases()))
def test_opinfo_samples(op, dtype, backend, options):
    options = options.replace(backend=backend)
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip("dtype not supported by the op")
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES]
    leaves, specs = [], []
    for s in samples:
        flat, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
        specs.append((spec, [isinstance(x, torch.Tensor) for x in flat], flat))
        leaves += [x for x in flat if isinstance(x, torch.Tensor)]

    def fn(*tensors):
        it, outs = iter(tensors), []
        for spec, is_t, flat in specs:
            vals = [next(it) if t else x for x, t in zip(flat, is_t)]
            inp, args, kwargs = pytree.tree_unflatten(vals, spec)
            out = op.op(inp, *args, **kwargs)
            outs += [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
        return tuple(outs)

    try:
        expected = fn(*leaves)
        aten = make_fx(fn)(*leaves)
        for node, x in zip([n for n in aten.graph.nodes if n.op == "placeholder"], leaves):
            node.meta["val"] = x
        prims = decompose(aten)
    except Exception as e:  # not covered by the decompositions (or not traceable)
        pytest.skip(f"no prims graph: {type(e).__name__}: {str(e)[:120]}")
    compiled = compile_graph(prims, leaves, options)
    got = compiled(leaves)
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        torch.testing.assert_close(g, e, equal_nan=True, **TOL.get(e.dtype, dict(rtol=1e-3, atol=1e-3)))
