"""Lowering: a prims-level FX graph -> loop-level IR (see Note [Index functions] in ir.py).

Each prim of `ember_prims.PRIMS` has one lowering, registered in `LOWERINGS` by
`@lowering("name", ...)` next to its kind (pointwise.py, views.py, reductions.py, misc.py), or is
listed in `RUNS_EAGERLY`. A node without a lowering (an ATen extern, a prim of RUNS_EAGERLY)
becomes an extern call: the wrapper calls the op eagerly, so the result is never wrong, only slower.
Layouts are not decided here: lowering consults the graph's `LayoutPlan` (layout.py).
"""
from __future__ import annotations

import dataclasses
import logging
import operator
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx as fx

from ember_inductor.ir import (Buffer, ComputedBuffer, ConstantBuffer, ExternBuffer, ExternCall, InputBuffer, IRNode,
                               Pointwise, Reduction, View, contiguous_strides, numel)
from ember_inductor.layout import LayoutPlan
from ember_inductor.lowering import misc, pointwise, reductions, views  # noqa: F401  (they register)
from ember_inductor.lowering.registry import LOWERINGS, PRIM_NAMES, RUNS_EAGERLY
from ember_inductor.sizes import as_size, as_sizes, is_size_symbol, is_size_target, is_static, known_equal
from ember_symbolic import env_of, expr_of

log = logging.getLogger("ember_inductor.lowering")

@dataclass
class LoweredGraph:
    inputs: list            # InputBuffer, or a Python scalar placeholder value
    steps: list             # ComputedBuffer | ExternCall, in a valid execution order
    outputs: list           # Buffer (possibly a strided view) or Python scalar
    output_kind: type       # tuple or list (what the graph's output node returns)
    single_output: bool
    fallbacks: list = field(default_factory=list)  # (node name, op, reason)
    constants: list = field(default_factory=list)  # ConstantBuffer
    # Note [symbolic sizes in the inductor]: the symbols' values in the call being compiled, and
    # the environment they came from (None for a static graph)
    hints: dict = field(default_factory=dict)
    env: object = None
    # Note [host scalars]: 0-d CPU buffers the device's kernels take by value
    host_scalars: frozenset = frozenset()

    def format(self) -> str:
        lines = ["inputs: " + ", ".join(_fmt_buffer(b) for b in self.inputs)]
        for s in self.steps:
            if isinstance(s, ExternCall):
                lines.append(f"{s.name} = extern {s.op}  # {s.origin} ({s.reason})")
            else:
                body = s.body
                what = (f"reduction {body.reduce_type} dims={list(body.dims)} of {list(body.input_sizes)}"
                        if isinstance(body, Reduction) else "pointwise")
                lines.append(f"{_fmt_buffer(s)} = {what}  # {', '.join(s.origins)}")
        lines.append("outputs: " + ", ".join(_fmt_buffer(b) for b in self.outputs))
        return "\n".join(lines)


def _fmt_buffer(b) -> str:
    if not isinstance(b, Buffer):
        return repr(b)
    return f"{b.name}{list(b.sizes)}:{str(b.dtype).removeprefix('torch.')}"


