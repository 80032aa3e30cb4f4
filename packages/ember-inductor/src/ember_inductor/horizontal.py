"""Horizontal fusion: independent Triton kernels launched as one combo kernel.

Note [horizontal fusion]
    A compiled optimizer step is many small independent updates, one or a few kernels per
    parameter (vertical fusion joins only buffers over one iteration space, and a parameter's
    shape is its own). On a GPU each kernel is a launch, ~3-5 µs of host and launch time, more
    than a small kernel's work: 200 parameters of 256x256 took 2.8 ms against eager's 0.37 ms,
    whose `_foreach` kernels update many tensors per launch. So after buffer planning, kernels
    that share no data are combined into one launch (codegen/triton_combo.py): the grid is the
    concatenation of the parts' programs, the body dispatches on the program id to each part's
    own code (its index arithmetic, number of elements and block size).

    Which kernels: Triton kernels of the graph's device that are static and run on a 1-D grid
    (`comboable`): pointwise kernels and reductions (each part keeps its XBLOCK and RBLOCK; the
    combo takes the largest num_warps of its parts). A tiled kernel has a 2-D grid, a symbolic
    kernel (sizes as arguments: Note [symbolic sizes in the inductor]) a grid known only at the
    call; those are launched alone.
    The C++ backend does not combine (Note [independent loops on the CPU]: one thread walking
    many independent streams is slower, and a launch costs nothing there).

    When: a kernel K joins a combo that starts at step S (the combo is launched where S was)
    only if K may run at the same time as every step from S to K: K writes no memory that any
    of them reads or writes, and reads no memory that any of them writes. So parts are
    independent of each other (they run concurrently) and K may move up to S. Memory is
    compared, not names: a buffer that takes over a dead buffer's memory (the planner's reuse)
    or that is a mutated input written in place (Note [mutated inputs written in place]) counts
    as that memory; an extern's result counts as the buffers it was given as well (it may be a
    view of them). An in-place update of an input read by another part, or a kernel reading
    what an earlier one wrote (a chain), is therefore never combined. The parts' allocations
    move up with the launch; their frees stay where they were (a step in between may still read
    a buffer a part read last).

    How many: at most COMBO_MAX_PARTS parts and COMBO_MAX_ARGS buffer arguments (CUDA kernel
    parameters are limited to 4 KB). Each part is inlined into the combo, so its Triton compile
    time grows with the parts. Measured on this project's loaded 2-core CPU (real Triton 3.6
    compiling to a cubin for sm_90, parts of 3 loads and 2 stores each: `python
    tools/combo_compile_time.py 1 8 16 32`): one part 0.15 s, 8 parts 0.86 s, 16 parts 2.1 s,
    32 parts 4.0 s; about linear, with the parts dispatched by flat `if`s (an `elif` chain
    nests one branch per part and took 6-7.6 s at 32 parts). Combining saves no compile work
    (16 kernels alone cost about as much) but puts it in one compile, where separate kernels
    compile on `compile_workers` threads. 16 parts keeps one combo's compile near 2 s here
    and takes a 200-parameter SGD step from 117 launches to 8 (32 would save 4 more launches,
    ~20 µs, for twice the compile latency).
    Launches per compiled step (`python tools/optimizer_launches.py`, counted on the CPU): a
    foreach SGD-momentum step over 50 parameters of one shape 29 -> 3, over 200 of one shape
    117 -> 8; AdamW over a transformer layer's 14 tensors (foreach or not) 22 and 12 -> 2 and
    2 (the graph of the first step, which creates the state, and the next steps').
    Or the other way: a combo may instead be launched where its last part was (`Combo.at`),
    each earlier part moving down past the steps in between, which must then share no memory
    with the parts (checked as each step passes: `sinkable`); the parts' allocations and frees
    move with the launch. An optimizer's step counters are 0-d kernels that each overwrite in
    place what the update before them read: none may move up, but all may move down together.
    A combo hoisted to its first part is never sunk, nor the reverse (a part moved up past a
    step need not be free to move down past it).
    A few combos are open at once (COMBO_OPEN): a kernel that cannot join the oldest may join
    a later one, so one dependent chain does not end the combining of its neighbours.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ember_inductor.planner import PlannedStep, extern_buffers
from ember_inductor.scheduler import KernelGroup

COMBO_MAX_PARTS = 16
COMBO_MAX_ARGS = 256
COMBO_OPEN = 4


@dataclass(frozen=True)
class Combo:
    """Kernels launched together; `at` (one of them) is where the launch takes place."""
    parts: tuple
    at: str


@dataclass
class _Open:
    device: object
    parts: list = field(default_factory=list)  # kernel names
    mode: str | None = None  # "first" (hoisted to its first part) | "last" (sunk to its last part)
    n_args: int = 0
    reads: set = field(default_factory=set)    # memory read by any step since the combo's start
    writes: set = field(default_factory=set)   # ... written
    part_reads: set = field(default_factory=set)   # memory its parts read
    part_writes: set = field(default_factory=set)  # ... write
    sinkable: bool = True  # no step after a part conflicts with the parts: they may move down

    def combo(self) -> Combo:
        return Combo(tuple(self.parts), self.parts[-1] if self.mode == "last" else self.parts[0])

    def how(self, device, n_args: int, reads: set, writes: set, max_parts: int) -> str | None:
        """How a kernel (its memory `reads`, `writes`) may join: "first", "last" or None."""
        if self.device != device or len(self.parts) >= max_parts or self.n_args + n_args > COMBO_MAX_ARGS:
            return None
        if _conflict(reads, writes, self.part_reads, self.part_writes):
            return None  # the parts run at the same time
        if self.mode != "last" and not _conflict(reads, writes, self.reads, self.writes):
            return "first"  # it may move up to the first part
        if self.mode != "first" and self.sinkable:
            return "last"   # the parts may move down to it
        return None

    def passed(self, reads: set, writes: set, member: bool) -> None:
        """A step (a part of this combo or not) passed, in execution order."""
        self.reads |= reads
        self.writes |= writes
        if member:
            self.part_reads |= reads
            self.part_writes |= writes
        elif _conflict(reads, writes, self.part_reads, self.part_writes):
            self.sinkable = False

    @property
    def closed(self) -> bool:
        return self.mode == "last" and not self.sinkable


def _conflict(reads: set, writes: set, other_reads: set, other_writes: set) -> bool:
    return bool(writes & (other_reads | other_writes) or reads & other_writes)


def plan_combos(planned: list[PlannedStep], names: dict, sources: dict, comboable,
                max_parts: int | None = None) -> list[Combo]:
    """The kernels to launch together (Note [horizontal fusion]), each in execution order.
    names: id(KernelGroup) -> kernel name; sources: kernel name -> its KernelSource (the
    rendered spec: arguments and roles); max_parts: COMBO_MAX_PARTS unless given."""
    max_parts = COMBO_MAX_PARTS if max_parts is None else max_parts
    memory = _memory_of(planned)
    opened: list[_Open] = []
    done: list[_Open] = []
    for ps in planned:
        step, joined = ps.step, None
        if isinstance(step, KernelGroup):
            name = names[id(step)]
            args = sources[name].kernel.args
            reads = set().union(*(memory(a.name) for a in args if a.role != "out"))
            writes = set().union(*(memory(a.name) for a in args if a.role in ("out", "inout")))
            if max_parts > 1 and comboable(sources[name]):
                device = step.nodes[0].device
                for c in opened:
                    how = c.how(device, len(args), reads, writes, max_parts)
                    if how is not None:
                        joined, c.mode = c, how
                        break
                else:
                    joined = _Open(device)
                    opened.append(joined)
                joined.parts.append(name)
                joined.n_args += len(args)
        else:
            reads = set().union(*(memory(b.name) for b in extern_buffers(step)))
            writes = set().union(*(memory(o.name) for o in step.outputs if o is not None))
        for c in opened:
            c.passed(reads, writes, c is joined)
        keep = [c for c in opened if not c.closed and len(c.parts) < max_parts]
        done += [c for c in opened if c not in keep]
        while len(keep) > COMBO_OPEN:
            done.append(keep.pop(0))
        opened = keep
    return [c.combo() for c in done + opened if len(c.parts) > 1]


def _memory_of(planned: list[PlannedStep]):
    """name -> the set of memory names it may denote (see Note [horizontal fusion])."""
    same: dict[str, str] = {}       # a buffer in another's memory (in-place alias, reuse)
    extern_out: dict[str, set] = {}  # an extern's result -> the buffers it was given
    for ps in planned:
        for a in ps.allocs:
            if a.alias or a.reuse:
                same[a.name] = a.alias or a.reuse
        if not isinstance(ps.step, KernelGroup):
            given = {b.name for b in extern_buffers(ps.step)}
            for o in ps.step.outputs:
                if o is not None:
                    extern_out[o.name] = given

    def memory(name: str) -> set:
        out, todo = set(), [name]
        while todo:
            n = todo.pop()
            while n in same:
                n = same[n]
            if n not in out:
                out.add(n)
                todo.extend(extern_out.get(n, ()))
        return out
    return memory
