"""Note [input offsets]: an input at another storage offset than the example's (same shape and
strides) is read where it lies, on both backends (Triton under the interpreter on the CPU)."""
import pytest
import torch

import ember


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("first, second", [(0, 8), (8, 0), (4, 12)])
def test_input_at_another_storage_offset(backend, first, second):
    ember.reset()

    def f(x, y):
        return x * 2 + y[1:].sum()

    compiled = ember.compile(f, options={"backend": backend})
    buf, other = torch.arange(24.0), torch.arange(10.0)  # integers: sums are exact in any order
    for start in (first, second, first):
        x = buf[start:start + 8]
        torch.testing.assert_close(compiled(x, other), f(x, other), rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_mutated_input_at_another_storage_offset(backend):
    ember.reset()

    def f(x):
        x.mul_(3)
        return x + 1

    compiled = ember.compile(f, options={"backend": backend})
    want, got = torch.arange(24.0), torch.arange(24.0)
    for start in (0, 8, 16, 8):
        torch.testing.assert_close(compiled(got[start:start + 8]), f(want[start:start + 8]), rtol=0, atol=0)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