class LoweringContext:
    """What lowerings need: naming, realization, the steps list being built, and the graph's
    layout plan (consulted wherever a buffer is made)."""

    def __init__(self, options, layout: LayoutPlan | None = None):
        self.options = options
        self.layout = layout or LayoutPlan()
        self.steps: list = []
        self.fallbacks: list = []
        self._count = 0
        self._realized: dict[int, tuple] = {}  # id(lazy value) -> (lazy value, its buffer)
        self.relaid: set[int] = set()  # ids of buffers laid out as the plan says, not as recorded
        self.relaid_storage: set[str] = set()  # their names: a view of one keeps its base's name
        self._laid_out: dict[tuple, tuple] = {}  # (id(value), strides) -> (value, buffer): realize_as
        self.split_reductions = False  # set by lower_graph: see Note [split reductions]
        self.hints: dict = {}  # size symbol -> its value in this call (heuristics only)
        self.host_scalars: set[str] = set()  # Note [host scalars]

    def new_name(self, prefix="buf") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def realize(self, node: IRNode, origin: str = "", contiguous: bool = False) -> Buffer:
        """Materialize a lazy value into a buffer that one kernel writes: contiguous, or in the
        layout the plan gives it (unless `contiguous`)."""
        if isinstance(node, Buffer):
            return node
        if id(node) in self._realized:
            return self._realized[id(node)][1]
        planned = None if contiguous else self.layout.realized_strides(node)
        if planned is not None:
            return self.relaid_as(node, planned, origin)
        buf = ComputedBuffer(self.new_name(), tuple(node.sizes), contiguous_strides(node.sizes),
                             node.dtype, node.device, 0, body=node,
                             origins=(origin or getattr(node, "origin", ""),))
        self.steps.append(buf)
        self._realized[id(node)] = (node, buf)
        return buf

    def current(self, value):
        """Note [realized values are read, not recomputed]: once a lazy value has been written to
        a buffer (an extern's argument: GELU's gradient going into a matmul), later consumers
        (the bias gradient's sum) load that buffer instead of recomputing its expression."""
        hit = self._realized.get(id(value)) if isinstance(value, IRNode) else None
        return hit[1] if hit is not None else value

    def relaid_as(self, value: IRNode, strides: tuple, origin: str) -> Buffer:
        """`value` as a buffer with the plan's `strides` (channels-last: Note [channels-last
        convolutions]). A lazy value is written once, in that order, and later consumers read it."""
        if isinstance(value, Buffer) and tuple(value.strides) == strides:
            return value
        hit = self._realized.get(id(value))
        if hit is not None and id(hit[1]) in self.relaid:
            return hit[1]
        buf = self.realize_as(value, strides, origin)
        self.mark_relaid(buf)
        if not isinstance(value, Buffer):
            self._realized[id(value)] = (value, buf)
        return buf

    def mark_relaid(self, buf: Buffer) -> None:
        self.relaid.add(id(buf))
        self.relaid_storage.add(buf.name)

    def realize_as(self, value: IRNode, strides: tuple, origin: str) -> Buffer:
        """`value` as a buffer with `strides`, a dense layout (a permutation of the contiguous
        one; else contiguous): written once in that memory order (contiguous stores) and
        relabelled as a strided view. A buffer in another layout is copied."""
        sizes = tuple(value.sizes)
        order = memory_order(sizes, strides, self.hints)
        if order is None:
            order, strides = tuple(range(len(sizes))), contiguous_strides(sizes)
        if isinstance(value, Buffer) and same_layout(sizes, value.strides, strides):
            return value
        key = (id(value), tuple(strides))
        hit = self._laid_out.get(key)
        if hit is not None:
            return hit[1]
        source = self.current(value)
        if isinstance(source, Buffer):
            if same_layout(sizes, source.strides, strides):
                return source
            source = Pointwise(sizes, source.dtype, source.device, source.load, origin)
        inverse = [order.index(d) for d in range(len(sizes))]
        view = View(source, tuple(sizes[d] for d in order), lambda idx: [idx[i] for i in inverse], origin,
                    tuple(order))
        base = self.realize(view, origin, contiguous=True)
        buf = dataclasses.replace(base, sizes=sizes, strides=tuple(strides), is_view=True)
        self._laid_out[key] = (value, buf)
        return buf

    def extern(self, node: fx.Node, op, args, kwargs, reason: str) -> object:
        """Call `op` eagerly from the wrapper; tensor arguments are realized first, in the
        layouts the plan gives them."""
        relaid = self.layout.relaid_operands(op, args)
        recorded_operands = self.layout.recorded_operands(op, args)
        if relaid:
            args = list(args)
            for i in relaid:
                args[i] = self.relaid_as(args[i], self.layout.relaid_strides(args[i]), node.name)
            w = self.layout.relaid_weight(op, args)
            if w is not None:  # Note [channels-last weights]
                args[w] = self.realize_as(args[w], self.layout.relaid_strides(args[w]), node.name)
        def realize_arg(a):
            if isinstance(a, Buffer) and any(_negative(st) for st in a.strides):  # torch views cannot flip
                a = Pointwise(a.sizes, a.dtype, a.device, a.load, node.name)
            if isinstance(a, View) and a.permutation is not None and self.layout.strided_operands(op):
                # a transposed operand: the base is written in its own order (contiguous stores)
                # and the library call gets a strided view of it (BLAS reads either layout)
                base = self.realize(a.base, node.name)
                return dataclasses.replace(base, sizes=tuple(a.sizes), is_view=True,
                                           strides=tuple(base.strides[d] for d in a.permutation))
            if isinstance(a, IRNode) and recorded_operands:
                a = self.as_recorded(a, recorded.get(id(a)), node.name)
            elif isinstance(a, IRNode):
                a = self.realize(a, node.name)
            if isinstance(a, Buffer) and self.layout.dense_last_dim(op, a) and not _dense_last(a):
                a = self.realize_as(a, recorded.get(id(a)) or contiguous_strides(a.sizes), node.name)
            return a
        recorded = _recorded_strides(node, args, kwargs)
        args = torch.utils._pytree.tree_map(realize_arg, tuple(args))
        kwargs = torch.utils._pytree.tree_map(realize_arg, dict(kwargs))
        call = ExternCall(self.new_name("ext"), op, args, kwargs, node.name, reason=reason,
                          fit=self.layout.fits_result(op))
        self.steps.append(call)
        val = node.meta.get("val")
        vals = list(val) if isinstance(val, (tuple, list)) else [val]
        for i, v in enumerate(vals):
            if isinstance(v, torch.Tensor):
                strides = self.layout.result_strides(bool(relaid), i, v)
                out = ExternBuffer(self.new_name(), as_sizes(v.shape), strides, v.dtype, v.device,
                                   0, call=call, item=i if isinstance(val, (tuple, list)) else None)
                if relaid and i == 0:
                    self.mark_relaid(out)
            else:
                out = None
            call.outputs.append(out)
        self.fallbacks.append((node.name, str(op), reason))
        return call.outputs if isinstance(val, (tuple, list)) else call.outputs[0]


    def as_recorded(self, value: IRNode, strides: tuple | None, origin: str) -> Buffer:
        """Note [externs see eager's layouts]
        In a graph with 2-D convolutions, 4-D values are realized channels-last (Note
        [channels-last convolutions]): a layout eager never produced. A library kernel other than
        the convolution's may not read it right: the CPU flash attention (an extern of ATen's
        scaled_dot_product_attention) assumes a dense last dimension, which ATen's dispatcher
        checks before choosing it, and a ViT (patch convolution, then attention over q, k, v
        realized channels-last) came out silently wrong. So such an extern's tensor operands
        get the layout the graph recorded for them (eager's), and a channels-last buffer is
        copied back first. So is a view of such a buffer (a slice, a permutation: a strided
        `Buffer` over the same storage, which keeps the base's name): torchvision's ViT saves its
        in-projection for the backward as one 4-D value, written channels-last, and q, k and v
        are slices of it (its training step's loss was NaN or garbage)."""
        if strides is None:
            strides = contiguous_strides(value.sizes)
        if isinstance(value, Buffer) and value.name not in self.relaid_storage:
            return value  # an input, an extern's result, a contiguous buffer, views of them: as eager had it
        return self.realize_as(value, tuple(strides), origin)


