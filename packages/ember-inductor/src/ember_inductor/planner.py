"""Buffer planning: which stored buffers live in memory, when each is allocated, freed, reused.

A buffer that only its own kernel reads never touches memory (its store is dropped). Others are
allocated just before the step that writes them and dropped after their last reader; a dropped
kernel-written buffer is recycled for a later one of the same byte size, dtype and device
(never one an extern saw: the extern's result may alias it).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch

from ember_inductor.ir import Buffer, ExternCall, contiguous_strides, numel
from ember_inductor.scheduler import KernelGroup
from ember_inductor.sizes import is_static


@dataclass
class Alloc:
    name: str
    sizes: tuple
    strides: tuple
    dtype: torch.dtype
    device: torch.device
    reuse: str | None = None  # name of a dead buffer whose memory this one takes
    alias: str | None = None  # name of the input this buffer is (Note [mutated inputs written in place])
    # a buffer read for the last time by this buffer's own kernel, whose memory this one may
    # take over (Note [buffers taken over in place]); confirmed or dropped once the kernel is
    # rendered (compile.py), then set as `alias`
    takeover: str | None = None


@dataclass
class PlannedStep:
    step: object                                  # KernelGroup | ExternCall
    allocs: list = field(default_factory=list)    # Alloc, before the step
    frees: list = field(default_factory=list)     # names, after the step
    live_out: set = field(default_factory=set)    # group: buffers its kernel must store


def extern_buffers(call: ExternCall) -> list[Buffer]:
    leaves = torch.utils._pytree.tree_leaves((call.args, call.kwargs))
    return [b for b in leaves if isinstance(b, Buffer)]


# Note [an extern's operand written in place]
#     An extern `index_put` (a scatter: the embedding's backward, max-pooling's) clones its first
#     operand and writes into the clone. When that operand is this graph's own memory (a zero
#     fill, or a matrix product after Note [scatter into a sum] in passes.py) that nothing reads
#     afterwards, the clone only doubles the memory (BERT-base: 2 x 89 MB for the word
#     embeddings' gradient), so the wrapper calls the prim's in-place form (`in_place_externs`)
#     on the buffer itself. The operand must be kernel-written or an ATen functional op's result
#     (not a view, an input, an output or another extern's operand), read by no later step, and
#     laid out as the result (dense, row-major, at offset 0).
@functools.cache
def in_place_externs() -> dict:
    from ember_prims.prims.indexing import index_put_into
    return {torch.ops.ember_prims.index_put.default: index_put_into}


def _may_write_in_place(call: ExternCall, i: int, owned: dict, last_use: dict, output_names: set,
                        input_names: set, reads: list, steps: list) -> bool:
    """owned: name -> buffer, for the buffers this graph's kernels write and the results of
    ATen functional ops (new memory)."""
    if not call.args or call.op not in in_place_externs() or len(call.outputs) != 1 or call.outputs[0] is None:
        return False
    a, out = call.args[0], call.outputs[0]
    if not isinstance(a, Buffer) or a.is_view or a.name not in owned or a.name in output_names \
            or a.name in input_names or last_use.get(a.name) != i:
        return False
    if [b.name for b in extern_buffers(call)].count(a.name) != 1 or any(
            a.name in r for k, (st, r) in enumerate(zip(steps, reads)) if k != i and isinstance(st, ExternCall)):
        return False
    node = owned[a.name]
    dense = tuple(contiguous_strides(node.sizes))
    return (node.offset == 0 and tuple(node.strides) == dense and tuple(out.sizes) == tuple(node.sizes)
            and tuple(out.strides) == dense and out.dtype == node.dtype and out.device == node.device)


# ATen's functional ops return new memory (functionalization relies on it): their results may be
# taken over; a prim's or an unknown callable's result might alias an operand.
def _fresh_extern_outputs(steps: list) -> dict:
    fresh = {}
    for s in steps:
        if isinstance(s, ExternCall) and isinstance(s.op, torch._ops.OpOverload) and s.op.namespace == "aten" \
                and not any(r.alias_info is not None for r in s.op._schema.returns) \
                and not s.op.is_view:
            fresh.update({o.name: o for o in s.outputs if o is not None and not o.is_view})
    return fresh


def _nbytes(node) -> int:
    return numel(node.sizes) * node.dtype.itemsize


def _may_hold_bytes(node) -> bool:
    n = _nbytes(node)
    return not is_static(n) or n > 0  # a symbolic size may be 0 for some values: reused only by an equal one


def plan_buffers(steps: list, outputs: list, input_names: set) -> list[PlannedStep]:
    reads: list[set] = []
    for s in steps:
        reads.append(set(s.kb.loaded) if isinstance(s, KernelGroup) else {b.name for b in extern_buffers(s)})
    output_names = {o.name for o in outputs if isinstance(o, Buffer)}
    last_use: dict[str, int] = {}
    for i, r in enumerate(reads):
        for name in r:
            last_use[name] = i
    written = {n.name: n for s in steps if isinstance(s, KernelGroup) for n in s.nodes}
    seen_by_extern = {name for s, r in zip(steps, reads) if isinstance(s, ExternCall) for name in r}

    fresh = _fresh_extern_outputs(steps)
    owned = {**fresh, **{n: b for n, b in written.items() if not b.is_view}}
    for i, s in enumerate(steps):
        if isinstance(s, ExternCall):
            s.in_place = _may_write_in_place(s, i, owned, last_use, output_names, input_names, reads, steps)
    layout_of = {**{n: (tuple(b.sizes), tuple(b.strides), b.offset, b.dtype, b.device) for n, b in fresh.items()},
                 **{n: (tuple(b.sizes), tuple(b.strides), b.offset, b.dtype, b.device) for n, b in written.items()
                    if not b.is_view}}
    taken: set = set()
    planned, pool = [], []
    for i, s in enumerate(steps):
        ps = PlannedStep(s)
        if isinstance(s, KernelGroup):
            own = {n.name for n in s.nodes}
            # Note [buffers taken over in place]: buffers this kernel reads for the last time
            dying = sorted(n for n in reads[i] if last_use.get(n) == i and n not in own and n in layout_of
                           and n not in output_names and n not in input_names and n not in seen_by_extern
                           and n not in taken)
            for node in s.nodes:
                if node.name in output_names or last_use.get(node.name, -1) > i:
                    ps.live_out.add(node.name)
                    reuse = None
                    mine = (tuple(node.sizes), tuple(node.strides), 0, node.dtype, node.device)
                    takeover = next((n for n in dying if layout_of[n] == mine and n not in taken
                                     and is_static(numel(node.sizes)) and numel(node.sizes) > 1), None)
                    if takeover is not None:
                        taken.add(takeover)
                    elif node.name not in output_names:
                        for k, (old, nbytes, dtype, device) in enumerate(pool):
                            if (nbytes, dtype, device) == (_nbytes(node), node.dtype, node.device):
                                reuse = old
                                del pool[k]
                                break
                    ps.allocs.append(Alloc(node.name, tuple(node.sizes), tuple(node.strides), node.dtype,
                                           node.device, reuse, takeover=takeover))
        produced = ({n.name for n in s.nodes} if isinstance(s, KernelGroup)
                    else {o.name for o in s.outputs if o is not None})
        for name in sorted(reads[i] | produced):
            if name in output_names or name in input_names or last_use.get(name, -1) > i:
                continue
            if name in produced and isinstance(s, KernelGroup) and name not in ps.live_out:
                continue  # kernel-local, never allocated
            ps.frees.append(name)
            node = written.get(name)
            if node is not None and name not in seen_by_extern and name not in taken and _may_hold_bytes(node):
                pool.append((name, _nbytes(node), node.dtype, node.device))
        planned.append(ps)
    # a freed buffer that a later one takes over is dropped at the takeover, not at its free
    reused = {a.reuse for ps in planned for a in ps.allocs if a.reuse}
    for ps in planned:
        ps.frees = [n for n in ps.frees if n not in reused]
    return planned

