"""Runtime wrappers: run the compiled graphs on real tensors, replay input mutations, rebuild
the user's outputs (aliases of inputs included)."""
from __future__ import annotations

import dataclasses
import functools
import operator
import time
from typing import Any, Callable, Sequence

import sympy
import torch
from ember_symbolic import expr_of
from torch.utils import _pytree as pytree

from ember_autograd.errors import AotError
from ember_autograd.functionalize import replay_view
from ember_autograd.joint import AliasOutput, Signature
from ember_autograd.unreached import prune_unreached, zero_like_meta


def call_compiled(fn: Callable, args: list):
    """Compiled graphs are called `fn(*args)`, or `fn(args)` when `fn._boxed_call` is true (the
    callee may then free its inputs early)."""
    out = fn(args) if getattr(fn, "_boxed_call", False) else fn(*args)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def tensor_args(sig: Signature, args) -> list:
    """The graph's inputs among the user's arguments (tensors, then symbolic ints); checks the
    specialized numbers."""
    for i, value in sig.int_inputs:
        if args[i] != value:
            raise ValueError(f"input {i} is {args[i]!r}; this graph was traced with {value!r} "
                             "(shapes and numbers are specialized: retrace)")
    gather = getattr(sig, "_gather", None)
    if gather is None:  # the graph's inputs: tensors, then symbolic ints (Note [symbolic traces])
        gather = _gatherer(sig.tensor_inputs + sig.sym_inputs)
        object.__setattr__(sig, "_gather", gather)
    tensors = gather(args)
    if sig.mutated_inputs:
        _check_mutated_inputs_unaliased(sig, tensors[: len(sig.tensor_inputs)])
    return tensors


def _gatherer(positions: tuple[int, ...]) -> Callable[[Any], list]:
    """args -> [args[i] for i in positions], without a Python loop over a model's ~300 inputs."""
    if positions == tuple(range(len(positions))):
        n = len(positions)
        return lambda args: list(args[:n])
    if len(positions) == 1:
        return lambda args, i=positions[0]: [args[i]]
    getter = operator.itemgetter(*positions)
    return lambda args: list(getter(args))


_UNTYPED_STORAGE = torch.Tensor.untyped_storage
_STORAGE_PTR = torch.UntypedStorage.data_ptr


def _check_mutated_inputs_unaliased(sig: Signature, tensors: list[torch.Tensor]) -> None:
    # The graph treats inputs as independent: a mutation of one would not reach another input
    # sharing its memory. Refuse rather than compute a wrong answer.
    # The common case first, without a Python loop: every input has a storage of its own (a
    # compiled foreach optimizer step over 200 parameters mutates 400 inputs; the loop below
    # took ~1.5 ms of its 2.4 ms call on the H100). Empty tensors may share a null address and
    # send the call to the exact pass.
    ptrs = list(map(_STORAGE_PTR, map(_UNTYPED_STORAGE, tensors)))
    if len(set(ptrs)) == len(ptrs):
        return
    # One pass over the inputs (a ResNet has hundreds, a third of them mutated batch-norm
    # statistics): the inputs of each storage, then each mutated input's companions.
    owners: dict[int, list[int]] = {}
    for j, t in enumerate(tensors):
        if t.numel():
            owners.setdefault(t.untyped_storage().data_ptr(), []).append(j)
    for k in sig.mutated_inputs:
        if not tensors[k].numel():
            continue
        for j in owners[tensors[k].untyped_storage().data_ptr()]:
            if j != k:
                raise AotError("aliased-mutated-input",
                               f"graph input {sig.tensor_inputs[k]} is mutated and shares memory "
                               f"with input {sig.tensor_inputs[j]}; not supported")