def _recorded_strides(node: fx.Node, args, kwargs) -> dict:
    """id(lowered operand) -> the strides its FX node's meta recorded (eager's layout)."""
    lowered = torch.utils._pytree.tree_leaves((tuple(args), dict(kwargs)))
    nodes = torch.utils._pytree.tree_leaves((tuple(node.args), dict(node.kwargs)))
    out = {}
    if len(lowered) == len(nodes):
        for value, n in zip(lowered, nodes):
            val = n.meta.get("val") if isinstance(n, fx.Node) else None
            if isinstance(value, IRNode) and isinstance(val, torch.Tensor):
                out[id(value)] = as_sizes(val.stride())
    return out


def memory_order(sizes, strides, hints: dict | None = None) -> tuple | None:
    """The dimensions from outermost to innermost in memory, if `strides` lay `sizes` out
    densely (a permutation of the contiguous layout, for every value of the symbols); else None.
    The order is proposed from the hints and then checked exactly."""
    order = tuple(sorted(range(len(sizes)), key=lambda d: (-_hint(strides[d], hints), d)))
    dense = contiguous_strides([sizes[d] for d in order])
    ok = all(_at_most_one(sizes[d]) or known_equal(strides[d], dense[i]) for i, d in enumerate(order))
    return order if ok else None


def same_layout(sizes, a, b) -> bool:
    """The same addresses: strides that differ only on dimensions of size 1."""
    return all(_at_most_one(n) or known_equal(x, y) for n, x, y in zip(sizes, a, b))


