"""Fusion: realized buffers -> kernels (groups sharing one iteration space).

Note [Fusion rules]
    Steps arrive in execution order. A buffer joins the most recent kernel when its iteration
    space fits that kernel's and reading it in the kernel needs no other index than the one
    stored there (`FusionConflict` otherwise, and the trial is rolled back):
      * pointwise over S into a pointwise kernel over S;
      * a reduction of an input shaped S over dims D into a pointwise kernel over S
        (the kernel becomes a reduction kernel, its earlier buffers stored in the inner loop);
      * into a reduction kernel (S, D): pointwise over S (inner loop), pointwise over the
        kept dims (epilogue, outer stage), another reduction of S over D (softmax, layer_norm).
    Extern calls end the current kernel. Trying only the last kernel keeps fusion linear.

Note [statistics kept with keepdim]
    "Pointwise over the kept dims" includes the kept dims with each reduced dim as a size-1
    dim: a training forward saves layer norm's mean and rstd as (rows, 1) buffers, and each
    was a kernel of its own between the reductions (GPT-2: five kernels per layer norm where
    inference had one, 48 of them a step). Such a buffer is stored at index 0 of the reduced
    dims, in the epilogue, and read back by the kernel's later stages at that same index.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ember_inductor.kernel import range_var, reduction_var
from ember_inductor.ir import ComputedBuffer, ExternCall, FusionConflict, KernelBuilder, Reduction


@dataclass
class KernelGroup:
    """A kernel being built: its iteration space, its buffers, its op DAG."""
    kind: str                 # "pointwise" | "reduction"
    sizes: tuple              # pointwise: the space; reduction: the input's shape
    dims: tuple = ()          # reduction: the reduced dims
    nodes: list = field(default_factory=list)
    kb: KernelBuilder = field(default_factory=KernelBuilder)

    @property
    def kept_sizes(self) -> tuple:
        return tuple(s for i, s in enumerate(self.sizes) if i not in self.dims)

    @property
    def kept_sizes_keepdim(self) -> tuple:
        """The kept sizes with each reduced dim as 1 (a statistic kept with keepdim=True)."""
        return tuple(1 if i in self.dims else s for i, s in enumerate(self.sizes))

    # the kernel's variables: size-1 dims get index 0 and no variable
    def full_index(self) -> tuple:
        out, nx, nr = [], 0, 0
        for i, s in enumerate(self.sizes):
            if s == 1:
                out.append(sympy.Integer(0))
            elif i in self.dims:
                out.append(reduction_var(nr))
                nr += 1
            else:
                out.append(range_var(nx))
                nx += 1
        return tuple(out)

    def kept_index(self) -> tuple:
        full = self.full_index()
        return tuple(v for i, v in enumerate(full) if i not in self.dims)

    @property
    def ranges(self) -> tuple:
        return tuple(sympy.sympify(s) for i, s in enumerate(self.sizes) if s != 1 and i not in self.dims)

    @property
    def reduction_ranges(self) -> tuple:
        return tuple(sympy.sympify(s) for i, s in enumerate(self.sizes) if s != 1 and i in self.dims)

    def emit(self, node: ComputedBuffer) -> None:
        """Add the ops computing and storing `node` (raises FusionConflict)."""
        kb, body = self.kb, node.body
        if isinstance(body, Reduction):
            result = body.fn(kb, self.full_index())
            args = result if isinstance(result, tuple) else (result,)
            value = kb.add("reduce", body.reduce_type, args, node.dtype)
            kb.store(node.name, node.offset_of(self.kept_index()), value)
        else:
            index = self.index_for(tuple(node.sizes))
            kb.store(node.name, node.offset_of(index), kb.value(body, index))

    def index_for(self, sizes: tuple) -> tuple:
        """The index of a pointwise buffer over `sizes` in this kernel: the full space, the kept
        dims, or the kept dims with the reduced ones as size-1 dims (index 0)."""
        full = self.full_index()
        if sizes == self.sizes:
            return full
        if sizes == self.kept_sizes:
            return tuple(v for i, v in enumerate(full) if i not in self.dims)
        return tuple(sympy.Integer(0) if i in self.dims else v for i, v in enumerate(full))


def _fits(group: KernelGroup, node: ComputedBuffer) -> str | None:
    """How `node` would join `group`: None if its space does not fit."""
    body, sizes = node.body, tuple(node.sizes)
    if group.nodes and group.nodes[0].device != node.device:
        return None  # one kernel runs on one device (CPU scalars join CUDA graphs)
    if isinstance(body, Reduction):
        if group.kind == "pointwise" and group.sizes == tuple(body.input_sizes):
            return "promote"
        if group.kind == "reduction" and (group.sizes, group.dims) == (tuple(body.input_sizes), body.dims):
            return "join"
        return None
    if sizes == group.sizes or (group.kind == "reduction" and sizes in (group.kept_sizes, group.kept_sizes_keepdim)):
        return "join"  # Note [statistics kept with keepdim]
    return None


def _new_group(node: ComputedBuffer) -> KernelGroup:
    body = node.body
    if isinstance(body, Reduction):
        return KernelGroup("reduction", tuple(body.input_sizes), tuple(body.dims))
    return KernelGroup("pointwise", tuple(node.sizes))


def _try(group: KernelGroup, node: ComputedBuffer) -> bool:
    mark = group.kb.mark()
    try:
        group.emit(node)
    except FusionConflict:
        group.kb.rollback(mark)
        return False
    group.nodes.append(node)
    return True


LOOKBACK = 8  # kernels tried per buffer: keeps fusion linear in the graph


def fuse(steps: list, max_fusion_size: int) -> list:
    """Group ComputedBuffers into KernelGroups (see Note [Fusion rules]); externs stay steps.

    A buffer may also join an earlier kernel after the last extern call, when it reads nothing
    that the kernels in between write (two output chains over one input share a kernel).
    """
    out: list = []
    barrier = 0  # index in `out` after the last extern call
    for step in steps:
        if isinstance(step, ExternCall):
            out.append(step)
            barrier = len(out)
            continue
        if not _fuse_into_earlier(out, barrier, step, max_fusion_size):
            group = _new_group(step)
            if not _try(group, step):
                raise AssertionError(f"{step.name} conflicts with itself")
            out.append(group)
    return out


def _fuse_into_earlier(out, barrier, step, max_fusion_size) -> bool:
    later_written: set[str] = set()
    for ci in range(len(out) - 1, max(barrier, len(out) - LOOKBACK) - 1, -1):
        group = out[ci]
        how = _fits(group, step) if len(group.nodes) < max_fusion_size else None
        if how == "promote":
            promoted = KernelGroup("reduction", tuple(step.body.input_sizes), tuple(step.body.dims))
            if all(_try(promoted, n) for n in group.nodes) and _try(promoted, step) and \
                    not (set(promoted.kb.loaded) & later_written):
                out[ci] = promoted
                return True
        elif how == "join":
            if _independent_and_too_wide(group, step):
                later_written |= {n.name for n in group.nodes}
                continue
            before, mark = set(group.kb.loaded), group.kb.mark()
            if _try(group, step):
                if not ((set(group.kb.loaded) - before) & later_written):
                    return True
                group.kb.rollback(mark)
                group.nodes.pop()
        later_written |= {n.name for n in group.nodes}
    return False


# Note [independent loops on the CPU]: a C++ kernel runs its buffers' loops as one loop, so a
# pointwise buffer that shares no input or output with a kernel adds its memory streams to every
# iteration. Past a dozen or so streams the CPU's prefetchers lose track: a foreach optimizer
# step (one independent update per parameter, 3 buffers each) fused 64 at a time ran 3x slower
# than eager's three passes (50 parameters of 1024x1024, one thread: 200 ms against 58 ms; one
# parameter per kernel: 45-66 ms). On the CPU such an independent buffer joins a kernel only while
# the kernel touches fewer than CPU_INDEPENDENT_STREAMS buffers; buffers that share data with the
# kernel (the usual vertical and sibling fusions) are not limited. GPU kernels are not: there one
# launch per buffer costs more than the streams.
CPU_INDEPENDENT_STREAMS = 12


def _independent_and_too_wide(group: KernelGroup, step: ComputedBuffer) -> bool:
    if step.device.type != "cpu" or len(group.kb.loaded) + len(group.kb.stored) < CPU_INDEPENDENT_STREAMS:
        return False
    probe = _new_group(step)
    if not _try(probe, step):
        return False
    touched = set(group.kb.loaded) | set(group.kb.stored)
    return not (set(probe.kb.loaded) & touched)
