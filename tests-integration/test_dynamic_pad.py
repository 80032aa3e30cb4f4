"""A pad whose amounts depend on a symbolic size (Note [fake kernels for symbolic sizes]): CUDA's
scaled_dot_product_attention pads its bias this way at sequence lengths that are not multiples of
16; ATen's constant_pad_nd kernel refused the symbolic amounts and capture broke the graph."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember


def pad_to_16(x):
    return F.pad(x * 2, (0, 16 - x.shape[-1] % 16), value=-1.0).sum(-1) + 1


def crop_and_pad(x):
    return F.pad(x, (1, -(x.shape[-1] // 2), 0, 1)) * 3


@pytest.mark.parametrize("fn", [pad_to_16, crop_and_pad])
@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_symbolic_pad_amounts_compile_once(fn, backend):
    compiled = ember.compile(fn, dynamic=True, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no graph break, no fallback
        for n in (7, 20, 33, 16, 6):
            x = torch.randn(3, n)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1.3e-6, atol=1e-5)
    assert ember.compile_record(compiled).graphs == 1
