"""The max_autotune rewrite: mm, bmm or a 1x1 convolution (+ its epilogue) -> one GemmCall node
where the template wins (Note [GEMM choice])."""
from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.templates import choose as choosing
from ember_inductor.templates import gemm
from ember_inductor.templates.epilogue import Epilogue, build_epilogue, plain
from ember_inductor.sizes import has_symbolic_layout
from ember_inductor.templates.kernel import GemmCall

log = logging.getLogger("ember_inductor.templates")
aten = torch.ops.aten
_PERMUTE = ember_prims.PRIMS["permute"].op
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_PURE = frozenset(ember_prims.PRIMS[n].op for n in ("full", "broadcast_in_dim", "convert_element_type", "permute"))


@dataclass(frozen=True)
class Product:
    """How one product op maps onto the template: the problem, the operands (graph nodes) with
    their views (Note [operand views] in kernel.py), and the library call it replaces."""
    problem: gemm.Problem
    a: fx.Node
    b: fx.Node
    views: tuple   # (a, b, output)
    extern: Callable  # (a, b) -> the op's result, as the graph computes it


def _tensor_vals(node: fx.Node, count: int):
    vals = [x.meta.get("val") if isinstance(x, fx.Node) else None for x in node.args[:count]]
    if all(isinstance(v, torch.Tensor) for v in vals) and len({v.dtype for v in vals}) == 1 \
            and vals[0].dtype in _DTYPES and not any(has_symbolic_layout(v) for v in vals):
        return vals  # symbolic sizes: the library call (a template is chosen per static problem)
    return None


def _precision(val: torch.Tensor) -> str:
    tf32 = val.dtype == torch.float32 and val.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    return "tf32" if tf32 else "ieee"


def _untransposed(node: fx.Node, swap: list) -> tuple[fx.Node, bool]:
    """A permuted operand is passed untransposed (the template reads either layout)."""
    if node.op == "call_function" and node.target is _PERMUTE and list(node.args[1]) == swap \
            and isinstance(node.args[0], fx.Node):
        return node.args[0], True
    return node, False


def _matmul(node: fx.Node) -> Product | None:
    vals = _tensor_vals(node, 2)
    if vals is None:
        return None
    a, b = vals
    swap = [1, 0] if a.dim() == 2 else [0, 2, 1]
    (na, ta), (nb, tb) = _untransposed(node.args[0], swap), _untransposed(node.args[1], swap)
    problem = gemm.Problem(a.shape[0] if a.dim() == 3 else 1, a.shape[-2], b.shape[-1], a.shape[-1],
                           a.dtype, _precision(a))
    op = node.target
    extern = lambda x, y: op(x.transpose(-1, -2) if ta else x, y.transpose(-1, -2) if tb else y)  # noqa: E731
    return Product(problem, na, nb, ("matT" if ta else "mat", "matT" if tb else "mat", "mat"), extern)


def _conv1x1(node: fx.Node) -> Product | None:
    """A 1x1 convolution (stride 1, no padding, one group, no bias) is N products of
    (H*W, C) @ (C, O): implicit GEMM, the input read in place in either memory format."""
    vals = _tensor_vals(node, 2)
    if vals is None or len(node.args) < 9:
        return None
    x, w = vals
    bias, stride, padding, _dilation, transposed, _out_pad, groups = node.args[2:9]
    if x.dim() != 4 or tuple(w.shape[2:]) != (1, 1) or bias is not None or transposed or groups != 1 \
            or any(s != 1 for s in stride) or any(p != 0 for p in padding):
        return None
    n, c, h, wd = x.shape
    problem = gemm.Problem(n, h * wd, w.shape[0], c, x.dtype, _precision(x))
    op, rest = node.target, node.args[2:]
    return Product(problem, node.args[0], node.args[1], ("rows", "weight", "rows"), lambda a, b: op(a, b, *rest))


PRODUCTS: dict = {aten.mm.default: _matmul, aten.bmm.default: _matmul, aten.convolution.default: _conv1x1}


