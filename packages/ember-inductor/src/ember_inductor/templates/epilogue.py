"""Which pointwise work after a matrix product can run in its epilogue.

Note [GEMM epilogues]
    Starting at an mm/bmm node, the epilogue region grows, in graph order, by every elementwise
    prim (unary, binary, ternary, convert_element_type, clone) shaped like the product whose
    tensor operands are region nodes or *leaves*: a scalar `full` (a constant), a
    `broadcast_in_dim` of a value that does not depend on the product (a bias: read with
    stride 0 along the broadcast dims), or a value shaped like the product that does not depend
    on it (a residual). Bias, activation, residual add, scaling and dtype casts are all of this
    form. Every region node used outside the region (or returned) is an output of the fused
    kernel: usually one, the end of the chain; in training also values saved for the backward.
    The product itself is the region's first value, rounded to its dtype as the library would
    (acc.to(dtype)), so the epilogue computes exactly what the graph's ops compute after mm.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx

import ember_prims

_PRIM_NAME = {info.op: name for name, info in ember_prims.PRIMS.items()}
_ELEMENTWISE = frozenset(name for name, info in ember_prims.PRIMS.items()
                         if info.category in (ember_prims.UNARY, ember_prims.BINARY, ember_prims.TERNARY))
_FULL = ember_prims.PRIMS["full"].op
_BROADCAST = ember_prims.PRIMS["broadcast_in_dim"].op
MAX_REGION = 48   # nodes fused into one epilogue
MAX_EXTRAS = 4    # tensors the epilogue reads besides the product


@dataclass(frozen=True)
class EOp:
    """One value of the epilogue: `kind` mm | prim | convert | const | load; `args` index
    earlier EOps; `target` is the prim name, the constant, or the extra operand's position."""
    kind: str
    dtype: torch.dtype
    target: object = None
    args: tuple = ()


@dataclass(frozen=True)
class Extra:
    """A tensor the epilogue reads: `node`, seen through broadcast dims `dims` (None: it is
    shaped like the product), converted in the kernel to each dtype of `casts` in turn."""
    node: fx.Node
    dims: tuple | None
    casts: tuple = ()


@dataclass(frozen=True)
class Epilogue:
    ops: tuple       # EOp; ops[0] is the product
    outputs: tuple   # indices of the ops stored, in order
    extras: tuple    # Extra

    def signature(self) -> str:
        """What identifies the generated code (part of the autotune cache key)."""
        ops = ";".join(f"{o.kind}:{o.target}:{str(o.dtype).removeprefix('torch.')}:{list(o.args)}"
                       for o in self.ops)
        return f"{ops}|out={list(self.outputs)}|extras={[(e.dims, e.casts) for e in self.extras]}"

    @property
    def names(self) -> list[str]:
        return [str(o.target) for o in self.ops if o.kind == "prim"]


def plain(dtype: torch.dtype) -> Epilogue:
    """No epilogue: store the product."""
    return Epilogue((EOp("mm", dtype),), (0,), ())


def find_region(mm: fx.Node) -> tuple[list[fx.Node], dict[fx.Node, object], list[fx.Node]]:
    """(region nodes in graph order, leaf -> how it is read, outputs): Note [GEMM epilogues]."""
    shape = tuple(mm.meta["val"].shape)
    region, in_region = [mm], {mm}
    downstream = {mm}  # nodes that depend on the product: never leaves
    leaves: dict[fx.Node, object] = {}
    node = mm.next
    while node.op != "output" and len(region) < MAX_REGION:
        inputs = node.all_input_nodes
        if any(i in downstream for i in inputs):
            downstream.add(node)
            if any(i in in_region for i in inputs) and _joins(node, shape, in_region, downstream, leaves):
                region.append(node)
                in_region.add(node)
        node = node.next
    outputs = [n for n in region if n is mm and not n.users
               or any(u not in in_region for u in n.users)]
    return region, leaves, outputs


