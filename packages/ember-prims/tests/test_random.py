"""The random prims against Triton's tl.rand / tl.randn, run by the Triton interpreter on CPU.

Triton chooses its interpreter when it is imported (tl.rand itself is a jit function), so the
Triton side runs in a subprocess started with TRITON_INTERPRET=1: this test neither depends on
nor changes whether the pytest process imported Triton, or how.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

import ember_prims

pytest.importorskip("triton")

CASES = [(0, 0), (12345, 7), (2**40 + 99, 1000), (2**62 + 5, 2**20)]
N = 300

TRITON_SIDE = r"""
import json, sys
import torch
import triton
import triton.language as tl

@triton.jit
def kernel(out_ptr, normal_ptr, seed, offset, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, tl.rand(seed, offset + i), mask=mask)
    tl.store(normal_ptr + i, tl.randn(seed, offset + i), mask=mask)

out = []
for seed, offset in json.loads(sys.argv[1]):
    n = int(sys.argv[2])
    u, z = torch.empty(n), torch.empty(n)
    kernel[(triton.cdiv(n, 128),)](u, z, seed, offset, n, BLOCK=128)
    out.append([u.view(torch.int32).tolist(), z.tolist()])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def triton_values():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", TRITON_SIDE, json.dumps(CASES), str(N)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_uniform_and_normal_match_triton(case, triton_values):
    seed, offset = CASES[case]
    u_bits, z_ref = triton_values[case]
    s = torch.tensor(seed, dtype=torch.int64)
    u = ember_prims.ops.uniform([3, N // 3], s, offset, dtype=torch.float32, device="cpu")
    z = ember_prims.ops.normal([3, N // 3], s, offset, dtype=torch.float32, device="cpu")
    assert u.flatten().view(torch.int32).tolist() == u_bits  # bit for bit
    torch.testing.assert_close(z.flatten(), torch.tensor(z_ref), rtol=2e-6, atol=2e-6)  # libm may differ by an ulp


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
