"""From a fused group to the KernelSpec a backend renders: dead stores out, indices simplified,
contiguous dims merged (so a contiguous 4-d pointwise kernel is one flat, vectorizable loop)."""
from __future__ import annotations

import dataclasses

import sympy

from ember_inductor.kernel import KernelArg, KernelSpec, range_var, reduction_var

from ember_inductor.indexing import FloorDiv, ModIndex
from ember_inductor.scheduler import KernelGroup
from ember_inductor.sizes import known_equal, size_symbols


def finalize(group: KernelGroup, live_out: set, name: str, hints: dict | None = None,
             host_scalars: frozenset = frozenset()) -> KernelSpec:
    """host_scalars: buffers this kernel takes by value (role "scalar": Note [host scalars] in
    lowering/__init__.py)."""
    ops = _dead_code(group.kb.ops, live_out)
    ops = [dataclasses.replace(o, index=simplify_index(o.index)) if o.index is not None else o for o in ops]
    ranges, ops = merge_dims(list(group.ranges), "x", range_var, ops)
    rranges, ops = merge_dims(list(group.reduction_ranges), "r", reduction_var, ops)
    args, seen = [], set()
    for o in ops:
        if o.kind in ("load", "store") and o.target not in seen:
            seen.add(o.target)
            dtype = o.dtype if o.kind == "load" else next(n.dtype for n in group.nodes if n.name == o.target)
            role = "in" if o.kind == "load" else "out"
            if role == "in" and o.target in host_scalars:
                role = "scalar"
            args.append(KernelArg(o.target, dtype, role))
    args.sort(key=lambda a: a.role == "out")
    origins = tuple(dict.fromkeys(orig for n in group.nodes for orig in n.origins if orig))
    # Note [symbolic sizes in the inductor]: the size symbols the kernel's loops and indices use
    sizevars = size_symbols([*ranges, *rranges, *(o.index for o in ops)])
    return KernelSpec(name, tuple(ranges), tuple(rranges), tuple(args), tuple(ops), origins,
                      sizevars=sizevars, hints={s: (hints or {})[s] for s in sizevars}).with_stages()


def _dead_code(ops, live_out):
    by_id = {o.id: o for o in ops}
    keep: set[int] = set()
    stack = [o.id for o in ops if o.kind == "store" and o.target in live_out]
    while stack:
        i = stack.pop()
        if i in keep:
            continue
        keep.add(i)
        o = by_id[i]
        stack.extend(o.args)
        if o.mask is not None:
            stack.append(o.mask)
    return [o for o in ops if o.id in keep]


def simplify_index(e):
    """c*b*FloorDiv(a, b) + c*ModIndex(a, b) -> c*a (a flatten undone by an unflatten)."""
    if not e.is_Add:
        return e
    terms = list(e.args)
    mods = {}
    for t in terms:
        c, f = t.as_coeff_Mul()
        if isinstance(f, ModIndex):
            mods[(f.args[0], f.args[1])] = (c, t)
    if not mods:
        return e
    for t in list(terms):
        c, f = t.as_coeff_Mul()
        if isinstance(f, FloorDiv):
            key = (f.args[0], f.args[1])
            if key in mods and mods[key][0] * key[1] == c and mods[key][1] in terms:
                terms.remove(t)
                terms.remove(mods[key][1])
                terms.append(mods[key][0] * key[0])
    return simplify_index(sympy.Add(*terms)) if len(terms) != len(e.args) else e


def _coeff(e, v):
    """The coefficient of v in e if e is linear in v (the coefficient may be a size
    expression: s1*x0), else None."""
    c = sympy.Integer(0)
    for t in sympy.Add.make_args(e):
        if v not in t.free_symbols:
            continue
        k, f = t.as_independent(v, as_Add=False)
        if f != v:
            return None
        c += k
    return c


def merge_dims(ranges, prefix, make_var, ops):
    """Merge adjacent loop dims whose every index is linear with coefficients c_i = c_{i+1} * n_{i+1}."""
    if len(ranges) < 2:
        return ranges, ops
    exprs = [o.index for o in ops if o.index is not None]
    vars_ = [make_var(i) for i in range(len(ranges))]
    sizes = list(ranges)
    live = list(range(len(ranges)))  # positions still standing, outer to inner
    subs = {}
    k = len(live) - 2
    while k >= 0:
        i, j = live[k], live[k + 1]
        vi, vj = vars_[i], vars_[j]
        ok = True
        for e in exprs:
            ci, cj = _coeff(e, vi), _coeff(e, vj)
            if ci is None or cj is None or not known_equal(ci, cj * sizes[j]):
                ok = False
                break
        if ok:
            exprs = [e.subs(vi, 0) for e in exprs]
            subs[vi] = sympy.Integer(0)
            sizes[j] = sizes[i] * sizes[j]
            del live[k]
        k -= 1
    if len(live) == len(ranges):
        return ranges, ops
    rename = {vars_[p]: make_var(n) for n, p in enumerate(live)}
    mapping = {**subs, **rename}
    new_ops = [dataclasses.replace(o, index=o.index.xreplace(mapping)) if o.index is not None else o
               for o in ops]
    return [sizes[p] for p in live], new_ops