def _at_most_one(n) -> bool:
    return is_static(n) and int(n) <= 1


def _dense_last(buf: Buffer) -> bool:
    # Note [attention operands with a dense last dimension]
    return _at_most_one(buf.sizes[-1]) or known_equal(buf.strides[-1], 1)


def _negative(st) -> bool:
    return int(st) < 0 if is_static(st) else bool(sympy.sympify(st).is_negative)


def _hint(v, hints) -> int:
    if is_static(v):
        return int(v)
    # a symbol without a hint (a hand-built graph): large, so products order by their degree
    return int(sympy.sympify(v).xreplace({s: (hints or {}).get(s, 1024) for s in sympy.sympify(v).free_symbols}))


MAX_RECOMPUTED_READS = 3


def _bound_recompute(ctx, node: fx.Node, env: dict, reads: dict) -> None:
    """Note [bounded recomputation]
    A lazy value is recomputed by each consumer that fuses it. A value with several consumers
    whose expression loads more than MAX_RECOMPUTED_READS buffers is realized instead: else a
    transformer's residual stream (x + attn + mlp + ..., read by each block's layer norm and
    by the next addition) would grow one load per block, and block k's kernels would re-read
    every earlier block's outputs."""
    value = ctx.current(env[node])
    if _is_size_arithmetic(node) or isinstance(value, sympy.Basic):
        reads[node] = frozenset()  # a size (Note [size arithmetic nodes]) reads no buffer
        return
    if not isinstance(value, IRNode) or isinstance(value, Buffer):
        reads[node] = frozenset({node})
        return
    found = frozenset().union(*(reads.get(a, frozenset({a})) for a in node.all_input_nodes))
    if len(node.users) > 1 and len(found) > MAX_RECOMPUTED_READS and isinstance(value, (Pointwise, View)):
        env[node] = ctx.realize(value, node.name)
        found = frozenset({node})
    reads[node] = found


def _one_element(sizes) -> bool:
    return all(is_static(s) and s == 1 for s in sizes)


def _realize_output_here(ctx, node: fx.Node, env: dict, position: int) -> None:
    """Note [outputs realized where they are computed]
    A graph output that is a lazy value (inlined into its consumers so far) is written to its
    buffer where the graph computes it, in the layout the output will have. Realized at the
    output node instead, it was computed at the end of the graph: a training forward's saved
    values (a transposed key of each attention layer, each layer's activation) became kernels
    after the last layer, which kept every layer's inputs to them alive until then (BERT-base's
    forward peaked 570 MB above what it saves). Consumers after it load the buffer. A single
    element stays lazy (realized at the output node, as before): an optimizer's step count is
    cheaper recomputed by each update that reads it than loaded after a kernel of its own, and
    loading it would chain the updates after that kernel (they could no longer share a launch
    with it: Note [horizontal fusion]); it holds nothing alive worth the difference."""
    value = ctx.current(env[node])
    if isinstance(value, IRNode) and not isinstance(value, Buffer) and not _one_element(value.sizes):
        env[node] = ctx.realize(value, node.name, contiguous=not ctx.layout.leaves_as_planned(position))


