"""Mutated inputs written in place by the kernels that compute their new values.

Note [mutated inputs written in place]
    A functional graph returns the new value of each input it mutates (an optimizer's
    parameters and state, batch-norm running statistics); ember_autograd marks those outputs
    (`meta["ember_mutations"]` on the output node: (output position, input position) pairs,
    Note [compiler metadata] in ember_autograd/runtime.py) and copies each one back into its
    input after the call. Copying costs a pass over memory per tensor (an Adam step on CPU
    spent more time in the write-back than in its kernels). So the kernel that computes such a
    value stores it straight into the input's memory: the buffer *is* the input (the wrapper
    binds it to the input tensor, the kernel gets the input once, as an "inout" argument), and
    the graph returns the input tensor itself, which the runtime recognises and does not copy.

    This is done only where no one can see the difference. For the input I and the buffer B
    holding its new value:
    - B is written by a kernel (not an extern, not a view), has I's sizes, strides, dtype and
      device, and is returned once, at I's mutation position only;
    - I is returned by no output (an output reading I would see the new value), no extern
      reads I (its result may alias I), and no step after B's kernel reads I;
    - inside B's kernel every load of I is at the index B is stored at, and comes before the
      store in the kernel's op order (each element is read, then overwritten, by the one lane
      that owns it); in a reduction kernel B is stored in an outer stage (the epilogue), so no
      inner loop runs after the store.
    Anything else keeps the copy after the call (the fallback, always correct). A kernel whose
    arguments alias needs this one-argument form: the C++ backend declares its pointers
    `__restrict__`. Inputs are taken not to share memory with one another: ember_autograd
    checks it before each call (a mutated input that aliases another runs eagerly). An input
    that `CompiledGraph` re-lays out to the compiled strides is written in its copy, which the
    graph returns, so the runtime copies it back as before.
"""
from __future__ import annotations

import dataclasses

from ember_inductor.kernel import KernelArg, KernelSpec
from ember_inductor.ir import Buffer, ComputedBuffer, InputBuffer
from ember_inductor.planner import PlannedStep, extern_buffers
from ember_inductor.scheduler import KernelGroup


def plan_in_place(lowered, planned: list[PlannedStep], specs: dict[int, KernelSpec],
                  mutations) -> dict[str, str]:
    """{buffer name: input name} for each mutated input its kernel may write in place.
    specs: id(KernelGroup) -> its finalized KernelSpec."""
    if not mutations:
        return {}
    out_names = [o.name for o in lowered.outputs if isinstance(o, Buffer)]
    reads_after: dict[int, set] = {}  # step index -> names read by this step or a later one
    later: set = set()
    extern_read: set = set()
    for i in range(len(planned) - 1, -1, -1):
        step = planned[i].step
        if isinstance(step, KernelGroup):
            later = later | set(step.kb.loaded)
        else:
            names = {b.name for b in extern_buffers(step)}
            extern_read |= names
            later = later | names
        reads_after[i] = later
    writer = {n.name: i for i, ps in enumerate(planned) if isinstance(ps.step, KernelGroup) for n in ps.step.nodes}
    found: dict[str, str] = {}
    for out_pos, in_pos in mutations:
        if out_pos >= len(lowered.outputs) or in_pos >= len(lowered.inputs):
            continue
        buf, inp = lowered.outputs[out_pos], lowered.inputs[in_pos]
        if not (isinstance(buf, ComputedBuffer) and isinstance(inp, InputBuffer)) or buf.is_view:
            continue
        if (tuple(buf.sizes), tuple(buf.strides), buf.offset, buf.dtype, buf.device) != \
                (tuple(inp.sizes), tuple(inp.strides), inp.offset, inp.dtype, inp.device):
            continue
        i = writer.get(buf.name)
        if i is None or out_names.count(buf.name) != 1 or inp.name in out_names or inp.name in extern_read \
                or buf.name in found:
            continue
        if i + 1 < len(planned) and inp.name in reads_after[i + 1]:
            continue
        if _safe_in_kernel(specs[id(planned[i].step)], buf.name, inp.name):
            found[buf.name] = inp.name
    return found


# Note [buffers taken over in place]
#     A backward is mostly elementwise work on values that die where they are read: a gradient
#     times a mask, two partial gradients summed. Taking a dead buffer's memory only after the
#     kernel that reads it last (the planner's pool) keeps both alive during that kernel, and a
#     backward's peak sits on such kernels (BERT: the tied embedding's two partial gradients
#     and their sum, 3 x 89 MB). So the planner offers each buffer a kernel computes one that
#     the same kernel reads for the last time, of the same sizes, strides, dtype and device
#     (`Alloc.takeover`): kernel-written, or the result of an ATen functional op (new memory);
#     never an input, an output, a view's base, or a buffer an extern read (its result may
#     alias it). Once the kernel is rendered, the offer is kept only under the conditions of
#     Note [mutated inputs written in place] (`_safe_in_kernel`: every load of the old buffer
#     is at the new one's store index, before the store); the kernel then has the old buffer as
#     one "inout" argument and the wrapper binds the new name to it. A refused offer allocates
#     fresh memory.
def confirm_takeovers(planned: list[PlannedStep], names: dict, specs: list[KernelSpec]) -> list[KernelSpec]:
    """`specs` (in `planned` kernel order) with each confirmed takeover's kernel rewritten;
    sets `Alloc.alias` for those, clears `Alloc.takeover` for the refused ones."""
    position = {name: k for k, name in enumerate(s.name for s in specs)}
    specs = list(specs)
    for ps in planned:
        if not isinstance(ps.step, KernelGroup):
            continue
        for a in ps.allocs:
            if a.takeover is None:
                continue
            k = position[names[id(ps.step)]]
            if a.alias is None and _safe_in_kernel(specs[k], a.name, a.takeover):
                specs[k] = rewrite_spec(specs[k], {a.name: a.takeover})
                a.alias = a.takeover
            a.takeover = None
    return specs


def _safe_in_kernel(spec: KernelSpec, buf: str, inp: str) -> bool:
    stores = [k for k, o in enumerate(spec.ops) if o.kind == "store" and o.target == buf]
    if len(stores) != 1:
        return False
    store = spec.ops[stores[0]]
    if spec.is_reduction and any(s.name.startswith("r") for s in store.index.free_symbols):
        return False
    for k, o in enumerate(spec.ops):
        if o.kind == "load" and o.target == inp and (k > stores[0] or o.index != store.index):
            return False
    return True


def rewrite_spec(spec: KernelSpec, renames: dict[str, str]) -> KernelSpec:
    """`spec` storing each buffer of `renames` into its input instead (one "inout" argument),
    and reading it from there: a later kernel that loads the buffer gets the input as its
    argument, so its loads are renamed with it."""
    mine = {b: i for b, i in renames.items() if any(a.name == b for a in spec.args)}
    if not mine:
        return spec
    ops = tuple(dataclasses.replace(o, target=mine[o.target])
                if o.kind in ("store", "load") and o.target in mine else o for o in spec.ops)
    written = set(mine.values())
    args, seen = [], set()
    for a in spec.args:
        name = mine.get(a.name, a.name)
        if name in seen:
            continue
        seen.add(name)
        args.append(KernelArg(name, a.dtype, "inout") if name in written else a)
    return dataclasses.replace(spec, args=tuple(args), ops=ops).with_stages()
