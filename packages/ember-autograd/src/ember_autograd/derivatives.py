"""Eager's derivative formulas where torch's differ on fake tensors.

Note [derivatives that branch on values]: the joint trace differentiates with torch's own
autograd formulas, run on fake tensors. A few of those formulas look at the input's values in
eager (a C++ branch on `.item()`) and, for a meta or subclass tensor (which cannot be read), take
another path that agrees with eager's only on ordinary values. `prod` is the case: eager's CPU
backward divides the product by the input when no element is zero (so an infinity gives
inf/inf = NaN), takes the product of the other elements when one is zero, and gives zeros when
several are (the full reduction), or the product of the others everywhere when any element of the
input is zero (`prod(dim)`); the fake path always takes the product of the others, which is NaN
wherever another element is NaN (fuzz seeds 51064, 51598 and 13117 with --train). The
backward of `max()`, `min()`, `median()` and `nanmedian()` of a whole tensor is another: eager
fills the selected positions of zeros with grad / count, the fake path multiplies the mask by it
(0 * NaN = NaN elsewhere: fuzz seed 51621 with --train).

In a training trace the torch-level calls of this table run as an `autograd.Function` whose
backward computes eager's branches, all of them, and picks one with `where` on the same
condition eager tests (a 0-dim tensor instead of a Python bool), so the graph stays static.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


def _product_of_others(x: torch.Tensor, dim: int) -> torch.Tensor:
    # Each element's product of the other elements along `dim`: exclusive cumulative products
    # from both ends (torch's prod_safe_zeros_backward)
    n = x.shape[dim]
    if n == 0:
        return torch.ones_like(x)
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    left = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    right = torch.cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return left * right


def prod_backward(grad: torch.Tensor, x: torch.Tensor, result: torch.Tensor, dim, keepdim: bool):
    """Eager's (CPU) gradient of `x.prod()` (dim None) or `x.prod(dim, keepdim)`."""
    x = x.to(grad.dtype)
    if x.dim() == 0:
        return grad
    if dim is None:
        zeros = (x == 0).sum()
        others = _product_of_others(x.reshape(-1), 0).view(x.shape)
        return torch.where(zeros == 0, grad * (result / x),
                           torch.where(zeros == 1, grad * others, torch.zeros_like(x)))
    dim = dim % x.dim()
    if not keepdim:
        grad, result = grad.unsqueeze(dim), result.unsqueeze(dim)
    return torch.where((x == 0).any(), grad * _product_of_others(x, dim), grad * (result / x))


class _Prod(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        out = torch.prod(x, dtype=dtype) if dim is None else torch.prod(x, dim, keepdim, dtype=dtype)
        ctx.save_for_backward(x, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return prod_backward(grad, x, out, ctx.dim, ctx.keepdim).to(x.dtype), None, None, None


def _prod(input, dim=None, keepdim=False, *, dtype=None):
    if not (isinstance(input, torch.Tensor) and input.requires_grad and torch.is_grad_enabled()
            and (dim is None or isinstance(dim, int)) and isinstance(keepdim, bool)):
        return NotImplemented
    return _Prod.apply(input, dim, keepdim, dtype)


class _Selecting(torch.autograd.Function):
    # max(), min(), median(), nanmedian() of a whole tensor: eager's evenly_distribute_backward
    # writes grad / count into the selected positions of zeros (masked_fill_); the fake path
    # multiplies the mask by it, so a NaN or infinite gradient reached every other position too
    @staticmethod
    def forward(ctx, x, reduce):
        out = reduce(x)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, value = ctx.saved_tensors
        mask = torch.where(value.isnan(), x.isnan(), x == value)
        return torch.where(mask, grad / mask.sum(), torch.zeros_like(x)), None


def _selecting(reduce):
    def formula(input, *args, **kwargs):
        if args or kwargs or not (isinstance(input, torch.Tensor) and input.requires_grad and torch.is_grad_enabled()):
            return NotImplemented  # max(x, dim), max(x, y): other formulas
        return _Selecting.apply(input, reduce)
    return formula


_EAGER_FORMULAS = {torch.prod: _prod, torch.Tensor.prod: _prod}
for _name in ("max", "min", "median", "nanmedian"):
    _EAGER_FORMULAS[getattr(torch, _name)] = _EAGER_FORMULAS[getattr(torch.Tensor, _name)] = \
        _selecting(getattr(torch, _name))


class EagerDerivatives(TorchFunctionMode):
    """Note [derivatives that branch on values]: entered around the joint trace's run of the
    torch-level graph."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        formula = _EAGER_FORMULAS.get(func)
        if formula is not None:
            try:
                out = formula(*args, **kwargs)
            except TypeError:  # an unexpected signature: the call as it is
                out = NotImplemented
            if out is not NotImplemented:
                return out
        return func(*args, **kwargs)