def lower_graph(gm: fx.GraphModule, example_inputs, options, layout: LayoutPlan | None = None,
                split_reductions: bool = False) -> LoweredGraph:
    """Walk the graph once, lowering each node by table; unknown ops become extern calls.
    `layout`: the graph's layout plan (layout.plan_layouts; default: every layout as recorded).
    `split_reductions`: reduce long rows of few-row reductions in two kernels (Note [split
    reductions])."""
    ctx = LoweringContext(options, layout)
    ctx.split_reductions = split_reductions
    env_ = _size_env(gm)
    ctx.hints = dict(env_.hints) if env_ is not None else {}
    env: dict[fx.Node, object] = {}
    inputs, constants = [], []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ValueError(f"graph has {len(placeholders)} inputs, got {len(example_inputs)} examples")
    outputs, output_kind, single = [], tuple, False
    reads: dict[fx.Node, frozenset] = {}  # see _bound_recompute
    result = gm.graph.output_node().args[0]
    first_output: dict[fx.Node, int] = {}  # Note [outputs realized where they are computed]
    for k, r in enumerate(result if isinstance(result, (tuple, list)) else [result]):
        if isinstance(r, fx.Node):
            first_output.setdefault(r, k)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            ex = example_inputs[len(inputs)]
            meta = node.meta.get("val")
            if isinstance(ex, (torch.SymInt, torch.SymFloat, torch.SymBool)) and meta is None:
                meta = ex
            if isinstance(ex, torch.Tensor):
                # Note [symbolic sizes in the inductor]: a symbolic input's sizes are its meta's
                # (or its example's: ember_autograd hands the compilers fakes with SymInt sizes)
                like = next((v for v in (meta, ex) if isinstance(v, torch.Tensor) and _has_symbols(v)), ex)
                val = InputBuffer(f"in{len(inputs)}", as_sizes(like.shape), as_sizes(like.stride()), ex.dtype,
                                  ex.device, 0, position=len(inputs))
            elif isinstance(meta, (torch.SymInt, torch.SymFloat, torch.SymBool)) and is_size_symbol(as_size(meta)):
                val = as_size(meta)  # a dynamic int input: its symbol (the wrapper binds it)
                reads[node] = frozenset()
            else:
                val = ex
            inputs.append(val)
            env[node] = val
        elif node.op == "call_function":
            args = _sizes_as_exprs(fx.node.map_arg(node.args, lambda n: ctx.current(env[n])))
            kwargs = _sizes_as_exprs(fx.node.map_arg(node.kwargs, lambda n: ctx.current(env[n])))
            env[node] = _lower_call(ctx, node, args, kwargs)
            if node in first_output:
                _realize_output_here(ctx, node, env, first_output[node])
            _bound_recompute(ctx, node, env, reads)
        elif node.op == "output":
            result = node.args[0]
            single = not isinstance(result, (tuple, list))
            output_kind = list if isinstance(result, list) else tuple
            seen: dict[fx.Node, object] = {}
            for k, r in enumerate([result] if single else result):
                if isinstance(r, fx.Node) and r in seen:  # one value returned twice (a forward's
                    outputs.append(seen[r])               # output that is also saved): one buffer
                    continue
                v = ctx.current(env[r]) if isinstance(r, fx.Node) else r
                planned = ctx.layout.leaves_as_planned(k)
                if isinstance(v, Buffer) and id(v) in ctx.relaid and planned:
                    pass  # saved for the backward: leaves as planned (Note [saved outputs])
                elif isinstance(v, Buffer) and (v.is_view or id(v) in ctx.relaid):
                    # outputs are fresh values, never views, in their recorded layout
                    v = Pointwise(v.sizes, v.dtype, v.device, v.load, r.name)
                if isinstance(v, IRNode) and not isinstance(v, Buffer):
                    v = ctx.realize(v, r.name, contiguous=not planned)
                outputs.append(v)
                if isinstance(r, fx.Node):
                    seen[r] = v
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            if isinstance(value, torch.Tensor):
                value = ConstantBuffer(ctx.new_name("const"), tuple(value.shape), tuple(value.stride()),
                                       value.dtype, value.device, 0, value=value)
                constants.append(value)
            env[node] = value
        else:
            raise ValueError(f"unsupported node {node.format_node()}")
    return LoweredGraph(inputs, ctx.steps, outputs, output_kind, single, ctx.fallbacks, constants,
                        ctx.hints, env_, frozenset(ctx.host_scalars))


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _sizes_as_exprs(args):
    """SymInts held in a node's arguments (a rewrite put `list(val.shape)` there) as the
    expressions they are (Note [symbolic sizes in the inductor]): never their hints."""
    return torch.utils._pytree.tree_map_only(_SYM_TYPES, lambda v: as_size(v) if isinstance(v, torch.SymInt)
                                             else expr_of(v), args)


def _has_symbols(val: torch.Tensor) -> bool:
    return any(not isinstance(v, int) for v in (*val.shape, *val.stride()))


