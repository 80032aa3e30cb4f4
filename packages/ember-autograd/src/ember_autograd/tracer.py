"""The ATen tracer: a TorchDispatchMode over FakeTensors that records every ATen op it sees
into a new FX graph, applying decompositions recursively and functionalizing as it goes.

Mode stack while tracing (top first): AtenTracer -> FakeTensorMode. Autograd sits above the
Python dispatch key, so in a joint trace the tracer sees the forward's ATen ops and then the
backward's, exactly as they run in eager.
"""
from __future__ import annotations

import contextlib
import operator
from collections.abc import Mapping

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode,
    _pop_mode_temporarily,
)

from ember_symbolic import SizeNodes

from ember_autograd.errors import AotError, AotTraceError, ErrorKind
from ember_autograd.functionalize import Functionalizer, is_view, writes_arguments
from ember_autograd.trees import tree_map

# FakeTensor's way of saying "this op has no static answer": turned into AotTraceError.
_FAKE_FAILURES = {
    DataDependentOutputException: "data-dependent",
    DynamicOutputShapeException: "dynamic-output-shape",
    UnsupportedOperatorException: "no-fake-kernel",
}
_FAKE_REASONS = {
    DataDependentOutputException: "the result depends on tensor data (static graphs only)",
    DynamicOutputShapeException: "the output's shape depends on tensor data (static shapes only)",
    UnsupportedOperatorException: "the operator has no fake/meta kernel, so it cannot be traced",
}


