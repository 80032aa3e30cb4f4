"""Fake tensors with symbolic sizes, made from real tensors (or from sizes and strides)."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from ember_symbolic.env import hint_of


def symbolic_strides(sizes: Sequence, strides: Sequence[int]) -> list:
    """Strides over symbolic ``sizes`` for a tensor whose strides in this call are ``strides``:
    walking the dimensions from the innermost, a stride equal to the product of the inner sizes
    becomes that product (so it follows the sizes); any other stride stays the number it is."""
    order = sorted(range(len(sizes)), key=lambda d: (strides[d], hint_of(sizes[d])))
    out: list = list(strides)
    expected = 1
    for dim in order:
        if hint_of(expected) == strides[dim]:
            out[dim] = expected
        expected = out[dim] * sizes[dim]
    return out


def fake_with_sizes(fake_mode, tensor: torch.Tensor, sizes: Sequence) -> torch.Tensor:
    """A FakeTensor of ``fake_mode`` like ``tensor`` (dtype, device, layout of strides,
    requires_grad) but with the given sizes (ints or SymInts)."""
    strides = symbolic_strides(sizes, tensor.stride())
    with fake_mode:
        fake = torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device)
    if tensor.requires_grad:
        fake.requires_grad_(True)
    return fake


def plain_fake_mode():
    """A FakeTensorMode that works with ember's SymNodes: its op cache keys SymInts through torch's
    ShapeEnv, which ember does not use, so the cache is off."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.cache_enabled = False
    return mode