# Note [compiler metadata]: what this layer writes for its compilers, beyond `meta["val"]`:
# - forward output node `meta["ember_saved_outputs"]`: training forward outputs from that
#   position on are saved for the backward (the inductor chooses their layout);
# - forward output node `meta["ember_mutations"]`: (output position, input position) pairs, the
#   new value of each mutated input (not those written with autograd recording, which the
#   runtime copies outside the autograd.Function: Note [writes to inputs that require grad]);
# - backward `gm.meta["ember_compiled_forward"]`: the callable the forward's compiler returned
#   (a compiler that replays both as CUDA graphs pairs them: the facade's cudagraphs.py).
#
# Note [compiled mutations]: a compiled forward whose `applies_mutations` is true writes the
# new values of mutated inputs itself (inside a CUDA graph, say), saved values that are mutated
# inputs keeping their old value, and may return None in place of those new values; the runtime
# then skips `replay_mutations` and its own copy of those saved values. A compiled graph may also
# write some of them in place and return the input itself as its new value (the inductor does:
# Note [mutated inputs written in place] in ember_inductor/inplace.py): `replay_mutations` does
# not copy a value that is its input's memory, and bumps the input's version counter instead.


def applies_mutations(fn: Callable) -> bool:
    return getattr(fn, "applies_mutations", False)


def replay_mutations(sig: Signature, tensors: list[torch.Tensor], new_values) -> None:
    """Note [Functionalization] (functionalize.py): copy each mutated input's new value back."""
    if not sig.mutated_inputs:
        return
    grad_mutated = sig.grad_mutated  # copied by `copy_with_autograd`
    # One _foreach_copy_ per (device, dtype) group: a ResNet step writes back ~160 batch-norm
    # buffers, and on CUDA a list mixing dtypes (float statistics, int64 num_batches_tracked)
    # falls back to one copy_ per tensor.
    groups: dict = {}
    written: list[torch.Tensor] = []
    with torch.no_grad():
        for k, value in zip(sig.mutated_inputs, new_values):
            if k in grad_mutated:
                continue
            dst = tensors[k]
            if _is_same_memory(dst, value):  # Note [compiled mutations]: written in place
                written.append(dst)
                continue
            if dst.shape != value.shape or dst.device != value.device or dst.dtype != value.dtype:
                dst.copy_(value)  # broadcast, cross-device or converting: the general path
            else:
                dsts, srcs = groups.setdefault((dst.device, dst.dtype), ([], []))
                dsts.append(dst)
                srcs.append(value)
        for dsts, srcs in groups.values():
            torch._foreach_copy_(dsts, srcs)
    if written:  # as an in-place op would: autograd then sees that saved values changed
        torch.autograd.graph.increment_version(written)


def copy_with_autograd(sig: Signature, tensors: list[torch.Tensor], new_values) -> None:
    """Note [writes to inputs that require grad] (joint.py): the new value of each input that the
    graph wrote with autograd recording, copied onto it with grad enabled, so that autograd
    records the write on the input's history. A leaf that requires grad raises eager's error."""
    for m, k in enumerate(sig.mutated_inputs):
        if k in sig.grad_mutated:
            tensors[k].copy_(new_values[m])


# Note [a written input's saved history]: a compiled graph is one autograd node with an edge to
# every input that requires grad, and autograd's engine runs each node an edge leads to, even
# with no gradient for it (an undefined one), and each node unpacks its saved values first. Where
# the graph writes an input whose own history saved it (`v = x.exp()` or a scatter_reduce 'prod'
# saves its result, then the graph does `v[i] = 0`; Note [writes to inputs that require grad]),
# that saved value is stale after the call, and any backward through the compiled node raised
# "modified by an inplace operation" (fuzz seed 51152 with --train; torch.compile's aot_eager
# too), where eager raises only for a loss that reaches the written value. So did an input not
# written whose history was already stale before the call (`v = x.exp(); v.add_(1)`), where the
# loss may reach the compiled node but not that input: eager's loss reaches an input's history
# only through an output the input reaches, so an input that every differentiable output reaches
# (`Signature.grad_reach`) is safe; the others are checked when they have a history. Such a call
# runs the captured graph eagerly instead (one warning). The walk is bounded: a history of more
# nodes than that is not searched (the call compiles, as before).
_HISTORY_NODES = 64
_SAVED_NAMES: dict[type, tuple[str, ...]] = {}  # per autograd node type: its `_saved_*` attributes


def _saved_names(node) -> tuple[str, ...]:
    names = _SAVED_NAMES.get(type(node))
    if names is None:  # dir() is ~13 us a node: once per type
        names = _SAVED_NAMES[type(node)] = tuple(n for n in dir(node) if n.startswith("_saved_"))
    return names


