"""Every primitive: the fake kernel agrees with the reference kernel on shape, dtype and strides,
under FakeTensorMode and on meta tensors; outputs never alias inputs (value semantics)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ember_prims
from ember_prims import PRIMS

P = torch.ops.ember_prims
CPU = torch.device("cpu")


def _t(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 5, shape, dtype=dtype)
    return torch.rand(*shape, dtype=dtype) + 0.5


INT_UNARY = {"bitwise_not"}
INT_BINARY = {"bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"}
BOOL_BINARY = {"logical_and", "logical_or", "logical_xor"}


def samples(name):
    """(args, kwargs) samples for one prim; the first input is non-contiguous where it can be."""
    info = PRIMS[name]
    if info.category == ember_prims.UNARY:
        dtype = torch.int64 if name in INT_UNARY else torch.bool if name == "logical_not" else torch.float32
        return [((_t(4, 3, dtype=dtype).t(),), {}), ((_t(2, 3, dtype=dtype),), {})]
    if info.category == ember_prims.BINARY:
        dtype = torch.int64 if name in INT_BINARY else torch.bool if name in BOOL_BINARY else torch.float32
        return [((_t(4, 3, dtype=dtype).t(), _t(3, 4, dtype=dtype)), {})]
    x = _t(2, 3, 4)
    idx = torch.tensor([[0, 2], [1, 1]])
    idx01 = torch.tensor([[0, 1], [1, 1]])
    table = {
        "where": [((_t(2, 3, dtype=torch.bool), _t(2, 3), _t(2, 3)), {})],
        "convert_element_type": [((x.transpose(0, 2), torch.bfloat16), {}), ((x, torch.int32), {})],
        "clone": [((x.transpose(0, 2),), {})],
        "device_put": [((x.transpose(0, 2), CPU), {})],
        "sum": [((x, [0, 2]), {}), ((x, []), {})], "prod": [((x, [1]), {})],
        "amax": [((x.transpose(0, 1), [0]), {})], "amin": [((x, [0, 1, 2]), {})],
        "any": [((x > 1, [1]), {})], "all": [((x > 1, [0, 2]), {})],
        "argmax": [((x, 1), {})], "argmin": [((x.transpose(1, 2), 0), {})],
        "reshape": [((x.transpose(0, 1), [6, 4]), {})], "permute": [((x, [2, 0, 1]), {})],
        "broadcast_in_dim": [((_t(3, 1), [2, 3, 4], [1, 2]), {})],
        "slice": [((x, [0, 1, 0], [2, 3, 4], [1, 1, 2]), {})], "squeeze": [((_t(2, 1, 3), [1]), {})],
        "as_strided": [((x, [3, 2], [1, 4], 1), {})], "rev": [((x, [0, 2]), {})],
        "cat": [(([x, x[:, :1]], 1), {})], "pad": [((x, 0.5, [0, 1, 2], [1, 0, 0]), {})],
        "gather": [((_t(2, 3), 1, idx), {})],
        "scatter": [((_t(2, 3), 1, idx, _t(2, 2)), {})],
        "scatter_add": [((_t(2, 3), 1, idx, _t(2, 2)), {})],
        "index": [((x, [None, idx]), {}), ((x, [idx01, None, idx]), {})],
        "index_put": [((x, [None, idx], _t(2, 2, 2, 4), True), {}), ((x, [idx01, None, idx], _t(2, 2, 3), False), {})],
        "full": [(([2, 3], 1.5), {"dtype": torch.float32, "device": CPU})],
        "iota": [((5,), {"start": 2, "step": 3, "dtype": torch.int32, "device": CPU})],
        "empty_strided": [(([2, 3], [1, 2]), {"dtype": torch.float32, "device": CPU})],
        "random_seed": [((CPU,), {})],
        "uniform": [(([2, 3], torch.tensor(7), 5), {"dtype": torch.float32, "device": CPU})],
        "normal": [(([2, 3], torch.tensor(7), 5), {"dtype": torch.float64, "device": CPU})],
    }
    return table[name]


def _fakeify(mode, x):
    if isinstance(x, torch.Tensor):
        return mode.from_tensor(x)
    if isinstance(x, list):
        return [_fakeify(mode, y) for y in x]
    return x


@pytest.mark.parametrize("name", sorted(PRIMS))
def test_fake_matches_reference(name):
    op = PRIMS[name].op
    for args, kwargs in samples(name):
        ref = op(*args, **kwargs)
        flat_in = [a for a in args if isinstance(a, torch.Tensor)] + \
            [t for a in args if isinstance(a, list) for t in a if isinstance(t, torch.Tensor)]
        for t in flat_in:  # value semantics: no output shares an input's storage
            if t.numel() and ref.numel():
                assert ref.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
        with FakeTensorMode() as mode:
            fake = op(*_fakeify(mode, list(args)), **kwargs)
        assert (fake.shape, fake.dtype, fake.stride()) == (ref.shape, ref.dtype, ref.stride()), name
        if name not in ("empty_strided",):
            assert ref.is_contiguous()


def test_every_prim_has_a_sample_and_a_known_category():
    for name, info in PRIMS.items():
        assert info.category in ember_prims.CATEGORIES
        assert samples(name)
        assert info.op is getattr(torch.ops.ember_prims, name).default


def test_binary_prims_reject_implicit_broadcasting_and_promotion():
    with pytest.raises(Exception, match="equal shape and dtype"):
        P.add(torch.ones(2, 3), torch.ones(3))
    with pytest.raises(Exception, match="equal shape and dtype"):
        P.add(torch.ones(3), torch.ones(3, dtype=torch.float64))


def test_meta_tensors():
    x = torch.empty(2, 3, device="meta")
    assert P.sum(P.exp(x), [1]).shape == (2,)
    assert P.broadcast_in_dim(x, [4, 2, 3], [1, 2]).device.type == "meta"


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_abs_of_complex_is_real_in_fake_and_reference(dtype):
    """torch.abs of a complex tensor is real; the fake kernel promised a complex result, which
    EMBER_CHECK's output check caught (tests-integration/test_views_mutation.py)."""
    x = torch.randn(3, 2, dtype=dtype)
    op = PRIMS["abs"].op
    ref = op(x)
    with FakeTensorMode() as mode:
        fake = op(mode.from_tensor(x))
    assert ref.dtype == fake.dtype == dtype.to_real()
    torch.testing.assert_close(ref, torch.abs(x))
