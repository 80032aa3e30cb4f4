"""CUDA graph replay for mode="reduce-overhead", options={"cudagraphs": True} and the
`cudagraphs` backend: each compiled forward and backward replays as one CUDA graph, so a call
costs one graph launch instead of one launch (and its Python) per kernel.

Note [cudagraph replay]: a replayed CUDA graph reads its inputs at the addresses it was recorded
with and writes every intermediate and output at the same addresses on every replay.
- Static inputs are recorded at their own addresses and never copied: parameters and buffers
  (the facade knows them: capture lifts them to placeholders whose source is a module's
  `_parameters` / `_buffers`), and any input found at the same address on the warm-up call and
  the recording call. The others (the batch) are copied into input buffers before each replay.
  Each replay first checks that every static input is where it was recorded (one C++ call:
  ember_capture's native extension, Note [Native address check], else torch's helper); one
  that moved (`model.to()`, `load_state_dict(assign=True)`, `p.data = ...`) makes the graph
  re-record; a non-parameter that moved becomes a copied input.
- Memory: one private pool per training pair (the forward and its backward graph) and one per
  inference graph. Note [warm-up in the pool]: the call before the recording (the warm-up, and
  a training pair's first backward) allocates from the pool too, on the capture stream, as
  torch's CUDA graph trees do: its memory, freed when the call ends, is what the recording then
  reuses. Run in the ordinary allocator, it stayed cached there beside the pool (a training
  pair's reserved memory was eager's peak twice over). Only before the pool's first recording:
  after it, a call without the graph could take blocks the recorded graph writes.
  Not one pool per model: two graphs recorded one after the other in one pool may
  place the second's outputs in the first's freed intermediates, which the first's next replay
  overwrites. The forward and backward share theirs safely because the backward's outputs (the
  gradients) are copied out at once (autograd accumulates them into `.grad`, which must outlive
  the next replay).
- Outputs are handed out without a copy: the caller gets an alias of the pool's memory.
  Note [cudagraph held outputs]: before the next replay of the same graph, an output of the
  previous replay that the caller still holds is *invalidated*: reading it raises an error that
  names the output and says to clone it (torch's rule). One that is still used through a view
  made by the caller (a view cannot be invalidated; the storage's use count shows it) makes
  that call run without the graph, in fresh memory, and the view keeps its values. A previous
  output is never overwritten silently.
- Training: the forward's saved values stay in the pool, handed to autograd as they are.
  Note [saved values released to the backward]: when the backward records, the forward gives up
  its own references to its saved values (it keeps aliases that do not own the memory, at the
  same addresses) and hands them to the compiled backward, which drops each after its last use,
  as eager's engine frees a node's saved tensors: the recording then reuses their memory for
  the backward's own intermediates and gradients (before, every saved value stayed allocated
  through the whole backward: GPT-2's step reserved 7.9 GB against eager's 4.4). A replay
  therefore overwrites saved values after their last use; a backward under
  `retain_graph=True`, which another backward would read them after, runs without its graph.
  While
  they are still held (a backward has not run yet: two forwards before one backward, or
  retain_graph=True) the next forward runs without its graph, in fresh memory; its backward
  then runs without the backward graph too.
- Input mutations (batch-norm statistics in training mode, `x.add_(1)`) are written by the graph
  itself into static inputs, and copied back into copied inputs after the replay; the runtime
  of ember_autograd then skips its own write-back (`applies_mutations`, Note [compiled
  mutations] in ember_autograd/runtime.py).
- Random ops draw from torch's CUDA generator, which graph capture registers: each replay draws
  fresh numbers.
- What is not recorded runs without graphs, with one line under EMBER_LOGS=cudagraphs naming
  why: graphs with a CPU tensor input, graphs whose capture fails (a CPU sync inside, an op
  that CUDA graphs do not allow), inputs that overlap in memory.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import operator
import os
import re
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from ember_capture import native

from ember.errors import UsageError
from ember.introspect import attr_or

# torch's C++ helpers where this build has them (CUDA builds do); pure-Python fallbacks else.
_PTRS_EQUAL = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)
_SET_ACCESS_ERROR = getattr(torch._C, "_set_storage_access_error_msg", None)
_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)
_ROUTES_TO_POOL = hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")
_FROM_POINTER = getattr(torch._C, "_construct_storage_from_data_pointer", None)
_KEEP_GRAPH = getattr(getattr(torch._C, "_autograd", None), "_get_current_graph_task_keep_graph", None)

MAX_RECORDINGS = 8  # re-recordings (static inputs that keep moving) before a graph gives up


class Logger:
    """The facade's `cudagraphs` log: one line per fact, each line once."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._said: set[str] = set()

    def __call__(self, message: str) -> None:
        if self.enabled and message not in self._said:
            self._said.add(message)
            print(f"[ember:cudagraphs] {message}", file=sys.stderr)


