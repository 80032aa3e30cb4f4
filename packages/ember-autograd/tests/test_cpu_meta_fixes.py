"""Note [meta kernels that disagree with the CPU's] (tracer.py): the dtypes the tracer records
for batch norm's outputs on the CPU are the ones ATen's CPU kernels return (torch's meta kernel
gives the saved statistics the input's dtype and the running ones float32, always)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember_autograd.tracer import _as_cpu_kernels_give

aten = torch.ops.aten
CASES = [(aten._native_batch_norm_legit_functional.default, True), (aten.native_batch_norm.default, True),
         (aten.native_batch_norm.default, False), (aten._native_batch_norm_legit.default, True),
         (aten._native_batch_norm_legit_no_training.default, None)]


@pytest.mark.parametrize("x_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("mixed", [True, False])
@pytest.mark.parametrize("op,training", CASES)
def test_recorded_dtypes_are_the_cpu_kernels(op, training, x_dtype, mixed):
    p_dtype = torch.float32 if mixed else x_dtype
    x = torch.randn(4, 8, 3, 3, dtype=x_dtype)
    w, b, rm, rv = (torch.ones(8, dtype=p_dtype), torch.zeros(8, dtype=p_dtype),
                    torch.zeros(8, dtype=p_dtype), torch.ones(8, dtype=p_dtype))
    args = (x, w, b, rm, rv, 0.1, 1e-5) if training is None else (x, w, b, rm, rv, training, 0.1, 1e-5)
    real = op(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        recorded = _as_cpu_kernels_give(op, fakes, op(*fakes))
    assert [t.dtype for t in recorded] == [t.dtype for t in real]
    assert [tuple(t.shape) for t in recorded] == [tuple(t.shape) for t in real]