def _reads_stale_or(node, storage: int | None) -> bool:
    """Whether autograd running `node` would raise (a saved value written since, or freed), or
    `node` saved a value of `storage` (None: no storage is looked for)."""
    for name in _saved_names(node):
        try:
            value = getattr(node, name)
        except RuntimeError:  # already stale, or freed by an earlier backward
            return True
        if storage is None:
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() == storage:
                return True
    return False


def _history_reads_stale_or(t: torch.Tensor, storage: int | None):
    """The first node of `t`'s history (its nearest `_HISTORY_NODES`) that `_reads_stale_or`."""
    todo, seen = [t.grad_fn], set()
    while todo and len(seen) < _HISTORY_NODES:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if _reads_stale_or(node, storage):
            return node
        todo.extend(nxt for nxt, _ in node.next_functions)
    return None


def history_checked(sig: Signature) -> tuple[int, ...]:
    """The tensor inputs whose history `_check_history` searches for stale saved values: those
    that require grad and that some differentiable output does not reach (all of them where the
    reach was not recorded), the written ones aside."""
    everything = frozenset(range(len(sig.diff_outputs)))
    if len(sig.grad_reach) != len(sig.grad_inputs):
        return tuple(k for k in sig.grad_inputs if k not in sig.grad_mutated)
    return tuple(k for k, reach in zip(sig.grad_inputs, sig.grad_reach)
                 if reach != everything and k not in sig.grad_mutated)


def _check_history(sig: Signature, tensors: list[torch.Tensor], checked: tuple[int, ...]) -> None:
    """Note [a written input's saved history]."""
    for k in sig.grad_mutated:
        t = tensors[k]
        node = _history_reads_stale_or(t, t.untyped_storage().data_ptr())
        if node is not None:
            raise AotError("written-saved-input",
                           f"graph input {sig.tensor_inputs[k]} is written in place and its autograd history "
                           f"({node.name()}) saved it")
    for k in checked:
        t = tensors[k]
        node = None if t.grad_fn is None else _history_reads_stale_or(t, None)
        if node is not None:
            raise AotError("stale-input-history",
                           f"the autograd history of graph input {sig.tensor_inputs[k]} ({node.name()}) "
                           "saved a value written in place since")


def _is_same_memory(dst: torch.Tensor, value) -> bool:
    return value is dst or (isinstance(value, torch.Tensor) and value.data_ptr() == dst.data_ptr()
                            and value.dtype == dst.dtype and value.shape == dst.shape
                            and value.stride() == dst.stride() and value.device == dst.device)


def user_outputs(sig: Signature, tensors: list[torch.Tensor], graph_outputs: list):
    flat = []
    sizes = _SymbolValues(sig, tensors) if sig.symbols else None
    for kind, what in sig.outputs:
        if kind == "graph":
            flat.append(graph_outputs[what])
        elif kind == "alias":
            real = tensors[what.input_index]
            flat.append(_regenerate(what if sizes is None else sizes.alias(what, real), real))
        elif kind == "view":
            chain = what.chain if sizes is None else sizes.concrete(what.chain)
            flat.append(replay_view(graph_outputs[what.base_output], chain))
        else:
            flat.append(what)
    rebuild = getattr(sig, "_rebuild", None)
    if rebuild is None:
        rebuild = _rebuilder(sig.out_spec)
        object.__setattr__(sig, "_rebuild", rebuild)
    return rebuild(flat)


def _rebuilder(spec):
    """flat outputs -> the user's structure. A single value or a flat tuple (the common shapes)
    skip the general unflatten: 4 us of a 20 us call on a small graph."""
    if spec.is_leaf():
        return lambda flat: flat[0]
    if spec.type is tuple and all(spec.child(i).is_leaf() for i in range(spec.num_children)):
        return tuple
    return lambda flat: pytree.tree_unflatten(flat, spec)