class HeldOutputError(UsageError):
    """A call would overwrite the memory of an earlier output that is still in use (raised where
    torch cannot invalidate an output: builds without CUDA)."""


def _held_message(label: str, k: int) -> str:
    return (f"ember: output {k} of {label} was overwritten by a later call (CUDA graphs, "
            "mode='reduce-overhead', reuse output memory on every call); keep outputs across calls "
            "with `out.clone()`, or compile without CUDA graphs")


def _boxed(fn: Callable) -> Callable[[list], Any]:
    if attr_or(fn, "_boxed_call", False):
        return fn
    return lambda args: fn(*args)


def _dense(t: torch.Tensor) -> bool:
    """No two elements share memory (copy_ into such a tensor is well defined)."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride < expected:
            return False
        expected = stride * size
    return True


def _data_ptrs(tensors: Sequence, indices: Sequence[int]) -> list[int]:
    """The addresses of `tensors[i]` for i in indices, at position i (0 elsewhere)."""
    ptrs = [0] * len(tensors)
    for i in indices:
        ptrs[i] = tensors[i].data_ptr()
    return ptrs


_data_ptr = torch.Tensor.data_ptr


class AddressCheck:
    """Are `args[i]` for i in `indices` still at the addresses they have now? A call checks ~300
    parameters: torch's C++ helper where the build has it (CUDA builds; 20 us for 300 on an H100
    host), else one C-level pass (itemgetter, map over data_ptr; 23 us), never a Python loop."""

    def __init__(self, args: Sequence, indices: Sequence[int]) -> None:
        self.indices = list(indices)
        if len(self.indices) > 1:
            self.gather = operator.itemgetter(*self.indices)
        else:
            self.gather = lambda a, idx=tuple(self.indices): tuple(a[i] for i in idx)
        self.ptrs = list(map(_data_ptr, self.gather(args)))
        self.by_position = _data_ptrs(args, self.indices)  # the helper's layout
        self._native: Callable | None = None

    def __call__(self, args: Sequence) -> bool:
        fast = self._native
        if fast is None and native.loaded():  # built in the background after this recording
            fast = self._native = native.address_check(self.indices, self.ptrs)
        if fast is not None:
            return fast(args)
        try:
            if _PTRS_EQUAL is not None:
                return _PTRS_EQUAL(args, self.by_position, self.indices)
            return list(map(_data_ptr, self.gather(args))) == self.ptrs
        except (TypeError, IndexError, RuntimeError):  # not a tensor, too few: not shown where it was
            return False


def address_check(args: Sequence, indices: Sequence[int]) -> Callable[[Sequence], bool]:
    """`check(args) -> bool`: are `args[i]` for i in `indices` still at the addresses they have
    now? One C call of ember_capture's native extension when it is loaded (Note [Native address
    check]: ~2 us for 300 parameters, against ~20 us for torch's helper or `AddressCheck`), else
    `AddressCheck`."""
    indices = list(indices)
    check = native.address_check(indices, [args[i].data_ptr() for i in indices])
    return check if check is not None else AddressCheck(args, indices)


def _storage_uses(t: torch.Tensor) -> int:
    return _USE_COUNT(t.untyped_storage()._cdata) if _USE_COUNT is not None else 0


# One capture stream per device: cuBLAS keeps a workspace (32 MiB on an H100) per stream, and
# a fresh stream per recording would keep one more each time.
_CAPTURE_STREAMS: dict[int, Any] = {}


def _capture_stream(device: int):
    stream = _CAPTURE_STREAMS.get(device)
    if stream is None:
        stream = _CAPTURE_STREAMS[device] = torch.cuda.Stream()
    return stream


# Note [pools released at a safe point]
#     CUDA's caching allocator asserts, and the process aborts, when it frees a pool's cached
#     memory (a MemPool's destruction, `torch.cuda.empty_cache()`) while any allocation is being
#     routed to a pool: during a recording, or during a warm-up in the pool (Note [warm-up in the
#     pool]). Two ways that happened:
#     - a dead compiled model's MemPool collected by the garbage collector in the middle of another
#       model's warm-up (the collector runs wherever Python allocates), or from the autograd
#       engine's thread during a backward's warm-up;
#     - a recording that failed (a host sync inside it) ended without `capture_end` completing,
#       which left the allocator believing the capture still underway: every later pool release
#       or `empty_cache()` in the process aborted (a GPU test worker died this way, 2026-11-28).
#     So a dropped Pool's MemPool is kept in `_RETIRED` and released at the next safe point (before
#     a warm-up or a recording begins, and at exit), and a failed recording ends the allocator's
#     routing to its pool itself (`_end_failed_capture`).
_RETIRED: list = []


def _release_retired() -> None:
    while _RETIRED:
        _RETIRED.pop()


atexit.register(_release_retired)


def _end_failed_capture(device: int, pool_id) -> None:
    """What `capture_end` does for the allocator, for a recording whose capture_end did not
    complete (Note [pools released at a safe point])."""
    end = getattr(torch._C, "_cuda_endAllocateToPool", None) or \
        getattr(torch._C, "_cuda_endAllocateCurrentStreamToPool", None)
    release = getattr(torch._C, "_cuda_releasePool", None)
    if end is None or release is None:
        return
    try:
        end(device, pool_id)
        release(device, pool_id)
    except RuntimeError:  # this build's allocator already ended it
        pass


class Pool:
    """The private memory pool of one inference graph or one training pair, and the warm-up
    call's use of it (Note [warm-up in the pool]). `handle` is what `capture_begin` takes."""

    def __init__(self, handle=None) -> None:
        self._handle = handle  # made at first use (a CPU-only process never makes one)
        self._mempool = None
        self.recorded = False

    def __del__(self) -> None:
        mempool = getattr(self, "_mempool", None)
        if mempool is not None and _RETIRED is not None:  # Note [pools released at a safe point]
            _RETIRED.append(mempool)  # (None: this module torn down at exit)
        self._mempool = None

    @property
    def handle(self):
        if self._handle is None:
            # a MemPool keeps its pool alive while this object lives, and can route a thread's
            # allocations to it; a bare handle (older torch, or given) is only recorded into
            if _ROUTES_TO_POOL:
                self._mempool = torch.cuda.MemPool()
                self._handle = self._mempool.id
            else:
                self._handle = torch.cuda.graph_pool_handle()
        return self._handle

    @contextlib.contextmanager
    def warm_up(self):
        """Allocate the body's memory from the pool, on the capture stream, until the pool's
        first recording; after it, the ordinary allocator."""
        if self.recorded or self.handle is None or self._mempool is None:
            yield
            return
        _release_retired()  # Note [pools released at a safe point]
        stream = _capture_stream(torch.cuda.current_device())
        caller = torch.cuda.current_stream()
        stream.wait_stream(caller)
        try:
            with torch.cuda.stream(stream), torch.cuda.use_mem_pool(self._mempool):
                yield
        finally:
            caller.wait_stream(stream)


