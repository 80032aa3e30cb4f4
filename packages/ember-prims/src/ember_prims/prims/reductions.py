"""Reductions over explicit dims, keepdim=False, in the input dtype.

`dims` lists the reduced dims (sorted, non-negative); an empty list reduces nothing (unlike ATen,
where an empty dim list means "all"). Accumulation dtype and keepdim are the decompositions' job:
`aten.sum` on float16 converts to float32, sums, and converts back; keepdim is a reshape.
"""
from __future__ import annotations

import torch

from ember_prims._library import REDUCTION, defprim, empty, fresh


def _canon(a, dims, name):
    dims = list(dims)
    if sorted(set(dims)) != dims or any(d < 0 or d >= a.dim() for d in dims):
        raise ValueError(f"ember_prims.{name}: dims must be sorted, unique, in [0, {a.dim()}), got {dims}")
    return dims


def _reduction(name, fn, bool_out=False, doc=""):
    def reference(a, dims):
        dims = _canon(a, dims, name)
        if not dims:
            out = a.clone()
        else:
            out = fn(a, dims)
        return fresh(out, a)

    def fake(a, dims):
        dims = _canon(a, dims, name)
        shape = [s for i, s in enumerate(a.shape) if i not in dims]
        if dims and any(a.shape[d] == 0 for d in dims) and name in ("amax", "amin"):
            raise ValueError(f"ember_prims.{name}: reducing an empty dim")
        return empty(a, shape, torch.bool if bool_out else a.dtype)

    defprim(f"{name}(Tensor a, int[] dims) -> Tensor", REDUCTION, reference, fake,
            result_dtype="bool" if bool_out else "same", doc=doc)


def _prod(a, dims):
    for d in reversed(dims):
        a = torch.prod(a, d)
    return a


def _bool_reduce(fn):
    def run(a, dims):
        for d in reversed(dims):
            a = fn(a, d)
        return a
    return run


_reduction("sum", lambda a, dims: torch.sum(a, dims, dtype=a.dtype), doc="keeps the input dtype")
_reduction("prod", lambda a, dims: _prod(a, dims).to(a.dtype), doc="keeps the input dtype")
_reduction("amax", torch.amax, doc="propagates NaN")
_reduction("amin", torch.amin, doc="propagates NaN")
_reduction("any", _bool_reduce(torch.any), bool_out=True, doc="input must be bool")
_reduction("all", _bool_reduce(torch.all), bool_out=True, doc="input must be bool")


def _arg(name, fn):
    def reference(a, dim):
        return fresh(fn(a, dim), a)

    def fake(a, dim):
        if not 0 <= dim < a.dim():
            raise ValueError(f"ember_prims.{name}: dim {dim} out of range for {a.dim()}-d input")
        return empty(a, [s for i, s in enumerate(a.shape) if i != dim], torch.int64)

    defprim(f"{name}(Tensor a, int dim) -> Tensor", REDUCTION, reference, fake,
            doc="int64 index of the first extreme value along dim; NaN counts as the extreme")


_arg("argmax", torch.argmax)
_arg("argmin", torch.argmin)
