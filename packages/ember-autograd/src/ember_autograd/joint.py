"""Tracing entry points: the torch-level graph -> an inference graph, or a joint forward+backward
graph. Both are functional ATen graphs (Note [Functionalization] in functionalize.py)."""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

from ember_symbolic import is_symbolic, plain_fake_mode, symbolic_dispatch, symbolic_fake_mode

from ember_autograd.derivatives import EagerDerivatives
from ember_autograd.errors import AotTraceError, ErrorKind
from ember_autograd.functionalize import replay_view, replayable
from ember_autograd.tracer import AtenTracer, TorchGraphInterpreter


@dataclass(frozen=True)
class AliasOutput:
    """A user output that is a view of graph input `input_index` (a position among the tensor
    inputs): the graph does not compute it; the runtime regenerates it from the real input."""

    input_index: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    requires_grad: bool
    identity: bool  # the output is the input itself
    dtype: torch.dtype | None = None  # set when the view reinterprets the input's dtype (view_as_complex)


@dataclass(frozen=True)
class ViewOutput:
    """A user output that is a view of an intermediate that another user output also views (or
    is): graph output `base_output` holds that intermediate; the runtime takes the view of it by
    replaying `chain` (Note [Functionalization]), so that the outputs share memory as in eager."""

    base_output: int
    chain: tuple


@dataclass(frozen=True)
class Signature:
    """How the traced graph's inputs and outputs relate to the user's.

    Graph placeholders: the tensor inputs (`tensor_inputs` are their positions among the user's
    arguments), then the symbolic int inputs (`sym_inputs`, Note [symbolic traces]), then, in a
    joint graph, one tangent per `diff_outputs` entry. `int_inputs` are the other numbers, which
    the graphs specialize.
    Graph outputs: `num_graph_outputs` user outputs, then the new value of each mutated input
    (`mutated_inputs`, positions among the tensor inputs), then, in a joint graph, the gradient
    of each tensor input in `grad_inputs` (None where unused).
    `outputs` rebuilds the user's outputs: ("graph", k) | ("alias", AliasOutput) |
    ("view", ViewOutput) | ("const", v)."""

    tensor_inputs: tuple[int, ...]
    int_inputs: tuple[tuple[int, Any], ...]
    outputs: tuple[tuple[str, Any], ...]
    out_spec: Any
    num_graph_outputs: int
    mutated_inputs: tuple[int, ...]
    grad_inputs: tuple[int, ...] = ()
    diff_outputs: tuple[int, ...] = ()
    sym_inputs: tuple[int, ...] = ()
    # symbolic traces: (symbol name, graph input position, "size" | "stride" | "int", dim) where
    # each symbol can be read at run time (the runtime rebuilds alias outputs from them)
    symbols: tuple[tuple[str, int, str, int], ...] = ()
    # per `grad_inputs` entry, the positions in `diff_outputs` whose autograd graph reaches that
    # input (Note [unreached outputs], unreached.py); () when not recorded
    grad_reach: tuple[frozenset, ...] = ()
    # (position in `diff_outputs`, eager's error) per output whose backward reads a saved value
    # written in place since, or runs an op without a derivative (Note [outputs whose backward
    # reads a mutated saved value])
    poisoned: tuple[tuple[int, str], ...] = ()
    # mutated inputs (positions among the tensor inputs) written with autograd recording: their
    # new values are differentiable outputs, copied onto the inputs outside the autograd.Function
    # (Note [writes to inputs that require grad])
    grad_mutated: tuple[int, ...] = ()

    @property
    def num_fw_outputs(self) -> int:
        return self.num_graph_outputs + len(self.mutated_inputs)


@dataclass
class Traced:
    gm: torch.fx.GraphModule
    signature: Signature


# Note [symbolic traces]: when a placeholder of the torch-level graph has a symbolic
# `meta["example_value"]` (a FakeTensor with SymInt sizes, or a SymInt: capture's dynamic
# dimensions and ints, ember_symbolic), the trace uses those SymInts, not the example inputs'
# concrete sizes, under a FakeTensorMode without its op cache (`plain_fake_mode`). A symbolic int
# input is a graph placeholder (after the tensors) whose `meta["val"]` is its SymInt. Every size an
# op takes becomes a graph value through `SizeNodes` (Note [sizes in graphs] in ember_symbolic):
# `aten.sym_size.int(primals_1, 0)`, `operator.mul(...)`, each with a SymInt `meta["val"]`, so
# the graphs run on inputs of any size that satisfies the guards the trace recorded in the
# symbols' SizeEnv. The partition rebuilds size values in each graph from that graph's own inputs
# (Note [sizes across the partition] in partition.py).