def _capture(pool: Pool, body: Callable[[], list]) -> tuple[Any, list]:
    """Record `body()` as a CUDA graph in `pool` on a side stream; its outputs are the graph's
    outputs. Unlike `torch.cuda.graph`, a failed capture leaves the current stream and the
    CUDA random generator as they were (torch leaves the generator in capture mode, and every
    later random op on the device fails)."""
    graph = torch.cuda.CUDAGraph()
    device = torch.cuda.current_device()
    generator = torch.cuda.default_generators[device]
    before = generator.clone_state()
    stream = _capture_stream(device)
    pool.recorded = True  # from here on, nothing but recordings allocates from the pool
    _release_retired()  # Note [pools released at a safe point]
    stream.wait_stream(torch.cuda.current_stream())
    began = ended = False
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin(pool=pool.handle)
            began = True
            try:
                outs = body()
            finally:
                graph.capture_end()
                ended = True
    except BaseException:
        if began and not ended:
            _end_failed_capture(device, pool.handle)
        generator.graphsafe_set_state(before)
        raise
    torch.cuda.current_stream().wait_stream(stream)
    return graph, outs


def _is_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_cuda


class Recording:
    """One recorded graph and what its replays need."""

    def __init__(self, graph, inputs: list, copied: list[int], static: list[int], outputs: list,
                 handed: int) -> None:
        self.graph = graph
        self.inputs = inputs              # recorded inputs: the real static ones, buffers for copied
        self.copied = copied              # positions copied into `inputs` before each replay
        self.copied_set = frozenset(copied)
        self.static = static              # positions recorded at their own address
        self.static_ptrs = _data_ptrs(inputs, static)
        self.check = address_check(inputs, static)
        self.outputs = outputs            # the pool's output tensors (None / numbers as they are)
        self.handed = handed              # outputs from here on are saved for the backward
        # handed outputs that live in the pool (not an input's memory): invalidated when held
        input_storages = {a.untyped_storage().data_ptr() for a in inputs}
        self.pool_outputs = [k for k in range(handed) if isinstance(outputs[k], torch.Tensor)
                             and outputs[k].untyped_storage().data_ptr() not in input_storages]
        self.baseline = {k: _storage_uses(outputs[k]) for k in self.pool_outputs}