class _SymbolValues:
    """The symbols' values in this call, read from the graph inputs (`Signature.symbols`), for the
    outputs the runtime rebuilds itself from symbolic sizes (Note [symbolic traces], joint.py)."""

    def __init__(self, sig: Signature, inputs: list):
        self.values = {}
        for name, k, kind, dim in sig.symbols:
            x = inputs[k]
            self.values[sympy.Symbol(name, integer=True, positive=True)] = (
                x.size(dim) if kind == "size" else x.stride(dim) if kind == "stride" else int(x))

    def concrete(self, tree):
        return pytree.tree_map_only((torch.SymInt, torch.SymFloat), self._value, tree)

    def _value(self, v):
        expr = expr_of(v).xreplace(self.values)
        return float(expr) if isinstance(v, torch.SymFloat) else int(expr)

    def alias(self, alias: AliasOutput, real: torch.Tensor) -> AliasOutput:
        # the traced input started its storage (offset 0): offsets count from the real one's
        size, stride, offset = self.concrete((alias.size, alias.stride, alias.storage_offset))
        return dataclasses.replace(alias, size=size, stride=stride, storage_offset=offset + real.storage_offset())


def _regenerate(alias: AliasOutput, real: torch.Tensor) -> torch.Tensor:
    if alias.identity:
        return real
    if alias.dtype is not None:  # strides and offset count elements of the view's dtype
        real = _reinterpret(real, alias.dtype)
    out = real.as_strided(alias.size, alias.stride, alias.storage_offset)
    return out if alias.requires_grad else out.detach()