def symbolic_inputs(gm: torch.fx.GraphModule) -> bool:
    """Whether a placeholder of `gm` has a symbolic example value (Note [symbolic traces])."""
    return any(_is_symbolic_value(v) for v in _example_values(gm))


def _example_values(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]


def _is_symbolic_value(v) -> bool:
    if isinstance(v, torch.Tensor):
        return any(is_symbolic(s) for s in (*v.shape, *v.stride()))
    return is_symbolic(v)


def trace_inference(gm, example_inputs, decompositions=None) -> Traced:
    """One forward graph: outputs, then the new values of mutated inputs."""
    session = _Session(example_inputs, decompositions, requires_grad=False, example_values=_example_values(gm))
    # Note [C++ kernels that read plain sizes] (ember_symbolic): the Python dispatcher when symbolic
    with session.fake_mode, torch.no_grad(), symbolic_dispatch(session.symbolic):
        with session.tracer:
            outs = TorchGraphInterpreter(gm, session.tracer).run(*session.args)
        sig, nodes = session.outputs(outs)
    _refuse_overlapping_writes(session, sig)
    return Traced(session.finish(nodes), sig)


def _refuse_overlapping_writes(session, sig) -> None:
    # The functional graph gives each element of an input its own value; an expanded input's
    # elements share memory, so a write to one (x.select(0, 1).mul_(7)) is seen by all in eager
    # and by none in the graph, and its write-back cannot pick one value per location (fuzz
    # seeds 3909 and 3645). Inputs are guarded on their strides: the graph refuses them here.
    for k in sig.mutated_inputs:
        p = session.primals[k]
        if any(isinstance(st, int) and st == 0 and not (isinstance(n, int) and n <= 1)
               for n, st in zip(p.shape, p.stride())):
            raise AotTraceError(ErrorKind.OVERLAPPING_MUTATED_INPUT,
                                f"graph input {sig.tensor_inputs[k]} (strides {tuple(p.stride())}) is written in place")


def trace_joint(gm, example_inputs, decompositions=None) -> Traced:
    """Forward and backward in one graph: placeholders primals_*, tangents_*; outputs as in
    `Signature`. The backward is the autograd engine's own, run on the fake outputs."""
    session = _Session(example_inputs, decompositions, requires_grad=True, example_values=_example_values(gm))
    with session.fake_mode, torch.enable_grad(), symbolic_dispatch(session.symbolic):
        with session.tracer, EagerDerivatives():  # Note [derivatives that branch on values]
            outs = TorchGraphInterpreter(gm, session.tracer).run(*session.args)
        sig, nodes = session.outputs(outs)
        _refuse_overlapping_writes(session, sig)
        graph_outs = [session.graph_out_fakes[k] for k in range(sig.num_graph_outputs)]
        diff = tuple(k for k, o in enumerate(graph_outs) if getattr(o, "requires_grad", False))
        # Note [writes to inputs that require grad]: written with autograd recording
        grad_mutated = tuple(k for k in sig.mutated_inputs if session.primals[k].grad_fn is not None
                             and session.primals[k].grad_fn is not session.input_grad_fns[k])
        graph_outs += [session.primals[k] for k in sig.mutated_inputs]
        diff += tuple(sig.num_graph_outputs + m for m, k in enumerate(sig.mutated_inputs) if k in grad_mutated)
        for k in sig.mutated_inputs:
            # a non-leaf written under no_grad: copied back under no_grad, as eager writes it
            if k not in grad_mutated and session.grad_leaves[k] is session.primals[k] and \
                    session.primals[k].requires_grad:
                if not diff:  # an optimizer step: parameters updated under no_grad
                    raise AotTraceError(ErrorKind.INFERENCE_ONLY, "no output requires grad, and a graph input that "
                                        "requires grad is mutated in place: an inference graph")
                raise AotTraceError("mutated-grad-input",
                                    f"graph input {sig.tensor_inputs[k]} requires grad and is "
                                    "mutated in place; not supported by the joint trace")
        grad_inputs = tuple(k for k, p in enumerate(session.primals) if p.requires_grad)
        tangents = [session.tangent(j, graph_outs[k]) for j, k in enumerate(diff)]
        grads: list = [None] * len(grad_inputs)
        poisoned: tuple = ()
        delivered: dict = {}
        values: dict = {}
        if diff and grad_inputs:
            session.tracer.stack_trace = None  # backward ops take their autograd node's line
            with _record_delivered([graph_outs[k] for k in diff], delivered, values):
                grads, poisoned = _traced_grads(session, [graph_outs[k] for k in diff],
                                                [session.grad_leaves[k] for k in grad_inputs], tangents)
        nodes += [None if g is None else session.tracer.node_of(g) for g in grads]
        node_reach: dict = {}
        reach = _grad_reach([graph_outs[k] for k in diff], [session.grad_leaves[k] for k in grad_inputs], delivered,
                            node_reach)
        _mark_delivered(session, values, node_reach)
    sig = Signature(**{**sig.__dict__, "grad_inputs": grad_inputs, "diff_outputs": diff, "grad_reach": reach,
                       "poisoned": poisoned, "grad_mutated": grad_mutated})
    return Traced(session.finish(nodes), sig)


