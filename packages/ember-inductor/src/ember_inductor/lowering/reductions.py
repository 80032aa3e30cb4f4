"""Reduction prims: realized into buffers; the scheduler fuses their producers and consumers."""
from __future__ import annotations

import torch

from ember_inductor.ir import Reduction, numel
from ember_inductor.lowering.registry import lowering, pointwise, prim_of
from ember_inductor.sizes import all_static, as_sizes

# Note [split reductions]
#     A reduction with few output rows and long rows leaves most of a GPU idle: per-channel
#     batch-norm statistics of a (32, 64, 112, 112) activation are 64 rows of 401,408 elements,
#     at most a few dozen programs. On the Triton backend such a reduction runs in two kernels:
#     the first reduces part of each row into partials, with outer reduction dims (or an outer
#     factor of one, dim split as outer * inner) kept as extra output rows, laid out in front of
#     the output's own dims: (N, C) partials of an (N, C, H, W) reduction, so over channels-last
#     memory each first-stage load reads consecutive channels. The second reduces the partials.
#     Float sums change order (as any tiling does); low-precision float sums are not split,
#     because their partials would be rounded to the output dtype.
SPLIT_MIN_RNUMEL = 4096   # shorter rows: one kernel
SPLIT_MAX_ROWS = 1024     # more output rows: enough programs already
SPLIT_TARGET_ROWS = 8192  # first-stage rows to aim for
SPLIT_MIN_REST = 256      # elements left to each first-stage row


def _divisor_at_least(size: int, need: int, most: int) -> int:
    """The smallest divisor of `size` in [need, most], else the largest in (1, need), else 1."""
    best = 1
    for k in range(2, min(size, most) + 1):
        if size % k == 0:
            if k >= need:
                return k
            best = k
    return best


def split_plan(sizes, dims) -> list[tuple[int, int]] | None:
    """[(dim, factor)] kept as first-stage rows (factor = the whole dim, or an outer factor of
    the last entry's dim), or None: one kernel. See Note [split reductions]."""
    if not all_static(sizes):
        return None  # symbolic sizes: one kernel (the plan's factors would depend on the values)
    rows = numel([s for i, s in enumerate(sizes) if i not in dims])
    rest = numel([sizes[d] for d in dims])
    if rest < SPLIT_MIN_RNUMEL or rows > SPLIT_MAX_ROWS or rows == 0:
        return None
    plan = []
    for d in dims:
        s = int(sizes[d])
        if s == 1:
            continue
        if rest // s >= SPLIT_MIN_REST and rows * s <= 4 * SPLIT_TARGET_ROWS:
            plan.append((d, s))
            rows, rest = rows * s, rest // s
        else:
            need = -(-SPLIT_TARGET_ROWS // rows)
            k = _divisor_at_least(s, need, min(s, rest // SPLIT_MIN_REST))
            if k > 1:
                plan.append((d, k))
                rows = rows * k
            break
        if rows >= SPLIT_TARGET_ROWS:
            break
    return plan or None


def _lower_split(ctx, node, a, dims, kind, plan) -> Reduction:
    sizes = [int(s) for s in a.sizes]
    whole = {d for d, k in plan if k == sizes[d]}
    split = {d: k for d, k in plan if k != sizes[d]}
    # virtual first-stage input: the kept parts first, then every other dim (a split dim's inner part)
    virtual = [k for _, k in plan]
    place = []  # per virtual position after the kept ones: (original dim, is the inner part)
    for i, s in enumerate(sizes):
        if i in whole:
            continue
        virtual.append(s // split[i] if i in split else s)
        place.append(i)
    n_kept = len(plan)
    slot = {d: j for j, (d, _) in enumerate(plan)}

    def fn(kb, index):
        orig = [None] * len(sizes)
        for j, i in enumerate(place):
            orig[i] = index[n_kept + j]
        for d, j in slot.items():
            orig[d] = index[j] if d in whole else index[j] * (sizes[d] // split[d]) + orig[d]
        return a.load(kb, tuple(orig))

    stage_dims = tuple(n_kept + j for j, i in enumerate(place) if i in dims)
    out = [s for j, s in enumerate(virtual) if j not in stage_dims]
    val = node.meta["val"]
    first = Reduction(tuple(out), val.dtype, val.device, tuple(virtual), stage_dims, kind, fn, node.name)
    partials = ctx.realize(first, node.name, contiguous=True)
    return Reduction(tuple(val.shape), val.dtype, val.device, tuple(out), tuple(range(n_kept)), kind,
                     lambda kb, index: partials.load(kb, index), node.name)


@lowering("sum", "prod", "amax", "amin", "any", "all")
def lower_reduction(ctx, node, a, dims):
    kind = prim_of(node)
    dims = tuple(sorted(int(d) for d in dims))
    if not dims:  # reduces nothing: a copy
        return pointwise(node, lambda kb, index: a.load(kb, index))
    val = node.meta["val"]
    rounded = kind in ("sum", "prod") and val.dtype in (torch.float16, torch.bfloat16)
    plan = split_plan(a.sizes, dims) if ctx.split_reductions and not rounded else None
    if plan is not None:
        return _lower_split(ctx, node, a, dims, kind, plan)
    return Reduction(as_sizes(val.shape), val.dtype, val.device, tuple(a.sizes), dims, kind,
                     lambda kb, index: a.load(kb, index), node.name)


@lowering("argmax", "argmin")
def lower_arg_reduction(ctx, node, a, dim):
    kind = prim_of(node)
    val = node.meta["val"]
    dim = int(dim)

    def fn(kb, index):
        return a.load(kb, index), kb.index_value(index[dim])
    return Reduction(as_sizes(val.shape), val.dtype, val.device, tuple(a.sizes), (dim,), kind, fn, node.name)