class AtenTracer(TorchDispatchMode):
    """Records ATen ops on fake tensors into `graph` (see module docstring).

    decompositions: a decomposer, ``OpOverload -> fn | None``, asked for each op before it is
    recorded: given a function, the tracer runs it and the ops it calls dispatch here again (the
    facade passes ``ember_prims.Decomposer``, which owns the rules of applying the table: Note
    [applying the table] in ember_prims/decomposer.py). A plain ``{OpOverload: fn}`` mapping is
    looked up as is."""

    def __init__(self, graph: torch.fx.Graph, root: torch.nn.Module, fake_mode: FakeTensorMode,
                 decompositions: dict | None = None):
        super().__init__()
        self.graph = graph
        self.root = root  # owns tensor constants (get_attr targets)
        self.fake_mode = fake_mode
        self.decompose = _as_decomposer(decompositions)
        self.stack_trace: str | None = None  # the torch-level node being run (set by the caller)
        self.functional = Functionalizer(self._record, self.call, self.constant)
        self.sizes = SizeNodes(graph)  # Note [symbolic traces] (joint.py)
        self._constants: dict[int, torch.Tensor] = {}
        self._keep: list[torch.Tensor] = []

    # --- mode plumbing -------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.call(func, args, kwargs or {})

    def _on_top(self):
        return contextlib.nullcontext() if _get_current_dispatch_mode() is self else self

    def _below(self):
        return _pop_mode_temporarily() if _get_current_dispatch_mode() is self else contextlib.nullcontext()

    def current_stack_trace(self) -> str | None:
        node = torch._C._current_autograd_node()  # set while the autograd engine runs a backward
        if node is not None:
            return node.metadata.get("stack_trace", self.stack_trace)
        return self.stack_trace

    # --- entry points ----------------------------------------------------------------------------
    def placeholder(self, name: str, fake):
        """A graph input: a fake tensor (tracked as a base) or a SymInt (a symbolic int input)."""
        node = self.graph.placeholder(name)
        node.meta["val"] = fake
        self.sizes.bind_input(node, fake)
        if not isinstance(fake, torch.Tensor):
            return fake
        return self.functional.track_base(fake, node, is_input=True)

    def constant(self, real: torch.Tensor) -> torch.Tensor:
        """A tensor constant of the program (get_attr in the traced graph), as a tracked fake."""
        fake = self._constants.get(id(real))
        if fake is None and real.requires_grad and torch.is_grad_enabled():
            # a parameter reached through get_attr/call_module: it would get no gradient
            raise AotTraceError("unlifted-parameter", "a tensor constant of the graph requires "
                                "grad; lift parameters to placeholders (backend protocol)",
                                stack_trace=self.stack_trace)
        if fake is None:
            name = f"_tensor_constant{len(self._constants)}"
            with _disable_current_modes():  # plain tensors: nothing here is traced
                value = real.detach()
                fake = self.fake_mode.from_tensor(value)
            setattr(self.root, name, value)
            node = self.graph.get_attr(name)
            node.meta["val"] = fake
            self._keep.append(real)
            self._constants[id(real)] = fake
            self.functional.track_base(fake, node)
        return fake

    def node_of(self, t: torch.Tensor) -> torch.fx.Node:
        return self.functional.node_of(t)

    def call(self, func, args, kwargs):
        """Dispatches one ATen call: decompose, or functionalize and record."""
        if func.namespace == "prim":  # prim.device and friends: metadata, nothing to record
            with self._below():
                return func(*args, **kwargs)
        writes = writes_arguments(func, args, kwargs)
        if writes or (is_view(func) and func.namespace != "ember_prims"):
            return self._functionalize_first(func, args, kwargs, writes)
        decomposition = self.decompose(func)
        if decomposition is None and _composite(func):
            # whatever the decomposer (a plain mapping, or none), the graph records only ops
            # with kernels of their own, as eager runs them (a composite op called from inside a
            # decomposition reaches the tracer below autograd, where eager would break it up)
            decomposition = func.decompose
        if decomposition is not None:
            return self._run(decomposition, *args, **kwargs)
        return self._functionalize(func, args, kwargs)

    def _functionalize_first(self, func, args, kwargs, writes: bool):
        # Note [functionalize before decompose]: a call that writes its arguments is
        # functionalized first and only its functional counterpart is decomposed; a view op is
        # tracked as a view of its input before it is decomposed (its decomposition only
        # computes the view's value), so that a write through it reaches its base and the base's
        # other views. Either is first broken into the ops eager would run when it has a
        # CompositeImplicitAutograd kernel (reshape is a view, or a copy, depending on the
        # input's strides).
        if _composite(func):
            return self._run(func.decompose, *args, **kwargs)
        decomposition = None if writes else self.decompose(func)
        lower = None if decomposition is None else lambda *a, **k: self._run(decomposition, *a, **k)
        return self._functionalize(func, args, kwargs, lower)

    def _run(self, decomposition, *args, **kwargs):
        with self._on_top():  # the ops it calls dispatch here again
            return decomposition(*args, **kwargs)

    def _functionalize(self, func, args, kwargs, lower=None):
        args, kwargs = self.functional.as_fakes((args, kwargs))
        try:
            return self.functional.dispatch(func, args, kwargs, lower)
        except AotError as e:
            if e.stack_trace is None:
                raise type(e)(e.kind, e.reason, op=e.op or func, stack_trace=self.current_stack_trace()) from e
            raise
        except tuple(_FAKE_FAILURES) as e:
            raise AotTraceError(_FAKE_FAILURES[type(e)], _FAKE_REASONS[type(e)], op=func,
                                stack_trace=self.current_stack_trace()) from e

    def _record(self, op, args, kwargs, node=None):
        """Runs `op` on fakes and records it; `node` given: an alias, compute only."""
        node_args, node_kwargs = tree_map(self._node_value, (args, kwargs))
        with self._below():
            out = _as_cpu_kernels_give(op, args, op(*args, **kwargs))
        if node is not None or not any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(out)):
            return out
        n = self.graph.call_function(op, tuple(node_args), dict(node_kwargs))
        self._annotate(n, out)
        self._track_outputs(out, n)
        return out

    def _node_value(self, x):
        """What an argument is in the graph: a tensor's node, a symbolic size's node, else itself."""
        if isinstance(x, torch.Tensor):
            return self.node_of(x)
        if isinstance(x, _SIZES):
            return self.sizes.node_of(x)
        return x

    def _track_outputs(self, out, n: torch.fx.Node):
        """Each tensor of `out` (the value of node `n`) as a base, through getitem nodes; a
        list inside a tuple (`_amp_foreach_non_finite_check_and_unscale` returns the new
        gradients and found_inf) through a getitem of a getitem."""
        if isinstance(out, torch.Tensor):
            self.functional.track_base(out, n)
            return
        for i, o in enumerate(out):
            if isinstance(o, torch.Tensor) or (isinstance(o, (list, tuple)) and o):
                item = self.graph.call_function(operator.getitem, (n, i))
                self._annotate(item, o)
                self._track_outputs(o, item)

    def _annotate(self, node: torch.fx.Node, val):
        node.meta["val"] = val
        stack = self.current_stack_trace()
        if stack is not None:
            node.meta["stack_trace"] = stack