# Note [writes to inputs that require grad]: eager lets a program write in place to a tensor
# that requires grad and is not a leaf (an activation computed before a graph break): autograd
# records the write on that tensor's history. The joint trace gives such an input a non-leaf
# placeholder (a clone of a leaf fake; gradients are taken with respect to the leaf, that is,
# the input's value before the call), so the program's writes are recorded as eager records
# them. Their new values are differentiable outputs of the graph, and the runtime copies each
# onto its input after the autograd.Function, with grad enabled, as AOT autograd does: autograd
# then records the copy on the input's history (CopyBackwards from the Function's output), and
# later uses of the input differentiate through the compiled graph. The inductor is not told of
# these mutations (`ember_mutations`), so it never writes such an input itself. A leaf that
# requires grad, or a view of one, keeps a leaf placeholder: the write raises in the trace and
# the graph runs eagerly, which raises eager's error; a call of the compiled graph with such an
# input raises it from the copy.
def _writable_under_autograd(x: torch.Tensor) -> bool:
    base = x._base if x._base is not None else x
    return not x.is_leaf and not (base.is_leaf and base.requires_grad)


# Note [outputs whose backward reads a mutated saved value]: `y = x.log_softmax(-1); y.neg_()`
# leaves LogSoftmax's saved output at a newer version: eager raises "modified by an inplace
# operation" when a backward runs that node, and only then; a loss that does not reach y (or
# anything computed from it) differentiates fine. The joint trace differentiates every output
# at once, so it raised for the whole graph (fuzz seed 2001: y was live across a graph break,
# an output of the graph, unused by the loss). An op without a derivative (floor_divide of a
# float tensor that requires grad) is the same: eager raises only when its node runs, and so is
# a multi-output view (an unbind output) whose base was written since (fuzz seed 60011). Where the
# joint backward raises one of these errors, each output's backward is tried
# alone (on fake tensors, nothing recorded); those that raise are left out of the traced backward
# (their tangents unused) and recorded with the error, which the runtime raises when the loss
# reaches one of them (its gradient is not None), as eager's engine would.
_BACKWARD_ERRORS = re.compile(r"modified by an inplace operation|derivative for .* (is )?not implemented|"
                              r"is a view and its base or another view of its base has been modified inplace")


def _raises_in_eagers_backward(exc: BaseException) -> bool:
    """An error eager's engine raises when it runs one particular backward node: a saved value
    written in place since, an op without a derivative (floor_divide), or a multi-output view
    whose base was written since."""
    return isinstance(exc, RuntimeError) and _BACKWARD_ERRORS.search(str(exc)) is not None


