"""Hand-written samples for table entries that no OpInfo reaches (the functional batch-norm forms,
dropout, scalar overloads, nearest upsampling, ...), checked against ATen like the OpInfo ones."""
import pytest
import torch

import ember_prims
from opinfo_harness import StrictDecompose

aten = torch.ops.aten


def _r(*s, dtype=torch.float32):
    return torch.randn(*s, dtype=dtype)


def _i(*s):
    return torch.randint(-5, 6, s)


SAMPLES = [
    (aten._native_batch_norm_legit_functional.default, lambda: (_r(4, 3, 5), _r(3), _r(3), _r(3), _r(3).abs(), True, 0.1, 1e-5)),
    (aten._native_batch_norm_legit_functional.default, lambda: (_r(4, 3, 2, 2, dtype=torch.bfloat16), None, None, _r(3), _r(3).abs(), True, 0.1, 1e-5)),
    (aten._native_batch_norm_legit_no_training.default, lambda: (_r(4, 3, 5, 5), _r(3), _r(3), _r(3), _r(3).abs() + .1, 0.1, 1e-5)),
    (aten._native_batch_norm_legit.no_stats, lambda: (_r(4, 3, 5), _r(3), _r(3), True, 0.1, 1e-5)),
    (aten.native_dropout.default, lambda: (_r(3, 4), 0.0, True)),
    (aten.native_dropout.default, lambda: (_r(3, 4), 1.0, True)),
    (aten.native_dropout.default, lambda: (_r(3, 4), 0.5, False)),
    (aten.lift_fresh_copy.default, lambda: (_r(3),)),
    (aten.copy.default, lambda: (_r(2, 3), _r(3, dtype=torch.float64))),
    (aten.fill.Tensor, lambda: (_r(2, 3), torch.tensor(2.5))),
    (aten.where.Scalar, lambda: (_r(3) > 0, 1.0, 2)),
    (aten.where.ScalarOther, lambda: (_r(3) > 0, _i(3), 2.5)),
    (aten.where.ScalarSelf, lambda: (_r(3) > 0, 1, _r(3))),
    (aten.bitwise_and.Scalar, lambda: (_i(4), 3)),
    (aten.bitwise_or.Scalar, lambda: (_i(4), 3)),
    (aten.bitwise_xor.Scalar, lambda: (_i(4), 3)),
    (aten.bitwise_left_shift.Tensor_Scalar, lambda: (_i(4).abs(), 2)),
    (aten.bitwise_right_shift.Tensor_Scalar, lambda: (_i(4), 1)),
    (aten.copysign.Scalar, lambda: (_r(4), -1.0)),
    (aten.div.Scalar_mode, lambda: (_i(5), 2), {"rounding_mode": "floor"}),
    (aten.div.Scalar_mode, lambda: (_r(5), 0.7), {"rounding_mode": "trunc"}),
    (aten.floor_divide.Scalar, lambda: (_i(5), 2)),
    (aten.fmod.Scalar, lambda: (_r(5), 0.7)),
    (aten.remainder.Scalar_Tensor, lambda: (3, _i(5).clamp(min=1))),
    (aten.isfinite.default, lambda: (torch.tensor([1.0, float("inf"), float("nan")]),)),
    (aten.lerp.Tensor, lambda: (_r(4), _r(4), torch.rand(4))),
    (aten.square.default, lambda: (_r(4),)),
    (aten.clamp_max.default, lambda: (_r(4), 0.1)),
    (aten.softmax.int, lambda: (_r(3, 4), 1)),
    (aten.log_softmax.int, lambda: (_r(3, 4), 0, torch.float64)),
    (aten.reshape.default, lambda: (_r(3, 4), [2, -1])),
    (aten.narrow.default, lambda: (_r(3, 6), 1, -4, 2)),
    (aten.select_copy.int, lambda: (_r(3, 6), 1, -2)),
    (aten.slice_copy.Tensor, lambda: (_r(3, 6), 1, 1, 5, 2)),
    (aten.split_copy.Tensor, lambda: (_r(7, 2), 3)),
    (aten.all.dims, lambda: (_r(3, 4, 2) > -1, [0, 2])),
    (aten.any.dims, lambda: (_r(3, 4, 2) > 1, [1], True)),
    (aten._unsafe_index.Tensor, lambda: (_r(4, 5), [None, torch.tensor([[0, -1], [2, 3]])])),
    (aten._unsafe_index_put.default, lambda: (_r(4, 5), [torch.tensor([0, 2, 0])], _r(3, 5), True)),
    (aten.index_put.default, lambda: (_r(4, 5), [None, _r(5) > 0], torch.tensor(2.0))),
    (aten.index_put.default, lambda: (_r(2, 3, 4), [None, _r(3, 4) > 0], torch.tensor([1.5]), True)),
    (aten.zero.default, lambda: (_r(2, 3),)),
    (aten.as_strided_scatter.default, lambda: (_r(4, 4), _r(2, 3), [2, 3], [4, 1], 5)),
    (aten.as_strided_scatter.default, lambda: (_r(3, 4), _r(4), [4], [3], 0)),
    (aten.diagonal_scatter.default, lambda: (_r(4, 5), _r(4), 1)),
    (aten.diagonal_scatter.default, lambda: (_r(2, 5, 3), _r(2, 3), -1, 1, 2)),
    (aten.diagonal_scatter.default, lambda: (_r(3, 4, 2), _r(4, 2), 0, -1, 0)),
    (aten.adaptive_avg_pool2d.default, lambda: (_r(2, 3, 7, 9), [3, 4])),
    (aten.upsample_nearest2d.default, lambda: (_r(2, 3, 5, 7), [8, 13])),
    (aten.upsample_nearest2d.vec, lambda: (_r(2, 3, 5, 7), None, [2.0, 1.5])),
    (aten.upsample_nearest2d_backward.default, lambda: (_r(2, 3, 8, 13), [8, 13], [2, 3, 5, 7])),
    (aten.upsample_nearest3d.default, lambda: (_r(1, 2, 3, 4, 5), [5, 6, 7])),
    (aten.upsample_bilinear2d.vec, lambda: (_r(2, 3, 5, 7), None, True, [1.5, 2.0])),
    (aten.nll_loss2d_forward.default, lambda: (_r(2, 4, 3, 3).log_softmax(1), torch.randint(0, 4, (2, 3, 3)), _r(4).abs(), 1, 1)),
    (aten.nll_loss2d_backward.default, lambda: (torch.tensor(1.3), _r(2, 4, 3, 3).log_softmax(1), torch.randint(0, 4, (2, 3, 3)), None, 1, -100, torch.tensor(18.0))),
    (aten.addmm.default, lambda: (_r(5), _r(3, 4), _r(4, 5)), {"beta": 0.5, "alpha": 2}),
    (aten.arange.start, lambda: (2, 11), {"dtype": torch.float32}),
    (aten.clamp.default, lambda: (_r(5), -0.5, 0.5)),
    (aten.squeeze_copy.dims, lambda: (_r(2, 1, 3, 1), [1, 3])),
    (aten.xlogy.Scalar_Other, lambda: (torch.tensor([0.0, 1.0, 2.0]), 3.0)),
    (aten.xlogy.Scalar_Self, lambda: (2.0, torch.tensor([0.0, 1.0, float("nan")]))),
    (aten.max_pool2d_with_indices.default, lambda: (torch.full((1, 1, 4, 4), float("-inf")), [3, 3], [2, 2], [1, 1])),
    # foreach ops (Note [foreach decompositions]): lists of tensors of different shapes
    (aten._foreach_add.List, lambda: ([_r(3), _r(2, 4)], [_r(3), _r(2, 4)]), {"alpha": -0.5}),
    (aten._foreach_add.Scalar, lambda: ([_r(3), _i(2, 4)], 2)),
    (aten._foreach_mul.ScalarList, lambda: ([_r(3), _r(2, 4)], [0.5, 3])),
    (aten._foreach_div.Tensor, lambda: ([_r(3), _r(2, 4)], torch.tensor(4.0))),
    (aten._foreach_addcmul.Scalar, lambda: ([_r(3), _r(5)], [_r(3), _r(5)], [_r(3), _r(5)], 0.1)),
    (aten._foreach_addcdiv.ScalarList, lambda: ([_r(3), _r(5)], [_r(3), _r(5)], [_r(3).exp(), _r(5).exp()], [0.1, -2.0])),
    (aten._foreach_lerp.Scalar, lambda: ([_r(3), _r(2, 2)], [_r(3), _r(2, 2)], 0.25)),
    (aten._foreach_sqrt.default, lambda: ([_r(3).abs(), _r(2, 4).abs()],)),
    (aten._foreach_pow.ScalarAndTensor, lambda: (2.0, [_r(3), _r(4)])),
    (aten._foreach_norm.Scalar, lambda: ([_r(3), _r(2, 4)], 2)),
    (aten._foreach_clamp_min.Scalar, lambda: ([_r(3), _r(2, 4)], 0.1)),
    (aten._foreach_maximum.List, lambda: ([_r(3), _r(2, 4)], [_r(3), _r(2, 4)])),
    (aten._foreach_copy.default, lambda: ([_r(3), _r(2, 4)], [_r(3), _r(2, 4)])),
]