def use_gemm_templates(gm: fx.GraphModule, options) -> fx.GraphModule:
    """Replace each product whose template beats the extern (Note [GEMM choice]); returns a
    copy of `gm` when something changed, `gm` itself otherwise."""
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out).meta.update(gm.graph.output_node().meta)
    changed = False
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target in PRODUCTS]:
        product = PRODUCTS[node.target](node)
        if product is not None:
            changed |= _replace(graph, node, product, options)
    if not changed:
        return gm
    graph.lint()
    return fx.GraphModule(gm, graph)


def _replace(graph: fx.Graph, mm: fx.Node, product: Product, options) -> bool:
    epilogue, region, outputs = build_epilogue(mm) if options.epilogue_fusion else (None, None, None)
    if epilogue is None or not _orderable(graph, mm, epilogue, region, outputs):
        epilogue, region, outputs = plain(mm.meta["val"].dtype), [mm], [mm]
    problem, a, b = product.problem, product.a, product.b
    extras = [e.node for e in epilogue.extras]
    layouts = [(tuple(o.meta["val"].shape), tuple(o.meta["val"].stride()), o.meta["val"].dtype) for o in outputs]
    inputs = [(tuple(x.meta["val"].shape), tuple(x.meta["val"].stride()), x.meta["val"].dtype) for x in [a, b, *extras]]

    def make_call(config, pointwise=False):
        return GemmCall(problem, epilogue, config, layouts, product.views, options.cache_dir, pointwise)

    device = mm.meta["val"].device
    if device.type != "cuda":  # the interpreter: no speed to measure (Note [GEMM choice])
        call = make_call(gemm.configs(problem)[0])
    else:
        key = choosing.choice_key(device, problem, [i[:2] for i in inputs] + [product.views], epilogue.signature())
        call = choosing.choose(make_call, problem, product.extern, inputs, key, options.cache_dir,
                               has_epilogue=len(epilogue.ops) > 1)
    if call is None:
        return False
    _splice(graph, mm, region, outputs, call, [a, b, *extras])
    return True


def _orderable(graph: fx.Graph, mm: fx.Node, epilogue: Epilogue, region: list, outputs: list) -> bool:
    """The fused call goes after the product and every extra operand; every user of an output
    outside the region must come after that point."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    at = max([order[mm]] + [order[e.node] for e in epilogue.extras])
    inside = set(region)
    return all(order[u] > at for o in outputs for u in o.users if u not in inside)


def _splice(graph: fx.Graph, mm: fx.Node, region: list, outputs: list, call: GemmCall, args: list) -> None:
    order = {n: i for i, n in enumerate(graph.nodes)}
    anchor = max(args + [mm], key=lambda n: order[n])
    region_set = set(region)
    with graph.inserting_after(anchor):
        node = graph.call_function(call, tuple(args))
    vals = [o.meta["val"] for o in outputs]
    node.meta["val"] = vals[0] if len(vals) == 1 else tuple(vals)
    node.meta["stack_trace"] = mm.meta.get("stack_trace")
    results = [node]
    if len(outputs) > 1:
        results = []
        prev = node
        for i, v in enumerate(vals):
            with graph.inserting_after(prev):
                g = graph.call_function(operator.getitem, (node, i))
            g.meta["val"] = v
            results.append(g)
            prev = g
    for o, r in zip(outputs, results):
        o.replace_all_uses_with(r, delete_user_cb=lambda u: u not in region_set)
    todo = [a for n in region for a in n.all_input_nodes if a not in region_set]
    for n in reversed(region):
        graph.erase_node(n)
    while todo:  # the constants, broadcasts, casts and permutes only the region read
        leaf = todo.pop()
        if leaf.op == "call_function" and leaf.target in _PURE and not leaf.users and leaf.graph is graph \
                and leaf in graph.nodes:
            todo.extend(leaf.all_input_nodes)
            graph.erase_node(leaf)
    log.debug("ember_inductor: %s -> %s", [n.name for n in region], call)