def _joins(node, shape, in_region, downstream, leaves) -> bool:
    if node.op != "call_function" or node.kwargs:
        return False
    name = _PRIM_NAME.get(node.target)
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or tuple(val.shape) != shape:
        return False
    if name == "convert_element_type" or name == "clone":
        tensor_args = node.args[:1]
    elif name in _ELEMENTWISE:
        tensor_args = node.args
    else:
        return False
    new = {}
    for a in tensor_args:
        if not isinstance(a, fx.Node):
            return False
        if a in in_region:
            continue
        how = leaves.get(a) or _leaf(a, shape, downstream)
        if how is None:
            return False
        new[a] = how
    extras = {a for a, h in {**leaves, **new}.items() if h != "const"}
    if len(extras) > MAX_EXTRAS:
        return False
    leaves.update(new)
    return True


def _leaf(a: fx.Node, shape, downstream):
    """"const" (a scalar full), or Extra (a broadcast or a product-shaped tensor, read through
    the dtype conversions around it), or None."""
    if a in downstream:
        return None
    val = a.meta.get("val")
    if not isinstance(val, torch.Tensor) or tuple(val.shape) != shape:
        return None
    if a.op == "call_function" and a.target is _FULL and not isinstance(a.args[1], (list, tuple)):
        return "const"
    base, casts = _peel_casts(a)
    if base.op == "call_function" and base.target is _BROADCAST and isinstance(base.args[0], fx.Node) \
            and isinstance(base.args[0].meta.get("val"), torch.Tensor):
        inner, inner_casts = _peel_casts(base.args[0])
        return Extra(inner, tuple(base.args[2]), inner_casts + casts)
    return Extra(base, None, casts)


def _peel_casts(node: fx.Node) -> tuple[fx.Node, tuple]:
    """convert_element_type(...(x)) -> (x, the dtypes converted to, innermost first): the
    conversions run in the kernel instead of as copies before it."""
    casts = []
    while node.op == "call_function" and _PRIM_NAME.get(node.target) == "convert_element_type" \
            and isinstance(node.args[0], fx.Node) and isinstance(node.args[0].meta.get("val"), torch.Tensor):
        casts.append(node.meta["val"].dtype)
        node = node.args[0]
    return node, tuple(reversed(casts))


def build_epilogue(mm: fx.Node) -> tuple[Epilogue, list[fx.Node], list[fx.Node]]:
    """(epilogue, region nodes, output nodes) for the product `mm`."""
    region, leaves, outputs = find_region(mm)
    index: dict[fx.Node, int] = {}
    ops: list[EOp] = []
    extras: list[Extra] = []

    def ref(a: fx.Node) -> int:
        if a in index:
            return index[a]
        how = leaves[a]
        if how == "const":
            val = a.meta["val"]
            ops.append(EOp("const", val.dtype, _scalar(a.args[1], val.dtype)))
        else:
            extras.append(how)
            ops.append(EOp("load", how.node.meta["val"].dtype, len(extras) - 1))
            for dtype in how.casts:
                ops.append(EOp("convert", dtype, None, (len(ops) - 1,)))
        index[a] = len(ops) - 1
        return index[a]

    for n in region:
        dtype = n.meta["val"].dtype
        if n is mm:
            ops.append(EOp("mm", dtype))
        else:
            name = _PRIM_NAME[n.target]
            if name == "convert_element_type":
                ops.append(EOp("convert", dtype, None, (ref(n.args[0]),)))
            elif name == "clone":
                index[n] = ref(n.args[0])
                continue
            else:
                ops.append(EOp("prim", dtype, name, tuple(ref(a) for a in n.args)))
        index[n] = len(ops) - 1
    return Epilogue(tuple(ops), tuple(index[o] for o in outputs), tuple(extras)), region, outputs


def _scalar(value, dtype: torch.dtype):
    if dtype == torch.bool:
        return bool(value)
    return float(value) if dtype.is_floating_point else int(value)


def is_getitem(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is operator.getitem