def _traced_grads(session, outs: list, inputs: list, tangents: list) -> tuple[list, tuple]:
    """The traced gradients of `inputs`, and (position in `outs`, error) per output whose backward
    raises in eager's engine (Note [outputs whose backward reads a mutated saved value])."""
    try:
        with session.tracer:
            return list(torch.autograd.grad(outs, inputs, tangents, allow_unused=True, retain_graph=True)), ()
    except RuntimeError as exc:
        if not _raises_in_eagers_backward(exc):
            raise
    poisoned = []
    for j, (o, t) in enumerate(zip(outs, tangents)):
        try:  # fake tensors only, outside the tracer: nothing is recorded
            torch.autograd.grad([o], inputs, [t], allow_unused=True, retain_graph=True)
        except RuntimeError as exc:
            if not _raises_in_eagers_backward(exc):
                raise
            poisoned.append((j, str(exc)))
    bad = {j for j, _ in poisoned}
    keep = [j for j in range(len(outs)) if j not in bad]
    if not keep:
        return [None] * len(inputs), tuple(poisoned)
    with session.tracer:
        grads = torch.autograd.grad([outs[j] for j in keep], inputs, [tangents[j] for j in keep], allow_unused=True)
    return list(grads), tuple(poisoned)


def _autograd_nodes(outputs: list):
    seen, stack = set(), [getattr(o, "grad_fn", None) for o in outputs]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        yield fn
        stack.extend(next_fn for next_fn, _ in fn.next_functions)