def _reinterpret(real: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    try:
        return real.view(dtype)  # keeps autograd; needs a last dim of stride 1
    except RuntimeError:  # any layout: the input's whole storage, read as `dtype`
        with torch.no_grad():
            return torch.empty(0, dtype=dtype, device=real.device).set_(real.untyped_storage())


class InferenceRunner:
    """One forward graph; no autograd."""

    def __init__(self, sig: Signature, forward: Callable):
        self.sig, self.forward = sig, forward
        # decided once, not per call: the runtime's copies of mutated inputs
        self._replay = bool(sig.mutated_inputs) and not applies_mutations(forward)

    def __call__(self, args):
        tensors = tensor_args(self.sig, args)
        outs = call_compiled(self.forward, tensors)
        n = self.sig.num_graph_outputs
        if self._replay:
            replay_mutations(self.sig, tensors, outs[n:])
        return user_outputs(self.sig, tensors, outs[:n])


def _zero_fill(inputs: list, absent: tuple[bool, ...], tangent_meta: Sequence, skip: frozenset = frozenset()) -> None:
    """Each None tangent (the last len(absent) of `inputs`), except at the positions in `skip`,
    becomes zeros of its (shape, dtype, device)."""
    first = len(inputs) - len(absent)
    for i, meta in enumerate(tangent_meta):
        k = first + i
        if inputs[k] is None and k not in skip:
            inputs[k] = torch.zeros(*meta[:1], dtype=meta[1], device=meta[2])


class TrainingRunner:
    """An autograd.Function around the compiled forward and (lazily compiled) backward.

    num_saved_symbols: how many of the forward's last outputs are ints for the backward (Note
    [sizes across the partition] in partition.py); `backward`, given, is the compiled backward
    (a symbolic graph compiles it with the forward)."""

    def __init__(self, sig: Signature, forward: Callable, compile_backward: Callable[[list], Callable],
                 timings: dict, requires_grad: tuple[bool, ...], num_saved_symbols: int = 0,
                 backward: Callable | None = None,
                 compile_pruned: Callable[[list, tuple], Callable | None] | None = None,
                 backward_graph: torch.fx.GraphModule | None = None):
        self.sig = sig
        # Note [a written input's saved history]: the inputs whose history each call searches
        self._history_checked = history_checked(sig)
        self._check_written = bool(sig.grad_mutated)
        # Note [speculative requires-grad key] (api.py): `ctx.needs_input_grad` of a call this
        # runner's graphs fit (the leading False: the apply's first argument, this tuple or None)
        self.needs_input_grad = (False, *requires_grad)
        self.forward = forward
        self.num_saved_symbols = num_saved_symbols
        self._compile_backward = compile_backward
        self._backward = backward
        # Note [unreached outputs] (unreached.py): per set of absent tangents, the specialized
        # backward (compiled, its zero inputs, which results it computes) or None (not possible)
        self._compile_pruned = compile_pruned
        self._pruned: dict[tuple, tuple | None] = {}
        self._backward_graph = backward_graph  # Note [saved outputs the user mutates]
        self._timings = timings
        self.function = _make_function(self)
        self.apply = _direct_apply(self.function, len(sig.tensor_inputs) if sig.sym_inputs else None)

    def backward_for(self, inputs: list) -> Callable:
        """The compiled backward; bw_compiler runs at the first backward, given the layouts of
        the values it is called with (the forward's compiler chose the saved tensors' layout)."""
        if self._backward is None:
            start = time.perf_counter()
            self._backward = self._compile_backward(inputs)
            self._timings["bw_compile"] = time.perf_counter() - start
        return self._backward

    def run_backward(self, inputs: list, absent: tuple[bool, ...], tangent_meta: Sequence = ()) -> list:
        """The gradients for one call; `absent[i]`: the loss did not reach differentiable output
        i (its tangent in `inputs` is None, or a zero filler), Note [unreached outputs].
        tangent_meta: (shape, dtype, device) per tangent, for the zeros an absent one becomes
        where the graph still reads it. `inputs` is handed over: emptied during the call, so
        that each saved value is freed after its last use (Note [saved tensors handed over])."""
        if any(absent) and self._compile_pruned is not None:
            if absent not in self._pruned:
                self._pruned[absent] = self._compile_pruned(inputs, absent)
            entry = self._pruned[absent]
            if entry is not None:
                compiled, zeros, kept, lost, dropped = entry
                _zero_fill(inputs, absent, tangent_meta, dropped)
                args = [x for k, x in enumerate(inputs) if k not in dropped] if dropped else list(inputs)
                inputs.clear()
                args.extend(map(zero_like_meta, zeros))
                results = iter(call_compiled(compiled, args))
                return self._unreached_none([next(results) if k else None for k in kept], absent, lost)
        _zero_fill(inputs, absent, tangent_meta)
        return self._unreached_none(call_compiled(self.backward_for(inputs), inputs), absent)

    def _unreached_none(self, results: list, absent: tuple[bool, ...], lost: Sequence = ()) -> list:
        # an input that no reached output's autograd graph leads to gets None, as in eager, even
        # where its traced gradient is a constant that depends on no tangent (round's zeros); one
        # that a reached output leads to gets zeros where the pruned graph did not compute its
        # gradient, made of absent tangents only (Note [zero, not None], unreached.py)
        reach = self.sig.grad_reach
        if not any(absent) or len(reach) != len(results):
            return results
        present = {i for i, gone in enumerate(absent) if not gone}
        return [(zero_like_meta(lost[j]) if r is None and lost and lost[j] is not None else r)
                if reach[j] & present else None for j, r in enumerate(results)]

    def saved_in_use(self, absent: tuple[bool, ...]) -> set[int] | None:
        """The positions of the backward's inputs that the backward `run_backward(..., absent)`
        runs reads (None: not known, take all), Note [saved outputs the user mutates]."""
        gm = self._backward_graph
        if gm is None:
            return None
        if any(absent) and self._compile_pruned is not None and self._pruned.get(absent, ()) is not None:
            pruned = prune_unreached(gm, absent)
            gm = gm if pruned is None else pruned.gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return {i for i, n in enumerate(placeholders) if n.users}

    def __call__(self, args, speculative: bool = False):
        """speculative: the inputs' requires-grad pattern was not checked; the forward checks it
        and raises `RequiresGradChanged` if it is not this runner's."""
        tensors = tensor_args(self.sig, args)
        if self._check_written or self._history_checked:
            _check_history(self.sig, tensors, self._history_checked)
        outs = self.apply(self.needs_input_grad if speculative else None, *tensors)
        n = self.sig.num_graph_outputs
        if self.sig.grad_mutated:  # first: a leaf that requires grad raises before any write
            copy_with_autograd(self.sig, tensors, outs[n:])
        if not applies_mutations(self.forward):
            replay_mutations(self.sig, tensors, outs[n:])
        return user_outputs(self.sig, tensors, list(outs[:n]))


# Note [direct Function.apply]: `torch.autograd.Function.apply` is Python that walks every
# argument (functorch's dead-wrapper unwrapping: a generator with an isinstance per argument,
# about 150 us for the 300 inputs of a model with 300 parameters) before it calls the C++ apply.
# Outside functorch transforms the runtime does that unwrapping in one C-level `map` and calls
# the C++ apply itself; inside them (vmap, grad) it goes through `Function.apply` as before.
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead
_transforms_active = torch._C._are_functorch_transforms_active


def _direct_apply(function: type, num_tensors: int | None = None) -> Callable:
    """apply(expected, *inputs); expected is passed as it is (a tuple or None). num_tensors:
    given when the inputs end with ints (symbolic int inputs), which are passed as they are."""
    c_apply = super(torch.autograd.Function, function).apply
    python_apply = function.apply

    def apply(expected, *tensors):
        if _transforms_active():
            return python_apply(expected, *tensors)
        return c_apply(expected, *map(_unwrap_if_dead, tensors))

    def apply_with_ints(expected, *inputs):
        if _transforms_active():
            return python_apply(expected, *inputs)
        return c_apply(expected, *map(_unwrap_if_dead, inputs[:num_tensors]), *inputs[num_tensors:])
    return apply if num_tensors is None else apply_with_ints


class RequiresGradChanged(Exception):
    """A speculative call's inputs do not require grad as its runner's graphs were traced for
    (Note [speculative requires-grad key], api.py)."""


# Note [double backward]: the compiled backward runs under no_grad, so its results carry no
# autograd graph of their own. `torch.autograd.function.once_differentiable` attaches an error
# node to them only when an incoming gradient requires grad; with create_graph=True the tangent
# of a plain `loss.sum()` does not, so the gradient came back as a constant and a gradient
# penalty added to another term silently lost its second-order part. Whenever the backward runs
# with grad enabled (create_graph=True), every result is marked instead: differentiating it
# raises, as torch.compile does. (A graph linear in its inputs, whose eager gradient is a
# constant, raises too: an error rather than a wrong gradient.)
_DOUBLE_BACKWARD = (b"ember: double backward (a gradient taken with create_graph=True, then "
                    b"differentiated) through a compiled graph is not supported; run this part "
                    b"eagerly (ember.disable)")


def _once_differentiable(backward: Callable) -> Callable:
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with torch.no_grad():
            results = backward(ctx, *grads)
        if not torch.is_grad_enabled():
            return results
        at = [k for k, r in enumerate(results) if isinstance(r, torch.Tensor) and r.dtype.is_floating_point]
        if not at:
            return results
        err = torch._C._functions.DelayedError(_DOUBLE_BACKWARD, len(at))
        marked = iter(err(*[results[k].detach().requires_grad_() for k in at]))
        results = list(results)
        for k in at:
            results[k] = next(marked)
        return tuple(results)
    return wrapper


def _make_function(runner: TrainingRunner):
    sig = runner.sig
    n_fw = sig.num_fw_outputs
    diff = set(sig.diff_outputs)
    # saved inputs about to be overwritten: by the runtime's copies (those the compiled forward
    # does not apply itself, and always those written with autograd recording)
    copied = set(sig.grad_mutated) if applies_mutations(runner.forward) else set(sig.mutated_inputs)
    n_symbols = runner.num_saved_symbols
    n_inputs = len(sig.tensor_inputs) + len(sig.sym_inputs)
    # the backward's results -> the apply's inputs' gradients (None first, for `expected`)
    scatter = _scatterer(sig.grad_inputs, n_inputs)

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, expected, *tensors):
            if expected is not None and ctx.needs_input_grad != expected:
                raise RequiresGradChanged()
            outs = call_compiled(runner.forward, list(tensors))
            fw_outs, saved = outs[:n_fw], outs[n_fw:len(outs) - n_symbols]
            ctx.saved_symbols = outs[len(outs) - n_symbols:]
            if copied:
                # a saved input that the runtime is about to overwrite keeps its old value
                mutated = {id(tensors[k]) for k in copied}
                if not mutated.isdisjoint(map(id, saved)):  # a C-level pass over ~600 saved values first
                    saved = [s.clone() if id(s) in mutated else s for s in saved]
            # Note [saved outputs the user mutates]
            returned = {id(o) for o in fw_outs}
            exposed = () if returned.isdisjoint(map(id, saved)) else \
                [k for k, s in enumerate(saved) if id(s) in returned]
            if exposed:
                ctx.exposed = [(k, saved[k].detach(), saved[k]._version) for k in exposed]
                ctx.n_saved = len(saved)
                saved = [s for s in saved if id(s) not in returned]
            ctx.save_for_backward(*saved)
            ctx.mark_non_differentiable(*[o for k, o in enumerate(fw_outs)
                                          if k not in diff and isinstance(o, torch.Tensor)])
            # Note [no materialized zero grads]: autograd would hand the backward a zero tensor
            # for every output the loss does not reach, the non-differentiable ones included (a
            # batch norm's running statistics: 159 zeros and fill kernels per resnet50 step).
            # Unreached gradients arrive as None; only the differentiable outputs' become zeros,
            # shaped from the metadata kept here.
            ctx.set_materialize_grads(False)
            ctx.diff_meta = [(o.shape, o.dtype, o.device) for o in map(fw_outs.__getitem__, sig.diff_outputs)]
            return tuple(fw_outs)

        @staticmethod
        @_once_differentiable
        def backward(ctx, *grads):
            # an unreached output's tangent is None: the backward pruned for it does not take it
            # (Note [unreached outputs]); run_backward makes zeros of it where a graph reads it
            tangents = [None if grads[k] is None else grads[k].contiguous() for k in sig.diff_outputs]
            absent = tuple(t is None for t in tangents)
            for j, error in sig.poisoned:  # Note [outputs whose backward reads a mutated saved value]
                if not absent[j]:
                    raise RuntimeError(error)
            saved = ctx.saved_tensors
            if hasattr(ctx, "exposed"):
                saved = _with_exposed(runner, ctx, list(saved), absent)
            inputs = [*saved, *ctx.saved_symbols, *tangents]
            del saved
            # Note [saved tensors handed over]: autograd's references to the saved values are
            # dropped now (unless retain_graph=True keeps them for another backward), so that
            # `inputs` holds the only ones: a boxed backward that takes the list over frees each
            # value after its last use, as eager's engine frees a node's saved tensors after it.
            ctx.maybe_clear_saved_tensors()
            return scatter(runner.run_backward(inputs, absent, ctx.diff_meta))

    return CompiledFunction