@pytest.mark.parametrize("i", range(len(SAMPLES)), ids=[f"{s[0]}-{i}" for i, s in enumerate(SAMPLES)])
def test_sample(i):
    op, make, *kw = SAMPLES[i]
    kwargs = kw[0] if kw else {}
    torch.manual_seed(i)
    args = make()
    expected = op(*args, **kwargs)
    with StrictDecompose(ember_prims.table()):
        got = ember_prims.table()[op](*args, **kwargs)
    tol = dict(atol=1e-2, rtol=1.6e-2) if any(isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16
                                              for a in args) else dict(atol=1e-5, rtol=1.3e-5)
    torch.testing.assert_close(got, expected, **tol, equal_nan=True)


# random ops: checked by statistics, not values, in test_random_ops_shapes_and_statistics
RANDOM_CHECKED = [aten.native_dropout.default, aten.rand.default, aten.randn.default, aten.bernoulli.p,
                  aten.rand_like.default]


def test_random_ops_shapes_and_statistics():
    t = ember_prims.table()
    x = torch.ones(200, 50)
    with StrictDecompose(t):
        out, mask = t[aten.native_dropout.default](x, 0.3, True)
        r = t[aten.rand.default]([1000], dtype=torch.float32)
        n = t[aten.randn.default]([2000], dtype=torch.float64)
        b = t[aten.bernoulli.p](torch.empty(1000), 0.25)
        rl = t[aten.rand_like.default](x)
    assert mask.dtype == torch.bool and abs(mask.float().mean().item() - 0.7) < 0.02
    torch.testing.assert_close(out, mask.float() / 0.7)
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean().item() - 0.5) < 0.05
    assert n.dtype == torch.float64 and abs(n.std().item() - 1) < 0.1
    assert abs(b.mean().item() - 0.25) < 0.05 and rl.shape == x.shape