class GraphRunner:
    """Calls `fn` (a compiled graph over a flat list of tensors) and, from its second call on,
    replays it as a CUDA graph (Note [cudagraph replay]). Called boxed: `runner(list)`.

    handed: how many leading outputs go to the caller (each call: fresh aliases, invalidated at
    the next replay); the rest are the forward's saved values, handed as they are.
    mutations: (output position, input position) pairs: the runner writes those outputs into
    those inputs (`applies_mutations`).
    """

    _boxed_call = True
    applies_mutations = True

    def __init__(self, fn: Callable, *, label: str, pool, static_hint: frozenset[int] = frozenset(),
                 handed: int | None = None, mutations: Sequence[tuple[int, int]] = (),
                 log: Logger | None = None) -> None:
        self.fn = _boxed(fn)
        self.label = label
        self.pool = pool if isinstance(pool, Pool) else Pool(pool)
        self.static_hint = static_hint
        self.handed = handed
        self.mutations = tuple(mutations)
        self.log = log or Logger(False)
        self.disabled: str | None = None
        self.rec: Recording | None = None
        self.generation = 0               # bumped at each recording (the backward follows it)
        self.recordings = 0
        self.demoted: set[int] = set()    # non-parameters that moved: copied from then on
        self._warm_ptrs: list[int] | None = None
        self._out_refs: list = []         # weak references to the aliases handed out last replay
        self._saved_ref = None            # weak reference to one saved value: a backward pending
        self.replays = 0

    # -- the call ---------------------------------------------------------------------------
    def __call__(self, args: list) -> Any:
        rec = self.rec
        if (rec is not None and rec.check(args)
                and (self._saved_ref is None or self._saved_ref() is None)):
            return self._replay(rec, args)
        return self._slow_call(args)

    def _replay(self, rec: Recording, args: list) -> Any:
        if self._out_refs and not self._release_held(rec):
            self.log(f"{self.label}: an output of its previous call is still used through a view; "
                     "this call runs without its CUDA graph, in fresh memory")
            return self.run_eager(args)
        inputs = rec.inputs
        for i in rec.copied:
            inputs[i].copy_(args[i])
        rec.graph.replay()
        for j in rec.copy_back:  # Note [cudagraph replay]: copied inputs get their new value
            args[j].copy_(inputs[j])
        self.replays += 1
        return self._hand_out(rec)

    def _slow_call(self, args: list) -> Any:
        if self.disabled is None:
            if self._saved_ref is not None and self._saved_ref() is not None:
                self.log(f"{self.label}: called again before the backward of its previous call; "
                         "this call runs without its CUDA graph, in fresh memory")
                return self.run_eager(args)
            if self.rec is not None or self._warm_ptrs is not None:
                return self._record_and_replay(args)
            if not all(_is_cuda(a) for a in args):
                self._disable("an input is not a CUDA tensor")
            else:
                self._warm_ptrs = [a.data_ptr() for a in args]
                with self.pool.warm_up():  # Note [warm-up in the pool]
                    return self.run_eager(args)
        return self.run_eager(args)

    def run_eager(self, args: list) -> Any:
        """The compiled graph itself, in fresh memory, with the runner's mutations applied."""
        return self._write_mutations(args, list(self.fn(list(args))))

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.rec = None
        self.log(f"{self.label} runs without CUDA graphs: {reason}")

    # -- recording --------------------------------------------------------------------------
    def _classify(self, args: list) -> tuple[list[int], list[int]]:
        rec, warm = self.rec, self._warm_ptrs
        if rec is not None:  # a static input moved: a non-parameter one is copied from now on
            self.demoted |= {i for i in rec.static
                             if args[i].data_ptr() != rec.static_ptrs[i] and i not in self.static_hint}
        static = [i for i, a in enumerate(args) if i in self.static_hint or
                  (i not in self.demoted and warm is not None and a.data_ptr() == warm[i])]
        static_set = set(static)
        return static, [i for i in range(len(args)) if i not in static_set]

    def _record_and_replay(self, args: list) -> Any:
        if self.recordings >= MAX_RECORDINGS:
            self._disable(f"its static inputs moved {MAX_RECORDINGS} times")
            return self.run_eager(args)
        static, copied = self._classify(args)
        bad = [i for i in copied if not _dense(args[i])]
        if bad:
            self._disable(f"input {bad[0]} overlaps itself in memory (an expanded tensor)")
            return self.run_eager(args)
        self.rec = None  # free the previous recording's memory first
        self._out_refs, self._saved_ref = [], None
        try:
            rec = self._record(args, static, copied)
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back, with its reason
            torch.cuda.synchronize()
            self._disable(f"capture failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            return self.run_eager(args)
        self.rec = rec
        self.recordings += 1
        self.generation += 1
        self._warm_ptrs = None
        again = f" again (a static input moved; recording {self.recordings})" if self.recordings > 1 else ""
        self.log(f"{self.label}: recorded a CUDA graph{again} ({len(static)} static inputs, "
                 f"{len(copied)} copied)")
        return self._replay(rec, args)

    def _record(self, args: list, static: list[int], copied: list[int]) -> Recording:
        inputs = list(args)
        for i in copied:
            a = args[i]
            inputs[i] = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
        graph, outs = _capture(self.pool, lambda: self._write_mutations(inputs, list(self.fn(list(inputs)))))
        handed = self._n_handed(outs)
        rec = Recording(graph, inputs, copied, static, outs, handed)
        rec.copy_back = [j for _, j in self.mutations if j in rec.copied_set]
        rec.written = [k for k, _ in self.mutations]
        rec.pool_outputs = [k for k in rec.pool_outputs if k not in rec.written]
        rec.aliased = [k for k in range(handed) if isinstance(outs[k], torch.Tensor) and k not in rec.written]
        return rec

    def _n_handed(self, outs: list) -> int:
        return len(outs) if self.handed is None else self.handed

    def _write_mutations(self, inputs: list, outs: list) -> list:
        if not self.mutations:
            return outs
        # A saved value that is a mutated input keeps its old value: copy it before the write.
        mutated = {id(inputs[j]) for _, j in self.mutations}
        first_saved = self._n_handed(outs)
        outs = [o.clone() if k >= first_saved and id(o) in mutated else o for k, o in enumerate(outs)]
        with torch.no_grad():
            for k, j in self.mutations:
                if outs[k] is not inputs[j]:  # else written in place by the compiled graph
                    inputs[j].copy_(outs[k])
        return outs

    # -- outputs ----------------------------------------------------------------------------
    def _release_held(self, rec: Recording) -> bool:
        """Note [cudagraph held outputs]: False if an output of the previous replay is still
        used through a view (its memory must not be overwritten: this call runs without the
        graph); else every alias still held is invalidated and the graph may replay."""
        refs = self._out_refs
        aliases = [(k, ref()) for k, ref in refs]
        if _USE_COUNT is not None:
            for k, alias in aliases:  # our own tensors, plus the alias itself while it lives
                if _storage_uses(rec.outputs[k]) > rec.baseline[k] + (alias is not None):
                    return False
        for k, alias in aliases:
            if alias is not None:
                if _SET_ACCESS_ERROR is None:
                    raise HeldOutputError(_held_message(self.label, k))
                _SET_ACCESS_ERROR(alias, _held_message(self.label, k))
        self._out_refs = []
        return True

    def _hand_out(self, rec: Recording) -> list:
        out = list(rec.outputs)
        for k in rec.written:  # Note [compiled mutations]: already in their inputs
            out[k] = None
        for k in rec.aliased:
            out[k] = out[k].detach()
        self._out_refs = [(k, weakref.ref(out[k])) for k in rec.pool_outputs]
        handed = rec.handed
        if handed < len(out) and isinstance(out[handed], torch.Tensor):
            # one fresh alias among the saved values: alive while their backward is pending
            out[handed] = sentinel = out[handed].detach()
            self._saved_ref = weakref.ref(sentinel)
        return out


class BackwardRunner:
    """The backward of a training pair: replays in the forward's pool when its saved inputs are
    the forward's recorded saved values (they are, unless the forward ran without its graph);
    gradients are copied out of the pool (Note [cudagraph replay])."""

    _boxed_call = True

    def __init__(self, fn: Callable, forward: GraphRunner, *, label: str, log: Logger) -> None:
        self.fn = _boxed(fn)
        self.forward = forward
        self.label = label
        self.log = log
        self.disabled: str | None = None
        self.graph = None
        self.generation = -1
        self.inputs: list = []
        self.check: Callable | None = None  # the saved values are the forward's
        self.copied: list[int] = []
        self.outputs: list = []
        self.warm = False
        self.replays = 0
        self.released = False  # Note [saved values released to the backward]

    def __call__(self, args: list) -> Any:
        fw = self.forward
        if (self.graph is not None and fw.generation == self.generation
                and self.check(args)):
            if self.released and _KEEP_GRAPH():
                return self._retained(args)
            return self._replay(args)
        return self._slow_call(args)

    def _retained(self, args: list) -> Any:
        # Note [saved values released to the backward]: the replay would overwrite saved values
        # that a later backward (retain_graph=True) reads
        self.log(f"{self.label}: retain_graph=True; this backward runs without its CUDA graph")
        return self.fn(list(args))

    def _replay(self, args: list) -> list:
        inputs = self.inputs
        for i in self.copied:
            inputs[i].copy_(args[i])
        self.graph.replay()
        self.replays += 1
        return self.copy_out.copies()

    def _slow_call(self, args: list) -> Any:
        fw = self.forward
        if self.disabled is not None or fw.rec is None or not self.warm:
            first, self.warm = not self.warm, True
            if first and self.disabled is None and fw.disabled is None:
                with fw.pool.warm_up():  # Note [warm-up in the pool]
                    return self.fn(list(args))
            return self.fn(list(args))
        n_saved = len(fw.rec.outputs) - (fw.handed if fw.handed is not None else len(fw.rec.outputs))
        saved_ptrs = [o.data_ptr() for o in fw.rec.outputs[len(fw.rec.outputs) - n_saved:]]
        if [a.data_ptr() for a in args[:n_saved]] != saved_ptrs:
            self.log(f"{self.label}: its saved values come from a forward that ran without its CUDA "
                     "graph; this backward runs without one too")
            return self.fn(list(args))
        release = _FROM_POINTER is not None and _KEEP_GRAPH is not None
        if release and _KEEP_GRAPH():
            return self._retained(args)
        self.graph = None
        rest = args[n_saved:]
        try:
            self._record(args, n_saved, release)
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back, with its reason
            torch.cuda.synchronize()
            self.graph = None
            self.disabled = f"capture failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            self.log(f"{self.label} runs without CUDA graphs: {self.disabled}")
            fw_outputs = fw.rec.outputs
            return self.fn([*fw_outputs[len(fw_outputs) - n_saved:], *rest])
        self.generation = fw.generation
        self.log(f"{self.label}: recorded a CUDA graph ({n_saved} saved values in place)")
        return self._replay([None] * n_saved + rest)  # `args` was handed over: only `rest` is read

    def _record(self, args: list, n_saved: int, release: bool) -> None:
        self.check = address_check(args, range(n_saved))
        self.copied = list(range(n_saved, len(args)))
        buffers = [torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                   for a in args[n_saved:]]
        # the forward's own tensors, not the ones autograd handed over (one of them tells the
        # forward that this backward is pending while it lives)
        fw_outputs = self.forward.rec.outputs
        first = len(fw_outputs) - n_saved
        inputs = [*fw_outputs[first:], *buffers]
        if release:  # Note [saved values released to the backward]
            fw_outputs[first:] = map(_unowned, fw_outputs[first:])
            args.clear()
        self.inputs = [None] * n_saved + buffers
        self.released = release
        # a boxed backward takes `inputs` over: each saved value is freed after its last use
        graph, outs = _capture(self.forward.pool, lambda: list(self.fn(inputs)))
        self.outputs, self.graph = outs, graph
        self.copy_out = CopyOut(outs)


def _unowned(t: Any) -> Any:
    """An alias of tensor `t` (same address, sizes, strides) that does not keep its memory
    allocated; anything else as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    storage = t.untyped_storage()
    memory = _FROM_POINTER(storage.data_ptr(), t.device, storage.nbytes())
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(memory, t.storage_offset(), t.shape, t.stride())


_unflatten = torch._C._nn.unflatten_dense_tensors


class CopyOut:
    """Fresh copies of a backward graph's outputs (the gradients), which the next replay
    overwrites. A model's backward returns hundreds of gradients: one `clone` each costs an
    allocation and a kernel launch each. The contiguous ones of each (device, dtype) are copied
    into one new buffer instead, with one `_foreach_copy_`; each copy is a view of that buffer,
    at its own offset (autograd may keep it as `.grad`). The others are cloned."""

    def __init__(self, outputs: list) -> None:
        self.outputs = outputs
        groups: dict[tuple, list[int]] = {}
        self.cloned = []
        for k, o in enumerate(outputs):
            if not isinstance(o, torch.Tensor):
                continue
            if o.is_contiguous() and o.numel():
                groups.setdefault((o.device, o.dtype), []).append(k)
            else:
                self.cloned.append(k)
        self.groups = []
        for (device, dtype), ks in groups.items():
            if len(ks) == 1:
                self.cloned += ks
            else:
                self.groups.append((device, dtype, ks, [outputs[k] for k in ks],
                                    sum(outputs[k].numel() for k in ks)))

    def copies(self) -> list:
        out = list(self.outputs)
        for device, dtype, ks, sources, total in self.groups:
            copies = _unflatten(torch.empty(total, dtype=dtype, device=device), sources)
            torch._foreach_copy_(copies, sources)
            for k, c in zip(ks, copies):
                out[k] = c
        for k in self.cloned:
            out[k] = out[k].clone()
        return out


# --- wiring: compilers for ember_autograd.aot --------------------------------------------------

def static_positions(gm: torch.fx.GraphModule, example_inputs: list) -> frozenset[int]:
    """Positions, among the captured graph's tensor inputs, of parameters and buffers."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out, k = set(), 0
    for node, value in zip(placeholders, example_inputs):
        if not isinstance(value, torch.Tensor):
            continue
        source = str(node.meta.get("source", ""))
        if isinstance(value, torch.nn.Parameter) or "._parameters[" in source or "._buffers[" in source:
            out.add(k)
        k += 1
    return frozenset(out)


def graph_label(gm: torch.fx.GraphModule) -> str:
    """'the graph at file.py:12 (forward)': the user's line of the graph's first operation."""
    for node in gm.graph.nodes:
        found = re.findall(r'File "([^"]*)", line (\d+), in (\S+)', str(node.meta.get("stack_trace") or ""))
        if node.op != "placeholder" and found:
            filename, line, name = found[0]
            return f"the graph at {os.path.basename(filename)}:{line} ({name})"
    return "a compiled graph"


def _not_capturable(gm: torch.fx.GraphModule, example_inputs: list) -> str | None:
    """Why a graph cannot be replayed as a CUDA graph, or None. A CUDA graph replays the device's
    work only: work on the CPU (an input, or a value the graph computes there: an optimizer's
    bias correction from its CPU step count, a CPU random draw) would run once, at the
    recording, and every replay would reuse its result, which may be stale by then. The value
    a kernel takes by value from the host (Note [host scalars] in ember_inductor) is such a
    result."""
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor) and x.device.type != "cuda":
            return f"input {i} is a {x.device.type.upper()} tensor"
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        vals = node.meta.get("val")
        for v in vals if isinstance(vals, (tuple, list)) else (vals,):
            if isinstance(v, torch.Tensor) and v.device.type == "cpu":
                return f"it computes {node.name} on the CPU"
    return None