# Note [saved outputs the user mutates]: a saved value that the forward also returns is the
# user's to write in place after the call (or the next graph's, after a graph break). Eager
# autograd then raises "modified by an inplace operation" only if a backward node that saved it
# runs: one the loss does not reach never checks. `ctx.save_for_backward` checks every saved
# tensor at the first `ctx.saved_tensors`, so a compiled graph's single backward raised where
# eager does not (fuzz seed 3331). Such values are kept as detached aliases (same storage and
# version counter, no reference cycle through grad_fn) with their version at the forward; the
# backward raises eager's error only when one changed and the backward it runs (pruned to the
# reached outputs, Note [unreached outputs]) reads it. (They bypass saved-tensor hooks: the user
# holds them anyway.)
def _with_exposed(runner: TrainingRunner, ctx, rest: list, absent: tuple[bool, ...]) -> list:
    """The saved tensors in order: `rest` (from `ctx.saved_tensors`) with the exposed ones put back."""
    saved, it = [None] * ctx.n_saved, iter(rest)
    changed = []
    for k, t, version in ctx.exposed:
        saved[k] = t
        if t._version != version:
            changed.append((k, t, version))
    if changed:
        used = runner.saved_in_use(absent)
        for k, t, version in changed:
            if used is None or k in used:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{t.type()} {list(t.shape)}], which is an output of ember's "
                    f"CompiledFunction, is at version {t._version}; expected version {version} instead.")
    return [next(it) if s is None else s for s in saved]


def _scatterer(positions: tuple[int, ...], n_inputs: int) -> Callable[[list], tuple]:
    """results -> (None, *grads), the gradient of input `positions[j]` being `results[j]` and the
    others' None, in one C-level `map` (a model has ~300 parameters)."""
    if tuple(positions) == tuple(range(n_inputs)):
        return lambda results: (None, *results)
    where = {k: j for j, k in enumerate(positions)}
    index = [len(positions)] + [where.get(k, len(positions)) for k in range(n_inputs)]  # the padded None
    return lambda results: tuple(map([*results, None].__getitem__, index))
