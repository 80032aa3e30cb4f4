"""Buffer planning: which stored buffers live in memory, when each is allocated, freed, reused.

A buffer that only its own kernel reads never touches memory (its store is dropped). Others are
allocated just before the step that writes them and dropped after their last reader; a dropped
kernel-written buffer is recycled for a later one of the same byte size, dtype and device
(never one an extern saw: the extern's result may alias it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ember_inductor.ir import Buffer, ExternCall, numel
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


@dataclass
class PlannedStep:
    step: object                                  # KernelGroup | ExternCall
    allocs: list = field(default_factory=list)    # Alloc, before the step
    frees: list = field(default_factory=list)     # names, after the step
    live_out: set = field(default_factory=set)    # group: buffers its kernel must store


def extern_buffers(call: ExternCall) -> list[Buffer]:
    leaves = torch.utils._pytree.tree_leaves((call.args, call.kwargs))
    return [b for b in leaves if isinstance(b, Buffer)]


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

    planned, pool = [], []
    for i, s in enumerate(steps):
        ps = PlannedStep(s)
        if isinstance(s, KernelGroup):
            for node in s.nodes:
                if node.name in output_names or last_use.get(node.name, -1) > i:
                    ps.live_out.add(node.name)
                    reuse = None
                    if node.name not in output_names:
                        for k, (old, nbytes, dtype, device) in enumerate(pool):
                            if (nbytes, dtype, device) == (_nbytes(node), node.dtype, node.device):
                                reuse = old
                                del pool[k]
                                break
                    ps.allocs.append(Alloc(node.name, tuple(node.sizes), tuple(node.strides), node.dtype,
                                           node.device, reuse))
        produced = ({n.name for n in s.nodes} if isinstance(s, KernelGroup)
                    else {o.name for o in s.outputs if o is not None})
        for name in sorted(reads[i] | produced):
            if name in output_names or name in input_names or last_use.get(name, -1) > i:
                continue
            if name in produced and isinstance(s, KernelGroup) and name not in ps.live_out:
                continue  # kernel-local, never allocated
            ps.frees.append(name)
            node = written.get(name)
            if node is not None and name not in seen_by_extern and _may_hold_bytes(node):
                pool.append((name, _nbytes(node), node.dtype, node.device))
        planned.append(ps)
    # a freed buffer that a later one takes over is dropped at the takeover, not at its free
    reused = {a.reuse for ps in planned for a in ps.allocs if a.reuse}
    for ps in planned:
        ps.frees = [n for n in ps.frees if n not in reused]
    return planned

