"""Fake tensors with symbolic sizes, made from real tensors (or from sizes and strides)."""
from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._library.fake_impl import FakeImplCtx, set_ctx_getter
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

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
    shape environment, which ember does not use, so the cache is off; and the few ATen ops whose kernels
    refuse symbolic sizes get fake kernels of ours (`symbolic_fake_mode`)."""
    mode = symbolic_fake_mode(allow_non_fake_inputs=True)
    mode.cache_enabled = False
    return mode


class SymbolicFakeTensorMode(FakeTensorMode):
    """torch's FakeTensorMode, except that an op with symbolic arguments may take one of ember's
    fake kernels (Note [fake kernels for symbolic sizes]); with static arguments, unchanged."""

    def dispatch(self, func, types, args=(), kwargs=None):
        kernel = SYMBOLIC_FAKE_KERNELS.get(func)
        if kernel is not None and _any_symbolic((args, kwargs or {})):
            with self:
                return kernel(*args, **(kwargs or {}))
        kernel = _custom_fake_kernel(func)
        if kernel is not None and not self.propagate_real_tensors and _plain_fakes(self, args, kwargs):
            # Note [custom ops' fake kernels called directly]
            ctx = FakeImplCtx(self, func)
            with set_ctx_getter(lambda: ctx), self:
                return kernel(*args, **(kwargs or {}))
        return super().dispatch(func, types, args, kwargs)


# Note [custom ops' fake kernels called directly]: FakeTensorMode does not cache a custom op
# (torch.library: ember_prims' primitives, a user's op): each call builds the op cache's key,
# discards it ("non-builtin"), then walks its constant-propagation, real-tensor and
# decomposition checks before it runs the op's registered fake kernel, about four times the
# kernel's own cost (autograd's trace of densenet121 records 2,100 primitives: a second of the
# compile). Where none of those checks can apply (every tensor argument a FakeTensor of this mode
# without a constant value or symbolic sizes, no SymInt argument, no real-tensor propagation, an
# op with no CompositeImplicitAutograd kernel, which FakeTensorMode would decompose first) the
# mode runs the fake kernel as FakeTensorMode's last step does (same FakeImplCtx, same mode),
# so the result is the same; any other call takes torch's path.
_CUSTOM: dict = {}  # OpOverload -> whether it is a custom op whose fake kernel may be called directly


def _custom_fake_kernel(func):
    """The registered fake kernel of custom op `func`, or None (a builtin op, or none registered:
    looked up on each call, as FakeTensorMode does, so a kernel registered later is the one run)."""
    custom = _CUSTOM.get(func)
    if custom is None:
        custom = _CUSTOM[func] = (
            isinstance(func, torch._ops.OpOverload) and not torch._library.utils.is_builtin(func)
            and not torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"))
    if not custom:
        return None
    return torch._library.simple_registry.singleton.find(func.name()).fake_impl.kernel


def _plain_fakes(mode, args, kwargs) -> bool:
    """Whether every tensor among the arguments (and in their lists) is a FakeTensor of `mode`
    with static sizes and no constant value, and no argument is symbolic."""
    for a in (*args, *(kwargs.values() if kwargs else ())):
        if isinstance(a, (list, tuple)):
            if not _plain_fakes(mode, a, None):
                return False
        elif isinstance(a, torch.Tensor):
            if (type(a) is not FakeTensor or a.fake_mode is not mode or a.constant is not None
                    or a._has_symbolic_sizes_strides):
                return False
        elif isinstance(a, _SYMBOLIC_SCALARS):
            return False
    return True


_SYMBOLIC_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)


def symbolic_fake_mode(**kwargs) -> SymbolicFakeTensorMode:
    """A SymbolicFakeTensorMode (FakeTensorMode's keyword arguments)."""
    return SymbolicFakeTensorMode(**kwargs)


# Note [C++ kernels that read plain sizes]: some CompositeImplicitAutograd kernels in C++ read a
# tensor's sizes as plain ints (`sizes()`, not `sym_sizes()`). On a fake tensor with symbolic sizes
# that read is dispatched to Python as `aten.size.default`, which FakeTensorMode answers with int()
# of every size: each symbol is pinned to this call's value by a guard, silently, and the graph is
# recompiled for every new size. torch 2.11's `matmul` does this for batched operands (so does the
# math path of scaled_dot_product_attention, which calls it: BERT's sizes were pinned on CUDA, where
# capture sees an attention mask). torch registers symbolic-clean Python kernels for such ops with
# the Python dispatcher, which is off by default; each op run on symbolic fakes (capture's fake run,
# autograd's trace) runs with it on. With static sizes nothing changes.
def symbolic_dispatch(symbolic: bool):
    """The context under which ops on symbolic fakes run (Note [C++ kernels that read plain sizes]):
    the Python dispatcher when ``symbolic``, else nothing."""
    return enable_python_dispatcher() if symbolic else contextlib.nullcontext()


def _any_symbolic(tree) -> bool:
    """Whether a SymInt, or a tensor with a symbolic size, is among the leaves of ``tree``."""
    for leaf in torch.utils._pytree.tree_leaves(tree):
        if isinstance(leaf, torch.SymInt):
            return True
        if isinstance(leaf, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in leaf.shape):
            return True
    return False


# Note [fake kernels for symbolic sizes]: a few ATen ops reach a C++ kernel that takes plain ints
# (`SymIntArrayRef expected to contain only concrete integers`) when their sizes are symbolic, and
# torch's Python meta for them is not what FakeTensorMode runs. CUDA's scaled_dot_product_attention
# pads an attention bias whose last size is not a multiple of 16 with constant_pad_nd: with a
# symbolic sequence length the trace raised, and capture broke the graph at every attention. Each
# kernel here computes only the output's metadata, as the real kernel lays it out.
def _constant_pad_nd(a, pad, value=0):
    sizes = list(a.shape)
    for i in range(len(pad) // 2):
        d = len(sizes) - 1 - i
        sizes[d] = sizes[d] + pad[2 * i] + pad[2 * i + 1]
    return torch.empty(sizes, dtype=a.dtype, device=a.device)


SYMBOLIC_FAKE_KERNELS = {torch.ops.aten.constant_pad_nd.default: _constant_pad_nd}
