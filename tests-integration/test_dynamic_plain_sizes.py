"""An op whose C++ kernel reads its operand's sizes as plain ints (Note [C++ kernels that read plain
sizes] in ember_symbolic/tensors.py): torch 2.11's matmul on batched operands does, and so the math
path of scaled_dot_product_attention pinned BERT's batch and sequence sizes on CUDA (one compile per
shape, with no warning). The op below stands in for such a kernel on any torch: its registered kernel
reads `aten.size.default`, as C++ `sizes()` does, and torch's Python dispatcher has a symbolic-clean
kernel for it, as torch registers for matmul."""
import warnings

import pytest
import torch
from torch._C import DispatchKey

import ember

_LIB = torch.library.Library("ember_test_plain_sizes", "DEF")
_LIB.define("row_sums(Tensor x) -> Tensor")


def _reads_plain_sizes(x):
    sizes = torch.ops.aten.size.default(x)  # what a C++ kernel's `x.sizes()` dispatches
    return x.reshape(-1, sizes[-1]).sum(-1).reshape(sizes[:-1])


def _symbolic_clean(x):
    return x.sum(-1)


_LIB.impl("row_sums", _reads_plain_sizes, "CompositeImplicitAutograd")
torch.ops.ember_test_plain_sizes.row_sums.default.py_impl(DispatchKey.CompositeImplicitAutograd)(_symbolic_clean)


def fn(x):
    return torch.ops.ember_test_plain_sizes.row_sums(x * 2) + 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_plain_size_reads_do_not_pin_symbolic_sizes(backend):
    compiled = ember.compile(fn, dynamic=True, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no graph break, no fallback
        for rows, cols in ((3, 7), (5, 20), (4, 33), (9, 16)):
            x = torch.randn(2, rows, cols)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1.3e-6, atol=1e-5)
    assert ember.compile_record(compiled).graphs == 1


def test_batched_matmul_and_attention_math_compile_once():
    """The ops that pinned sizes on torch 2.11, on whatever torch runs the test."""
    def attention(q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / 8 + mask
        return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, mask)[0] + scores.softmax(-1) @ v

    compiled = ember.compile(attention, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b, s in ((2, 16), (3, 40), (5, 7)):
            q, k, v = (torch.randn(b, s, 4, 8).transpose(1, 2) for _ in range(3))
            mask = torch.randn(b, 1, 1, s).expand(b, 1, s, s)
            torch.testing.assert_close(compiled(q, k, v, mask), attention(q, k, v, mask), rtol=1e-5, atol=1e-5)
    assert ember.compile_record(compiled).graphs == 1