def _size_env(gm: fx.GraphModule):
    """The SizeEnv of the graph's symbolic sizes (None for a static graph)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        values = [val] if not isinstance(val, torch.Tensor) else [*val.shape, *val.stride()]
        found = env_of(v for v in values if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)))
        if found is not None:
            return found
    return None


# Note [size arithmetic nodes] (sizes.py): evaluated to sympy expressions (their meta["val"]'s,
# else by applying the function to the lowered arguments).
SIZE_QUERIES = {
    torch.ops.aten.sym_size.int: lambda a, dim: a.sizes[dim],
    torch.ops.aten.sym_stride.int: lambda a, dim: a.strides[dim],
    torch.ops.aten.sym_numel.default: lambda a: numel(a.sizes),
    torch.ops.aten.sym_storage_offset.default: lambda a: a.offset,
}


def _is_size_arithmetic(node: fx.Node) -> bool:
    if node.target in SIZE_QUERIES:
        return True
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True  # whatever computes it: its value is an expression over the symbols
    return is_size_target(node.target) and isinstance(val, (int, float, bool))


def _size_value(node: fx.Node, args, kwargs):
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        return as_size(val)
    if isinstance(val, (torch.SymFloat, torch.SymBool)):
        return sympy.sympify(val.node.expr)
    if isinstance(val, (float, bool)):
        return val
    query = SIZE_QUERIES.get(node.target)
    if query is not None:
        return as_size(query(*args, **kwargs))
    out = node.target(*[sympy.sympify(a) if not isinstance(a, (int, float)) else a for a in args], **kwargs)
    return as_size(out) if isinstance(out, (int, sympy.Basic)) and not isinstance(out, bool) else out


def _lower_call(ctx, node, args, kwargs):
    target = node.target
    if target is operator.getitem:
        return args[0][args[1]]
    if _is_size_arithmetic(node):  # Note [size arithmetic nodes]
        return _size_value(node, args, kwargs)
    name = PRIM_NAMES.get(target)
    if name == "device_put":
        out = _host_scalar(ctx, node, *args, **kwargs)
        if out is not NotImplemented:
            return out
    fn = LOWERINGS.get(name) if name else None
    if fn is not None:
        out = fn(ctx, node, *args, **kwargs)
        if out is not NotImplemented:
            if isinstance(out, Reduction):
                out = ctx.realize(out, node.name)
            return out
        reason = "lowering declined these arguments"
    else:
        reason = RUNS_EAGERLY.get(name, "no lowering") if name else "extern op"
    log.debug("ember_inductor: %s (%s) runs eagerly: %s", node.name, target, reason)
    return ctx.extern(node, target, args, kwargs, reason)


# Note [host scalars]
#     An optimizer's step counts live on the CPU (AdamW, Adam and friends when not `capturable`),
#     and the scalar arithmetic on them (bias corrections, the step size) meets the parameters on
#     the GPU through `device_put` of a 0-d CPU value. Called eagerly, each such put is an
#     allocation and a host-to-device copy from pageable memory: three per parameter, ~600 per
#     AdamW step of BERT, a third of the step's host time on an H100 host. Instead, a floating
#     0-d CPU value that the device's kernels read is realized on the CPU (its own C++ kernel,
#     or the input itself) and handed to each Triton kernel that reads it *by value*: the
#     wrapper passes `buf.item()` (a CPU read, no synchronization) as a scalar argument (role
#     "scalar"), which the kernel uses where it would have loaded the 0-d tensor (masked-off
#     lanes still read 0). The value is read when the kernel is launched, after every CPU kernel
#     before it in the wrapper, so the order of writes is the graph's. Floating dtypes only:
#     Triton takes a Python float as fp32 (exact for float32, float16 and bfloat16 values; a
#     float64 would be rounded) and specializes integer arguments on their value (a step count
#     would recompile). Other puts stay eager. A graph with a host scalar cannot be replayed as
#     a CUDA graph (the value would be frozen at recording): the facade runs such graphs without
#     one (cudagraphs.py, `_not_capturable`).
_HOST_SCALAR_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _host_scalar(ctx, node, a, device):
    device = torch.device(device)
    if (device.type != "cuda" or not isinstance(a, IRNode) or a.device.type != "cpu" or tuple(a.sizes) != ()
            or a.dtype not in _HOST_SCALAR_DTYPES):
        return NotImplemented
    buf = ctx.realize(a, node.name)
    if buf.is_view or tuple(buf.sizes) != () or (not isinstance(buf, InputBuffer) and buf.offset != 0):
        return NotImplemented  # `buf.item()` in the wrapper must be this value
    ctx.host_scalars.add(buf.name)
    return Pointwise((), buf.dtype, device, lambda kb, index: kb.load(buf.name, 0, buf.dtype), node.name)