def test_decompositions_run_on_fake_tensors_under_a_recording_mode():
    # what ember-autograd does: call the table on FakeTensors inside its own TorchDispatchMode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    t = ember_prims.table()
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(4, 8))
        w, b = mode.from_tensor(torch.randn(8)), mode.from_tensor(torch.randn(8))
        with Record():
            out, mean, rstd = t[aten.native_layer_norm.default](x, [8], w, b, 1e-5)
            t[aten.gelu_backward.default](out, x, approximate="tanh")
    assert out.shape == (4, 8) and mean.shape == (4, 1)
    assert all(ember_prims.is_prim(f) or ember_prims.is_metadata_query(f) for f in seen), set(seen)


def test_extra_decompositions_lower_the_externs():
    from ember_prims.decomps.linalg import extra_decompositions
    t = ember_prims.table()
    t.update(extra_decompositions())
    q, k, v = _r(2, 3, 5, 4), _r(2, 3, 6, 4), _r(2, 3, 6, 4)
    bias = _r(2, 3, 5, 6)
    with StrictDecompose(t):
        out, lse, _, _ = t[aten._scaled_dot_product_efficient_attention.default](q, k, v, bias, True)
        mm = t[aten.mm.default](_r(3, 4), _r(4, 2))
        causal = t[aten._scaled_dot_product_efficient_attention.default](q, k[:, :, :5], v[:, :, :5], None, False,
                                                                         is_causal=True)[0]
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-1, -2) / 2 + bias, -1))
    torch.testing.assert_close(causal, torch.nn.functional.scaled_dot_product_attention(
        q, k[:, :, :5], v[:, :, :5], is_causal=True))
    assert mm.shape == (3, 2)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_cudnn_batch_norm_decomposes_like_native_batch_norm(training):
    """Note [vendor batch norm]: cuDNN's forward and backward (what F.batch_norm runs on CUDA)
    against native_batch_norm and its backward on the same CPU tensors, running statistics
    updated in place in training."""
    t = ember_prims.table()
    x, w, b, g = _r(4, 3, 5, 5), _r(3), _r(3), _r(4, 3, 5, 5)
    rm, rv = _r(3), _r(3).abs() + .1
    rm_e, rv_e = rm.clone(), rv.clone()
    want = aten.native_batch_norm.default(x, w, b, rm_e, rv_e, training, 0.1, 1e-5)
    with StrictDecompose(t):
        out, mean, invstd, reserve = t[aten.cudnn_batch_norm.default](x, w, b, rm, rv, training, 0.1, 1e-5)
        if training:  # in evaluation autograd takes native_batch_norm_backward
            grads = t[aten.cudnn_batch_norm_backward.default](x, g, w, rm, rv, mean, invstd, 1e-5, reserve)
    torch.testing.assert_close(out, want[0])
    torch.testing.assert_close((rm, rv), (rm_e, rv_e))
    assert reserve.dtype == torch.uint8
    if training:
        torch.testing.assert_close((mean, invstd), want[1:])
        want_grads = aten.native_batch_norm_backward.default(g, x, w, rm_e, rv_e, want[1], want[2], True, 1e-5,
                                                             [True, True, True])
        torch.testing.assert_close(grads, want_grads, atol=1e-5, rtol=1.3e-5)
    else:
        assert mean.numel() == 0 and invstd.numel() == 0


