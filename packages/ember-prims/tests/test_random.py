"""The random prims against Triton's tl.rand / tl.randn, run by the Triton interpreter on CPU."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

import ember_prims

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _rand_kernel(out_ptr, normal_ptr, seed, offset, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, tl.rand(seed, offset + i), mask=mask)
    tl.store(normal_ptr + i, tl.randn(seed, offset + i), mask=mask)


def _triton_rand(seed, offset, n):
    u = torch.empty(n, dtype=torch.float32)
    z = torch.empty(n, dtype=torch.float32)
    _rand_kernel[(triton.cdiv(n, 128),)](u, z, seed, offset, n, BLOCK=128)
    return u, z


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 at import")
@pytest.mark.parametrize("seed,offset", [(0, 0), (12345, 7), (2**40 + 99, 1000), (2**62 + 5, 2**20)])
def test_uniform_and_normal_match_triton(seed, offset):
    n = 300
    u_ref, z_ref = _triton_rand(seed, offset, n)
    s = torch.tensor(seed, dtype=torch.int64)
    u = ember_prims.ops.uniform([3, 100], s, offset, dtype=torch.float32, device="cpu")
    z = ember_prims.ops.normal([3, 100], s, offset, dtype=torch.float32, device="cpu")
    assert torch.equal(u.flatten().view(torch.int32), u_ref.view(torch.int32))  # bit for bit
    torch.testing.assert_close(z.flatten(), z_ref, rtol=2e-6, atol=2e-6)  # libm cos/log may differ by an ulp


def test_uniform_range_and_recomputation():
    s = ember_prims.ops.random_seed(torch.device("cpu"))
    a = ember_prims.ops.uniform([1000], s, 17, dtype=torch.float32, device="cpu")
    b = ember_prims.ops.uniform([1000], s, 17, dtype=torch.float32, device="cpu")
    assert torch.equal(a, b) and a.min() >= 0 and a.max() < 1
    assert abs(a.mean().item() - 0.5) < 0.05


def test_random_seed_advances_default_generator():
    torch.manual_seed(0)
    s1 = ember_prims.ops.random_seed(torch.device("cpu"))
    s2 = ember_prims.ops.random_seed(torch.device("cpu"))
    torch.manual_seed(0)
    assert ember_prims.ops.random_seed(torch.device("cpu")) == s1 and s1 != s2
