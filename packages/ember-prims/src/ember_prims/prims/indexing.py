"""Indexing primitives: gather/scatter along one dim, and advanced indexing with index tensors.

Index tensors are int64 and in range [0, size): negative indices are wrapped and bool masks
rejected by the decompositions. `index`'s non-None indices all have one shape (the decomposition
broadcasts them); `index_put`'s values have exactly the shape `index` would return. With duplicate
indices, `scatter` and `index_put(accumulate=False)` keep an unspecified one of the writes.
"""
from __future__ import annotations

import torch

from ember_prims._library import INDEXING, defprim, empty, fresh


def _fail(name, msg):
    raise ValueError(f"ember_prims.{name}: {msg}")


def _check_gather(name, a, dim, index):
    if index.dtype != torch.int64 or index.dim() != a.dim() or not 0 <= dim < max(a.dim(), 1):
        _fail(name, f"index must be int64 with the input's rank, dim in range; got {index.dtype}, "
              f"{index.dim()}-d index for {a.dim()}-d input, dim={dim}")


def _gather_ref(a, dim, index):
    _check_gather("gather", a, dim, index)
    return fresh(torch.gather(a, dim, index), a, index)


def _gather_fake(a, dim, index):
    _check_gather("gather", a, dim, index)
    return empty(a, index.shape)


defprim("gather(Tensor a, int dim, Tensor index) -> Tensor", INDEXING, _gather_ref, _gather_fake,
        doc="out[i][j] = a[index[i][j]][j] (dim=0); output has index's shape")


def _scatter(name, reduce):
    def check(a, dim, index, src):
        _check_gather(name, a, dim, index)
        if src.shape != index.shape or src.dtype != a.dtype:
            _fail(name, "src must have index's shape and a's dtype")

    def reference(a, dim, index, src):
        check(a, dim, index, src)
        if reduce:
            return fresh(torch.scatter_add(a, dim, index, src), a, index, src)
        return fresh(torch.scatter(a, dim, index, src), a, index, src)

    def fake(a, dim, index, src):
        check(a, dim, index, src)
        return empty(a, a.shape)

    defprim(f"{name}(Tensor a, int dim, Tensor index, Tensor src) -> Tensor", INDEXING, reference, fake,
            doc=("adds" if reduce else "writes") + " src[i][j] into a copy of a at [index[i][j]][j] (dim=0)")


_scatter("scatter", reduce=False)
_scatter("scatter_add", reduce=True)


def index_shape(a, indices):
    indices = list(indices)
    if len(indices) > a.dim() or not any(i is not None for i in indices):
        _fail("index", "needs 1..ndim indices, at least one not None")
    present = [k for k, i in enumerate(indices) if i is not None]
    ishape = indices[present[0]].shape
    for k in present:
        if indices[k].dtype != torch.int64 or indices[k].shape != ishape:
            _fail("index", "index tensors must be int64 and all of one shape (broadcast explicitly)")
    indices += [None] * (a.dim() - len(indices))
    adjacent = present == list(range(present[0], present[-1] + 1))
    rest = [a.shape[k] for k in range(a.dim()) if indices[k] is None]
    if adjacent:
        before = [a.shape[k] for k in range(present[0]) if indices[k] is None]
        return before + list(ishape) + rest[len(before):]
    return list(ishape) + rest


def _index_ref(a, indices):
    index_shape(a, indices)
    key = tuple(slice(None) if i is None else i for i in indices)
    return fresh(a[key], a)


def _index_fake(a, indices):
    return empty(a, index_shape(a, indices))


defprim("index(Tensor a, Tensor?[] indices) -> Tensor", INDEXING, _index_ref, _index_fake,
        doc="NumPy/ATen advanced indexing; None is a full slice")


def _index_put_check(a, indices, values):
    shape = index_shape(a, indices)
    if list(values.shape) != shape or values.dtype != a.dtype:
        _fail("index_put", f"values must be {shape} of {a.dtype}, got {tuple(values.shape)} of {values.dtype}")


def _index_put_ref(a, indices, values, accumulate):
    _index_put_check(a, indices, values)
    return index_put_into(a.clone(memory_format=torch.contiguous_format), indices, values, accumulate)


def index_put_into(out, indices, values, accumulate):
    """`index_put` written into `out` itself (contiguous; the values checked by the caller) and
    returned: what a compiler calls when `out` is its own buffer that nothing reads afterwards
    (Note [an extern's operand written in place] in ember_inductor/planner.py)."""
    dim = _one_index_dim(indices)
    if accumulate and dim is not None and out.is_cuda and not torch.are_deterministic_algorithms_enabled():
        # Note [accumulating index_put as index_add]: one 1-D index at one dim (the embedding's
        # backward, a scatter-add of rows) is `index_add_`: one atomic-add kernel on CUDA where
        # `index_put_(accumulate=True)` sorts the indices (~0.7 ms of host time and a sort per
        # call for BERT's word embeddings). Sums of duplicates may round in another order, as
        # torch.compile's atomic scatter does; with deterministic algorithms on, the sort stays.
        # CUDA only: ATen's CPU `index_add_` on rows dispatches one add per index (32 rows of 64:
        # 0.3-9 ms against 11 us for index_put_; a tiny BERT's training step spent 60 % in it).
        return out.index_add_(dim, indices[dim], values)
    out.index_put_(_explicit_indices(out, indices), values, accumulate=accumulate)
    return out


def _one_index_dim(indices):
    """The dim of the only index tensor when it is 1-D and every other entry is a full slice (None)."""
    present = [k for k, i in enumerate(indices) if i is not None]
    return present[0] if len(present) == 1 and indices[present[0]].dim() == 1 else None


def _explicit_indices(a, indices):
    # One broadcast int64 index per dim, so that index_put_ sees no None (its None handling differs).
    shape = index_shape(a, indices)
    key = list(indices) + [None] * (a.dim() - len(indices))
    present = [k for k, i in enumerate(key) if i is not None]
    ishape = list(key[present[0]].shape)
    adjacent = present == list(range(present[0], present[-1] + 1))
    first = present[0] if adjacent else 0
    idims = list(range(first, first + len(ishape)))
    slice_dims = iter(d for d in range(len(shape)) if d not in idims)
    out = []
    for k in range(a.dim()):
        view = [1] * len(shape)
        if key[k] is not None:
            for j, d in enumerate(idims):
                view[d] = ishape[j]
            out.append(key[k].reshape(view).expand(shape))
        else:
            view[next(slice_dims)] = a.shape[k]
            out.append(torch.arange(a.shape[k], device=a.device).reshape(view).expand(shape))
    return tuple(out)


def _index_put_fake(a, indices, values, accumulate):
    _index_put_check(a, indices, values)
    return empty(a, a.shape)


defprim("index_put(Tensor a, Tensor?[] indices, Tensor values, bool accumulate) -> Tensor", INDEXING,
        _index_put_ref, _index_put_fake,
        doc="a copy of a with a[indices] = values (or += with accumulate, duplicates summed)")