@contextlib.contextmanager
def _record_delivered(outputs: list, delivered: dict, values: dict | None = None):
    """While the traced backward runs: `delivered[node]`, for each autograd node of `outputs`'
    graph that runs, the positions of its next edges it gave a gradient (not None) to, and
    `values[node]`, those gradients (fake tensors)."""
    def hook(fn):
        def record(grad_inputs, grad_outputs):
            delivered.setdefault(fn, set()).update(k for k, g in enumerate(grad_inputs) if g is not None)
            if values is not None:
                values.setdefault(fn, []).extend(g for g in grad_inputs if isinstance(g, torch.Tensor))
        return record

    handles = [fn.register_hook(hook(fn)) for fn in _autograd_nodes(outputs)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _grad_reach(outputs: list, inputs: list, delivered: dict | None = None,
                node_reach: dict | None = None) -> tuple[frozenset, ...]:
    """For each of `inputs` (leaves), the positions of the `outputs` whose autograd graph reaches
    it: where eager's engine would accumulate a gradient into it. The traced backward cannot say
    (a backward that is a constant, round's zeros, depends on no tangent). With `delivered`
    (`_record_delivered`), only the edges the traced backward gave a gradient to are followed
    (Note [zero, not None], unreached.py). `node_reach`, given, is filled likewise per autograd
    node."""
    where = {id(t): j for j, t in enumerate(inputs)}
    reach: list[set] = [set() for _ in inputs]
    for k, out in enumerate(outputs):
        if id(out) in where:
            reach[where[id(out)]].add(k)
        seen, stack = set(), [out.grad_fn]
        while stack:
            fn = stack.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            if node_reach is not None:
                node_reach.setdefault(fn, set()).add(k)
            variable = getattr(fn, "variable", None)
            if variable is not None and id(variable) in where:
                reach[where[id(variable)]].add(k)
            edges = fn.next_functions
            if delivered is not None:
                given = delivered.get(fn, ())
                edges = [e for i, e in enumerate(edges) if i in given]
            stack.extend(next_fn for next_fn, _ in edges)
    return tuple(frozenset(r) for r in reach)


def _mark_delivered(session, values: dict, node_reach: dict) -> None:
    """Note [gradients eager computes from no tangent] (unreached.py): each graph node that is a
    gradient an autograd node delivered gets `meta["ember_grad_reach"]`, the outputs that reach
    that autograd node."""
    functional = session.tracer.functional
    for fn, grads in values.items():
        reach = node_reach.get(fn)
        if not reach:
            continue
        for g in grads:
            e = functional.entries.get(id(g))
            # a base, or a view whose node is its value still (its base not written since)
            if e is not None and (e.base is g or e.version == functional.versions[id(e.base)]):
                e.node.meta["ember_grad_reach"] = frozenset(reach) | e.node.meta.get("ember_grad_reach", frozenset())


class _Session:
    """State shared by both traces: fake mode, tracer, placeholders."""

    def __init__(self, example_inputs, decompositions, requires_grad: bool, example_values=()):
        values = list(example_values)[: len(example_inputs)]
        values += [None] * (len(example_inputs) - len(values))
        symbolic = any(_is_symbolic_value(v) for v in values)
        # Note [symbolic traces]: FakeTensorMode's op cache keys SymInts through torch's own shape
        # environment; static: ember_symbolic's mode all the same, for its direct calls of the
        # primitives' fake kernels (Note [custom ops' fake kernels called directly])
        self.fake_mode = plain_fake_mode() if symbolic else symbolic_fake_mode()
        self.symbolic = symbolic
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.tracer = AtenTracer(self.graph, self.root, self.fake_mode, decompositions)
        self.args, self.primals, self.tensor_inputs, self.int_inputs = [], [], [], []
        # per primal: the leaf gradients are taken with respect to (the primal itself, or the
        # leaf it clones), and its grad_fn before the program ran
        self.grad_leaves: list = []
        self.input_grad_fns: list = []
        self.sym_inputs: list[tuple[int, torch.SymInt]] = []
        for i, (x, value) in enumerate(zip(example_inputs, values)):
            if isinstance(x, torch.Tensor):
                if x.layout != torch.strided or x.is_quantized:
                    raise AotTraceError("bad-input", f"example input {i} has layout {x.layout}; "
                                        "only dense strided tensors are supported")
                if _is_symbolic_value(value):
                    with self.fake_mode:
                        fake = torch.empty_strided(value.shape, value.stride(), dtype=x.dtype, device=x.device)
                else:
                    fake = self.fake_mode.from_tensor(x.detach())
                leaf = fake
                if requires_grad and x.requires_grad:
                    fake = leaf = fake.requires_grad_(True)
                    if _writable_under_autograd(x):  # Note [writes to inputs that require grad]
                        with self.fake_mode, torch.enable_grad():
                            fake = leaf.clone()
                self.tracer.placeholder(f"primals_{len(self.primals) + 1}", fake)
                self.primals.append(fake)
                self.grad_leaves.append(leaf)
                self.input_grad_fns.append(fake.grad_fn)
                self.tensor_inputs.append(i)
                self.args.append(fake)
            elif isinstance(x, int) and not isinstance(x, bool) and _is_symbolic_value(value):
                self.sym_inputs.append((i, value))
                self.args.append(value)
            elif isinstance(x, (int, float, bool)) or x is None:
                self.int_inputs.append((i, x))
                self.args.append(x)
            else:
                raise AotTraceError("bad-input", f"example input {i} is a {type(x).__name__}; "
                                    "expected a tensor or a number")
        for i, value in self.sym_inputs:  # after the tensors (Note [symbolic traces])
            self.tracer.placeholder(str(value.node.expr) if value.node.expr.is_Symbol else f"sym_{i}", value)
        self.graph_out_fakes: list = []

    def outputs(self, outs) -> tuple[Signature, list]:
        flat, spec = pytree.tree_flatten(outs)
        fn = self.tracer.functional
        primal_ids = {id(p): k for k, p in enumerate(self.primals)}
        kinds, nodes = [], []
        shared = _shared_bases(flat, fn, primal_ids)
        base_output: dict[int, int] = {}

        def graph_output(t) -> int:
            nodes.append(self.tracer.node_of(t))
            self.graph_out_fakes.append(t)
            return len(nodes) - 1

        for o in flat:
            if is_symbolic(o):  # a size the user returns: computed by the graph
                nodes.append(self.tracer.sizes.node_of(o))
                self.graph_out_fakes.append(o)
                kinds.append(("graph", len(nodes) - 1))
                continue
            if not isinstance(o, torch.Tensor):
                kinds.append(("const", o))
                continue
            entry = fn.entries.get(id(o))
            base = entry.base if entry is not None else None
            if base is not None and id(base) in primal_ids:
                size, stride, offset = _eager_layout(o, base, entry.chain)
                kinds.append(("alias", AliasOutput(primal_ids[id(base)], size, stride, offset,
                                                   o.requires_grad, o is base,
                                                   None if o.dtype == base.dtype else o.dtype)))
            elif base is not None and id(base) in shared:
                if id(base) not in base_output:
                    base_output[id(base)] = graph_output(base)
                k = base_output[id(base)]
                kinds.append(("graph", k) if o is base else ("view", ViewOutput(k, entry.chain)))
            else:
                kinds.append(("graph", graph_output(o)))
        mutated = tuple(k for k, p in enumerate(self.primals) if fn.version(p) > 0)
        num_graph = len(nodes)
        nodes += [fn.node_of(self.primals[k]) for k in mutated]
        sig = Signature(tuple(self.tensor_inputs), tuple(self.int_inputs), tuple(kinds), spec,
                        num_graph, mutated, sym_inputs=tuple(i for i, _ in self.sym_inputs),
                        symbols=self._symbol_sources())
        return sig, nodes

    def _symbol_sources(self) -> tuple:
        found: dict[str, tuple] = {}
        for k, fake in enumerate(self.primals):
            for kind, values in (("size", fake.shape), ("stride", fake.stride())):
                for d, v in enumerate(values):
                    if is_symbolic(v) and v.node.expr.is_Symbol:
                        found.setdefault(str(v.node.expr), (str(v.node.expr), k, kind, d))
        for j, (_, value) in enumerate(self.sym_inputs):
            if value.node.expr.is_Symbol:
                found.setdefault(str(value.node.expr), (str(value.node.expr), len(self.primals) + j, "int", 0))
        return tuple(found.values())

    def tangent(self, j: int, like: torch.Tensor) -> torch.Tensor:
        fake = torch.empty(like.shape, dtype=like.dtype, device=like.device)  # contiguous
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        with self.graph.inserting_before(first) if first is not None else contextlib.nullcontext():
            return self.tracer.placeholder(f"tangents_{j + 1}", fake)

    def finish(self, nodes) -> torch.fx.GraphModule:
        self.graph.output(tuple(nodes))
        self.graph.eliminate_dead_code()
        gm = torch.fx.GraphModule(self.root, self.graph)
        gm.graph.lint()
        return gm


# Note [eager strides of input views]: a fake tensor's view ops take their strides from torch's
# Python references, which differ from the C++ kernels on size-1 dimensions (a [4, 1, 3] view of
# strides (7, 7, 2) unflattened to [2, 2, 1, 3]: eager (14, 7, 6, 2), fake (14, 7, 7, 2)). Such a
# stride is observable (`.stride()`, `as_strided`; fuzz seed 5630), so the layout of an output that
# views an input is taken by replaying its view chain on a meta tensor of the input's layout:
# meta kernels are eager's.
def _eager_layout(o: torch.Tensor, base: torch.Tensor, chain: tuple) -> tuple:
    fake_layout = (tuple(o.shape), tuple(o.stride()), o.storage_offset())
    if not chain or not replayable(chain) or _is_symbolic_value(o) or _is_symbolic_value(base):
        return fake_layout
    try:
        with _disable_current_modes():  # real meta tensors, nothing traced
            extent = base.storage_offset() + sum((s - 1) * st for s, st in zip(base.shape, base.stride())) + 1
            meta = torch.empty(max(extent, 0), dtype=base.dtype, device="meta").as_strided(
                tuple(base.shape), tuple(base.stride()), base.storage_offset())
            view = replay_view(meta, chain)
    except Exception:  # noqa: BLE001 - a chain the meta kernels refuse: keep the fake's layout
        return fake_layout
    if tuple(view.shape) != fake_layout[0] or view.dtype != o.dtype:
        return fake_layout
    return tuple(view.shape), tuple(view.stride()), view.storage_offset()


def _shared_bases(flat: list, fn, primal_ids: dict) -> set[int]:
    """Intermediates that two or more user outputs are, or view through replayable chains."""
    count: dict[int, int] = {}
    for o in flat:
        entry = fn.entries.get(id(o)) if isinstance(o, torch.Tensor) else None
        if entry is None or id(entry.base) in primal_ids or not replayable(entry.chain):
            continue
        count[id(entry.base)] = count.get(id(entry.base), 0) + 1
    return {b for b, n in count.items() if n > 1}