_SIZES = (torch.SymInt, torch.SymFloat)


def _composite(func) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
    except RuntimeError:  # an op the dispatcher does not know: TorchScript's aten::size(Tensor) -> int[]
        return False


def _as_decomposer(decompositions):
    if decompositions is None:
        return lambda op: None
    if isinstance(decompositions, Mapping):
        return decompositions.get
    return decompositions


class TorchGraphInterpreter(torch.fx.Interpreter):
    """Runs a torch-level graph on fakes under the tracer: tells the tracer which user line is
    running, tags autograd nodes with it (for the backward's stack traces), blames the user's
    line on failure."""

    def __init__(self, gm: torch.fx.GraphModule, tracer: AtenTracer):
        super().__init__(gm, garbage_collect_values=True)
        self.extra_traceback = False  # our errors carry the user's line instead
        self.tracer = tracer

    def run_node(self, n: torch.fx.Node):
        stack = n.meta.get("stack_trace")
        self.tracer.stack_trace = stack
        if n.target in _STORAGE_READERS and n.op in ("call_function", "call_method"):
            self._check_storage_layout(n, stack)
        try:
            out = super().run_node(n)
        except AotError:
            raise
        except Exception as e:
            reason = str(e).split("\n\nWhile executing")[0]
            raise AotTraceError("torch-op-failed", f"{type(e).__name__}: {reason}", op=_describe(n),
                                stack_trace=stack) from e
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                _tag_autograd_nodes(t.grad_fn, stack)
        return out

    def _check_storage_layout(self, n: torch.fx.Node, stack):
        # Note [as_strided of a computed value]: as_strided reads its input's storage, so its
        # result depends on the input's memory layout. A decomposed op's result is laid out as
        # its decomposition lays it out, not always as eager's kernel does (a division of a
        # transposed tensor: eager keeps the input's stride order, the trace is row-major), and
        # as_strided would then read other elements (fuzz seed 3137). The captured graph's
        # example value has eager's layout: where the traced one differs, the trace fails.
        src = n.args[0] if n.args else None
        eager = src.meta.get("example_value") if isinstance(src, torch.fx.Node) else None
        traced = self.env.get(src) if isinstance(src, torch.fx.Node) else None
        if not isinstance(eager, torch.Tensor) or not isinstance(traced, torch.Tensor):
            return
        if _addressing(eager) != _addressing(traced):
            raise AotTraceError(ErrorKind.STORAGE_LAYOUT, f"strides {tuple(traced.stride())} traced where eager "
                                f"has {tuple(eager.stride())}", op=_describe(n), stack_trace=stack)

    def call_function(self, target, args, kwargs):
        aten_form = _ATEN_FORMS.get(target)
        out = NotImplemented if aten_form is None else aten_form(*args, **kwargs)
        return super().call_function(target, args, kwargs) if out is NotImplemented else out

    def get_attr(self, target, args, kwargs):
        val = super().get_attr(target, args, kwargs)
        return self.tracer.constant(val) if isinstance(val, torch.Tensor) else val


