"""Counter-based random primitives: Philox4x32-10, bit-for-bit what Triton's `tl.rand` computes.

`uniform(shape, seed, offset)` gives element i (row-major) the value `tl.rand(seed, offset + i)`,
so a recomputation (activation checkpointing, a re-run backward) reproduces the same numbers and
the inductor's Triton kernels agree with these reference kernels. `random_seed(device)` is the
only stateful prim: it draws a seed from torch's default generator for that device.

Note: Philox's uint32 arithmetic is done here in int64 tensors (torch has no uint32 multiply):
32x32-bit products are split into 16-bit halves so that nothing overflows 63 bits.
"""
from __future__ import annotations

import torch

from ember_prims._library import RANDOM, defprim

_MASK32 = 0xFFFFFFFF
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_INT_TO_UNIT = 4.6566127342e-10  # tl.rand's scale: ((2**23 - 1) / 2**23) * 2**-31


def _mul_hi_lo(a: int, b: torch.Tensor):
    """(a * b) >> 32 and (a * b) & 0xffffffff for a uint32 constant a and uint32 values b."""
    b_lo, b_hi = b & 0xFFFF, b >> 16
    p_lo, p_hi = b_lo * a, b_hi * a  # each < 2**48
    hi = (p_hi + (p_lo >> 16)) >> 16
    lo = (((p_hi & 0xFFFF) << 16) + p_lo) & _MASK32
    return hi, lo


def philox(seed: int, counter: torch.Tensor, rounds: int = 10):
    """Philox4x32 on counters (lo32(counter), hi32(counter), 0, 0) with key (lo32(seed), hi32(seed)).

    Returns the four uint32 outputs as int64 tensors, like Triton's `randint4x(seed, counter)`.
    """
    c0 = counter & _MASK32
    c1 = (counter >> 32) & _MASK32
    c2 = torch.zeros_like(counter)
    c3 = torch.zeros_like(counter)
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    for _ in range(rounds):
        hi_b, lo_b = _mul_hi_lo(_ROUND_B, c2)
        hi_a, lo_a = _mul_hi_lo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return c0, c1, c2, c3


def uint32_to_unit_float(x: torch.Tensor) -> torch.Tensor:
    """Triton's `uint_to_uniform_float` for 32-bit values: a float32 in [0, 1)."""
    x = torch.where(x >= 2**31, x - 2**32, x)  # bitcast to int32
    x = torch.where(x < 0, -x - 1, x)
    return x.to(torch.float32) * torch.tensor(_INT_TO_UNIT, dtype=torch.float32, device=x.device)


def _counters(shape, offset, device):
    n = 1
    for s in shape:
        n *= s
    return torch.arange(n, dtype=torch.int64, device=device) + offset


def _seed_value(seed: torch.Tensor) -> int:
    return int(seed.item()) & 0xFFFFFFFFFFFFFFFF


def _uniform_ref(shape, seed, offset, *, dtype, device):
    c0, _, _, _ = philox(_seed_value(seed), _counters(shape, offset, device))
    return uint32_to_unit_float(c0).reshape(list(shape)).to(dtype)


def _normal_ref(shape, seed, offset, *, dtype, device):
    c0, c1, _, _ = philox(_seed_value(seed), _counters(shape, offset, device))
    u1 = torch.clamp_min(uint32_to_unit_float(c0), 1.0e-7)
    th = uint32_to_unit_float(c1) * torch.tensor(6.283185307179586, dtype=torch.float32, device=c0.device)
    r = torch.sqrt(torch.log(u1) * -2.0)
    return (r * torch.cos(th)).reshape(list(shape)).to(dtype)


def _random_fake(shape, seed, offset, *, dtype, device):
    if seed.dtype != torch.int64 or seed.dim() != 0:
        raise ValueError("ember_prims random: seed must be an int64 scalar tensor")
    return torch.empty(list(shape), dtype=dtype, device=device)


defprim("uniform(SymInt[] shape, Tensor seed, SymInt offset, *, ScalarType dtype, Device device) -> Tensor",
        RANDOM, _uniform_ref, _random_fake,
        doc="element i = tl.rand(seed, offset + i), in [0, 1); float32, then converted to dtype")
defprim("normal(SymInt[] shape, Tensor seed, SymInt offset, *, ScalarType dtype, Device device) -> Tensor",
        RANDOM, _normal_ref, _random_fake,
        doc="element i = tl.randn(seed, offset + i) (Box-Muller on Philox outputs 0 and 1)")


def _random_seed_ref(device):
    return torch.randint(0, 2**63 - 1, (), dtype=torch.int64, device=device)


def _random_seed_fake(device):
    return torch.empty((), dtype=torch.int64, device=device)


defprim("random_seed(Device device) -> Tensor", RANDOM, _random_seed_ref, _random_seed_fake,
        doc="stateful: draws an int64 seed from torch's default generator for device, advancing it")
