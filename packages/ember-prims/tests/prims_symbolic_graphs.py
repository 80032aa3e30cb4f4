"""ATen-level graphs with symbolic sizes for the decomposition tests (issue #18): a function is
run on FakeTensors whose sizes are SymInts of one ember_symbolic.SizeEnv, under a small recording
TorchDispatchMode, as ember-autograd hands graphs to ember_prims (placeholders' `meta["val"]`
symbolic, SymInt arguments as size nodes)."""
import operator

import torch
import torch.fx
from ember_symbolic import SizeEnv, SizeNodes, fake_with_sizes, plain_fake_mode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: torch.fx.Graph):
        super().__init__()
        self.graph, self.nodes, self.sizes = graph, {}, SizeNodes(graph)

    def bind(self, value, node):
        self.nodes[id(value)] = (value, node)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(out)):
            return out
        if func._schema.is_mutable:  # x.op_(...) (a backward's masked_fill_): x = op(x, ...)
            func = getattr(getattr(torch.ops.aten, func._schema.name.split("::")[1].rstrip("_")),
                           func._overloadname)

        def to_node(x):
            return self.nodes[id(x)][1] if isinstance(x, torch.Tensor) else self.sizes.node_of(x)

        node = self.graph.call_function(func, pytree.tree_map(to_node, args), pytree.tree_map(to_node, kwargs))
        node.meta["val"] = out
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
        else:
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta["val"] = o
                    self.bind(o, item)
        return out


def aten_graph(fn, inputs: list, dynamic: dict[int, tuple[int, ...]], grad: bool = False,
               constants: tuple[int, ...] = ()):
    """(graph, env): `fn(*inputs)` recorded as ATen ops on fakes whose dims `dynamic[i]` of
    input i are symbols (hinted by the inputs' sizes). With `grad`, the graph returns the outputs
    then the gradients of their sum of squares with respect to the floating inputs, except the
    inputs listed in `constants`."""
    env, mode = SizeEnv(), plain_fake_mode()
    graph = torch.fx.Graph()
    rec = _Recorder(graph)
    fakes = []
    for i, x in enumerate(inputs):
        sizes = [env.symint(s, f"x{i}.size({d})") if d in dynamic.get(i, ()) else s for d, s in enumerate(x.shape)]
        fake = fake_with_sizes(mode, x, sizes)
        if grad and x.is_floating_point() and i not in constants:
            fake.requires_grad_(True)
        node = graph.placeholder(f"x{i}")
        node.meta["val"] = fake
        rec.bind(fake, node)
        rec.sizes.bind_input(node, fake)
        fakes.append(fake)
    with mode, torch.enable_grad() if grad else torch.no_grad():
        with rec:
            outs = fn(*fakes)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            if grad:
                wrt = [f for f in fakes if f.requires_grad]
                loss = sum(o.float().square().sum() for o in outs if o.requires_grad)
                outs += torch.autograd.grad(loss, wrt)
    graph.output(tuple(rec.nodes[id(o)][1] for o in outs))
    return torch.fx.GraphModule(torch.nn.Module(), graph), env


def eager_outputs(fn, inputs: list, grad: bool = False, constants: tuple[int, ...] = ()) -> list:
    inputs = [x.detach().requires_grad_(grad and x.is_floating_point() and i not in constants)
              for i, x in enumerate(inputs)]
    outs = fn(*inputs)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    if grad:
        loss = sum(o.float().square().sum() for o in outs if o.requires_grad)
        outs = [o.detach() for o in outs] + list(torch.autograd.grad(loss, [x for x in inputs if x.requires_grad]))
    return outs