@dataclasses.dataclass(frozen=True)
class CUDAGraphs:
    """What the facade adds to a composition of ember_autograd and compilers for its graphs
    (backends.AotComposition): `(gm, example_inputs, fw_compiler, bw_compiler)` -> the compilers
    whose graphs replay as CUDA graphs, for one captured graph."""

    log: Logger

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list, fw_compiler: Callable,
                 bw_compiler: Callable) -> tuple[Callable, Callable]:
        return cudagraph_compilers(fw_compiler, bw_compiler, static_positions(gm, example_inputs),
                                   self.log, graph_label(gm))


def cudagraph_compilers(fw_inner: Callable, bw_inner: Callable, static_hint: frozenset[int], log: Logger,
                        where: str = "a compiled graph") -> tuple[Callable, Callable]:
    """(fw_compiler, bw_compiler) for `ember_autograd.aot`: the inner compilers' graphs, replayed
    as CUDA graphs (Note [cudagraph replay]). Reads the metadata ember_autograd writes for its
    compilers: the forward's output node `meta["ember_saved_outputs"]` and
    `meta["ember_mutations"]`, the backward's `meta["ember_compiled_forward"]`."""

    def fw_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        compiled = fw_inner(gm, example_inputs)
        reason = _not_capturable(gm, example_inputs)
        if reason is not None:
            log(f"{where} runs without CUDA graphs: {reason}")
            return compiled
        meta = gm.graph.output_node().meta
        training = "ember_saved_outputs" in meta
        runner = GraphRunner(compiled, label=f"the {'training ' if training else ''}forward of {where}",
                             pool=Pool(), static_hint=static_hint,
                             handed=meta.get("ember_saved_outputs"),
                             mutations=meta.get("ember_mutations", ()), log=log)
        runner.compiled_graph = attr_or(compiled, "compiled_graph")
        return runner

    def bw_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        compiled = bw_inner(gm, example_inputs)
        forward = gm.meta.get("ember_compiled_forward")
        if not isinstance(forward, GraphRunner):
            return compiled
        reason = _not_capturable(gm, example_inputs)
        if reason is not None:
            log(f"the backward of {where} runs without CUDA graphs: {reason}")
            return compiled
        runner = BackwardRunner(compiled, forward, label=f"the backward of {where}", log=log)
        runner.compiled_graph = attr_or(compiled, "compiled_graph")
        return runner

    return fw_compiler, bw_compiler