# Note [python kernels that are not eager's]: a symbolic trace runs under torch's Python
# dispatcher (ember_symbolic), where some CompositeImplicitAutograd ops take the Python kernel
# torch registers for them instead of ATen's C++ one, and a few of those differ from eager in
# more than speed: `dropout` that drops nothing returns `input.clone()` where ATen returns the
# input itself (so a compiled output lost its aliasing and its strides, fuzz seed 3256). The
# interpreter runs eager's form of such calls itself; NotImplemented: the call as it is.
def _dropout_as_aten(input, p=0.5, training=True, inplace=False):
    # ATen's dropout (native/Dropout.cpp, _dropout_impl): p == 0 or not training -> the input
    if isinstance(p, (int, float)) and isinstance(training, bool) and (p == 0 or not training):
        return input
    return NotImplemented


def _torch_dropout_as_aten(input, p, train):
    return _dropout_as_aten(input, p, train)


def _addressing(t: torch.Tensor):
    """What decides where t's elements lie in its storage (None: symbolic, not compared)."""
    layout = (t.storage_offset(), *((n, st) for n, st in zip(t.shape, t.stride()) if n != 1))
    return tuple(layout) if all(isinstance(v, int) for v in pytree.tree_leaves(layout)) else None


_STORAGE_READERS = {torch.as_strided, "as_strided"}
_ATEN_FORMS = {torch.nn.functional.dropout: _dropout_as_aten, torch.dropout: _torch_dropout_as_aten}


def _describe(n: torch.fx.Node) -> str:
    target = n.target
    return f"{n.op} {getattr(target, '__name__', target)}"


def _tag_autograd_nodes(fn, stack):
    # Autograd nodes created by this torch-level op are the untagged ones reachable from its
    # outputs (earlier ops' nodes are tagged already): the backward ops they run get `stack`.
    todo = [fn]
    while todo:
        f = todo.pop()
        if f is None or "stack_trace" in f.metadata:
            continue
        f.metadata["stack_trace"] = stack
        todo.extend(nxt for nxt, _ in f.next_functions)


# Note [meta kernels that disagree with the CPU's]: torch's meta kernel of batch norm gives the
# saved statistics the input's dtype and the new running statistics float32, whatever the
# device; ATen's CPU kernel gives the statistics float32 when a bfloat16/float16 input meets
# float32 parameters ("mixed type", autocast's case) and the input's dtype otherwise, and the
# running statistics their own dtype. A graph whose recorded dtypes are not what its kernels
# return breaks the compilers' contract (EMBER_CHECK's output check caught it under CPU autocast
# with aot_eager), so the recorded value follows the CPU kernel. ember_prims' decomposition
# (`_bn_stat_dtype`) computes the same dtypes.
_aten = torch.ops.aten
_BATCH_NORMS = {_aten.native_batch_norm, _aten._native_batch_norm_legit, _aten._native_batch_norm_legit_functional,
                _aten._native_batch_norm_legit_no_training}


def _as_cpu_kernels_give(op, args, out):
    packet = getattr(op, "overloadpacket", None)
    if packet not in _BATCH_NORMS or not isinstance(out, tuple) or len(out) < 3:
        return out
    a = args[0]
    if not isinstance(a, torch.Tensor) or a.device.type != "cpu":
        return out
    params = [p for p in args[1:5] if isinstance(p, torch.Tensor)]
    stat = torch.float32 if a.dtype in (torch.bfloat16, torch.float16) and any(
        p.dtype != a.dtype for p in params) else a.dtype
    fixed = list(out)
    for k in (1, 2):
        if fixed[k].dtype != stat:
            fixed[k] = fixed[k].to(stat)
    if packet is _aten._native_batch_norm_legit_functional and len(out) == 5:
        for k, running in ((3, args[3]), (4, args[4])):
            if isinstance(running, torch.Tensor) and fixed[k].dtype != running.dtype:
                fixed[k] = fixed[k].to(running.dtype)
    return tuple(fixed)