def test_foreach_without_a_per_tensor_call_stays_whole():
    """Note [foreach decompositions]: no per-tensor maximum(Tensor, Scalar); addcmul.Tensor's
    per-item scalars are tensor data: both stay library calls, not entries that would fail."""
    t = ember_prims.table()
    assert aten._foreach_add.Scalar in t and aten._foreach_mul.List in t
    assert aten._foreach_maximum.Scalar not in t and aten._foreach_addcmul.Tensor not in t
    assert aten._foreach_add_.Scalar not in t  # in place: functionalized before the table applies


_FOREACH = sorted((op for op in ember_prims.table() if op.name().startswith("aten::_foreach_")), key=str)
_FOREACH_SAMPLES = {"List[Tensor]": lambda: [_r(3).abs() + 0.5, _r(2, 4).abs() + 0.5],
                    "List[number]": lambda: [0.5, 2.0], "Tensor": lambda: torch.tensor(0.5),
                    "number": lambda: 0.5}


@pytest.mark.parametrize("op", _FOREACH, ids=str)
def test_every_foreach_entry_against_aten(op):
    """Each foreach entry on arguments made from its schema (positive values: sqrt, log, pow),
    run on real tensors: what is checked is the mapping to per-tensor calls (those have their own
    samples; some, `frac`, stay library calls)."""
    args = [_FOREACH_SAMPLES[str(a.type)]() for a in op._schema.arguments
            if not (a.kwarg_only or a.has_default_value())]
    expected = op(*args)
    got = ember_prims.table()[op](*args)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1.3e-5, equal_nan=True)
