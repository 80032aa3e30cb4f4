"""`decompose(gm)`: an ATen-level FX graph in, a prims-level graph out; `verify(gm)` checks one.

How: the ATen graph is interpreted on FakeTensors under `_Recorder`, a TorchDispatchMode. Every
op that reaches the recorder is either decomposed (the `Decomposer` gives it a decomposition,
which runs with the recorder re-entered, so the ops it calls are seen in turn: Note [applying the
table]), a prim or an extern (emitted as a node of the new graph, with the fake result as
`meta["val"]`), or an error naming the op and the user's line.

Note [symbolic decomposition]: placeholders whose `meta["val"]` has SymInt sizes (or is a
SymInt: ember_symbolic) are interpreted with those SymInts, under a FakeTensorMode without its op
cache. The ATen graph's size nodes (`aten.sym_size.int`, `operator.mul`, ...) are evaluated, not
recorded; every SymInt a prim or an extern takes becomes a size node of the new graph
(`SizeNodes`: `sym_size.int` of a placeholder, `operator` arithmetic), so the prims graph runs on
inputs of any size that satisfies the guards the decompositions recorded in the symbols' SizeEnv.
Decompositions compute with the SymInts: a decision they take on a size (`if n == 1`) is answered
from the hint and recorded as a guard, never assumed.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils import _pytree as pytree
from ember_symbolic import SizeNodes, is_size_node, is_symbolic, plain_fake_mode, symbolic_fake_mode

from ember_prims._library import is_prim
from ember_prims.decomposer import Decomposer
from ember_prims.externs import EXTERN_OPS


class UndecomposedOpError(NotImplementedError):
    """An op with neither a decomposition nor extern status."""


class SpecError(ValueError):
    """A graph is not prims-level (see `verify`): this layer's boundary check (ARCHITECTURE.md,
    "Every boundary can be checked")."""


def _user_line(stack_trace: str | None) -> str:
    if not stack_trace:
        return "(no stack trace on the node)"
    lines = [ln.strip() for ln in stack_trace.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-2:])


def is_metadata_query(func) -> bool:
    """Ops that read tensor metadata (`prim::device`, `aten::sym_size`, `aten::is_contiguous`, ...)
    reach a dispatch mode when a FakeTensor is asked; they return no tensor and are not graph nodes.
    `.item()` (`_local_scalar_dense`) reads data, and is not one of them."""
    if func is torch.ops.aten._local_scalar_dense.default:
        return False
    return not any("Tensor" in str(r.type) for r in func._schema.returns)


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: fx.Graph, decomposer: Decomposer, constants: dict):
        super().__init__()
        self.graph, self.decomposer, self.constants = graph, decomposer, constants
        self.nodes: dict[int, tuple[torch.Tensor, fx.Node]] = {}  # id(fake) -> (fake, node)
        self.sizes = SizeNodes(graph)  # Note [symbolic decomposition]
        self.source: fx.Node | None = None  # the ATen node being decomposed

    def bind(self, value, node: fx.Node):
        self.nodes[id(value)] = (value, node)

    def node_of(self, t: torch.Tensor) -> fx.Node:
        hit = self.nodes.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        # a tensor born outside the recorder (a real constant): lift it to a get_attr node
        name = f"_ember_const_{len(self.constants)}"
        self.constants[name] = t
        node = self.graph.get_attr(name)
        node.meta["val"] = t
        self.bind(t, node)
        return node

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.dispatch(func, args, kwargs or {})

    def dispatch(self, func, args, kwargs):
        decomposition = self.decomposer(func)
        if decomposition is not None:
            with self:
                return decomposition(*args, **kwargs)
        if is_prim(func) or func in EXTERN_OPS:
            out = func(*args, **kwargs)
            self._emit(func, args, kwargs, out)
            return out
        if is_metadata_query(func):
            return func(*args, **kwargs)
        where = self.source
        raise UndecomposedOpError(
            f"ember_prims.decompose: {func} has no decomposition and is not an extern "
            f"(while decomposing {where.target if where is not None else '?'} at "
            f"{_user_line(where.meta.get('stack_trace') if where is not None else None)})")

    def _emit(self, func, args, kwargs, out):
        to_node = lambda x: self.node_of(x) if isinstance(x, torch.Tensor) else self.sizes.node_of(x)  # noqa: E731
        node = self.graph.call_function(func, pytree.tree_map(to_node, args), pytree.tree_map(to_node, kwargs))
        node.meta["val"] = out
        if self.source is not None:
            node.meta["stack_trace"] = self.source.meta.get("stack_trace")
            node.meta["original_aten"] = self.source.target
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
        elif isinstance(out, (tuple, list)):
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta.update(node.meta, val=o)
                    self.bind(o, item)


def _is_symbolic_value(val) -> bool:
    if isinstance(val, torch.Tensor):
        return any(is_symbolic(s) for s in (*val.shape, *val.stride()))
    return is_symbolic(val)


def _fake_like(mode: FakeTensorMode, val):
    if not isinstance(val, torch.Tensor):
        return val
    with mode:
        return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)


def decompose(gm: fx.GraphModule, table: dict[torch._ops.OpOverload, Callable] | None = None) -> fx.GraphModule:
    """Rewrite an ATen-level graph into `ember_prims` ops and `EXTERN_OPS`, `meta["val"]` on every node.

    Placeholders need `meta["val"]` (a real, meta or fake tensor, or an int). The table applies by
    the rules of `Decomposer` (Note [applying the table]), as in ember.compile's production path
    (ember-autograd's tracer): an entry wins over extern status, and an entry that calls its own
    op gets that call emitted. Example::

        gm = decompose(aten_gm)          # the default table
        t = ember_prims.table(); t[aten.gelu.default] = my_gelu
        gm = decompose(aten_gm, t)
    """
    symbolic = any(_is_symbolic_value(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder")
    # static: ember_symbolic's mode all the same (Note [custom ops' fake kernels called directly])
    mode = plain_fake_mode() if symbolic else symbolic_fake_mode(allow_non_fake_inputs=True)
    graph, constants = fx.Graph(), {}
    rec = _Recorder(graph, Decomposer(table), constants)
    env: dict[fx.Node, object] = {}
    load = lambda a: fx.node.map_arg(a, lambda n: env[n])  # noqa: E731
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if "val" not in node.meta:
                raise ValueError(f"ember_prims.decompose: placeholder {node.name} has no meta['val']")
            val = _fake_like(mode, node.meta["val"])
            new = graph.placeholder(node.name)
            new.meta.update(node.meta, val=val)
            rec.bind(val, new)
            rec.sizes.bind_input(new, val)
            env[node] = val
        elif node.op == "get_attr":
            real = getattr(gm, node.target)
            new = graph.get_attr(node.target)
            constants[node.target] = real
            val = mode.from_tensor(real) if isinstance(real, torch.Tensor) else real
            new.meta.update(node.meta, val=val)
            rec.bind(val, new)
            env[node] = val
        elif node.op == "call_function":
            args, kwargs = load(node.args), load(node.kwargs)
            if is_size_node(node):  # Note [symbolic decomposition]: computed, not recorded
                env[node] = node.target(*args, **kwargs)
            elif isinstance(node.target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
                # called through our dispatch logic, not the dispatcher: see _registry's Note
                rec.source = node
                op = node.target if isinstance(node.target, torch._ops.OpOverload) else \
                    node.target.default
                with mode:
                    env[node] = rec.dispatch(op, args, kwargs)
                rec.source = None
            else:  # operator.getitem on a tuple of results, arithmetic on ints
                env[node] = node.target(*args, **kwargs)
        elif node.op == "output":
            vals = load(node.args)[0]
            out = graph.output(pytree.tree_map(
                lambda x: rec.node_of(x) if isinstance(x, torch.Tensor) else rec.sizes.node_of(x), vals))
            out.meta["val"] = vals
        else:
            raise ValueError(f"ember_prims.decompose: unsupported node {node.format_node()}")
    graph.eliminate_dead_code(is_impure_node=lambda n: n.op in ("placeholder", "output") or
                              n.target is torch.ops.ember_prims.random_seed.default)
    root = torch.nn.Module()
    for name, value in constants.items():
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            root.register_buffer(name, value)
        else:
            setattr(root, name, value)
    return fx.GraphModule(root, graph)


def verify(gm: fx.GraphModule, also_allowed: Callable[[object], bool] | None = None) -> None:
    """Raise `SpecError` if `gm` is not prims-level: only ember_prims ops, EXTERN_OPS and getitem
    on their tuples, size nodes (`aten.sym_size.int`, `operator.mul`, ... computing a SymInt:
    Note [symbolic decomposition]), and `meta["val"]` on every placeholder, get_attr and
    call_function node.
    `also_allowed(target)`: other targets a consumer accepts (the inductor runs any functional
    ATen op as a library call)."""
    problems = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr", "call_function") and "val" not in node.meta:
            problems.append(f"{node.format_node()}: no meta['val']")
        if node.op == "call_function" and not (
                is_prim(node.target) or node.target in EXTERN_OPS or node.target is operator.getitem
                or is_size_node(node)
                or (also_allowed is not None and also_allowed(node.target))):
            problems.append(f"{node.format_node()}: {node.target} is neither a prim nor an extern "
                            f"(at {_user_line(node.meta.get('stack_trace'))})")
        if node.op in ("call_module", "call_method"):
            problems.append(f"{node.format_node()}: {node.op} is not allowed in a prims graph")
    if problems:
        raise SpecError("ember_prims.verify: not a prims-level graph:\n  " + "\n  ".join(problems))
