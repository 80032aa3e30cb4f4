"""Torch-level graphs with symbolic example values, as capture hands them over under dynamic
shapes (DYNAMIC contract): parameters lifted to placeholders, size reads as
`aten.sym_size.int` nodes, placeholders' `meta["example_value"]` FakeTensors with SymInt sizes."""
import operator

import torch
import torch.fx
from ember_symbolic import SizeEnv, fake_with_sizes, plain_fake_mode

aten = torch.ops.aten


class _Inline(torch.fx.Tracer):
    def is_leaf_module(self, m, name):
        return False


def lifted(module: torch.nn.Module) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """`module` traced with its parameters and buffers as trailing placeholders, and its size
    reads (`x.shape[i]`, `x.size(i)`) as `aten.sym_size.int` nodes."""
    graph = _Inline().trace(module)
    gm = torch.fx.GraphModule(module, graph)
    named = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    last = [n for n in graph.nodes if n.op == "placeholder"][-1]
    values = []
    for node in list(graph.nodes):
        if node.op == "get_attr" and node.target in named:
            with graph.inserting_after(last):
                ph = graph.placeholder(node.target.replace(".", "_"))
            last = ph
            values.append(named[node.target])
            node.replace_all_uses_with(ph)
            graph.erase_node(node)
    for node in list(graph.nodes):
        dim = _size_read(node)
        if dim is not None:
            with graph.inserting_before(node):
                new = graph.call_function(aten.sym_size.int, (dim[0], dim[1]))
            node.replace_all_uses_with(new)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    gm.recompile()
    return gm, values


def _size_read(node):
    if node.op == "call_method" and node.target == "size" and len(node.args) == 2:
        return node.args[0], node.args[1]
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[1], int):
        src = node.args[0]
        if src.op == "call_function" and src.target is getattr and src.args[1] == "shape":
            return src.args[0], node.args[1]
        if src.op == "call_method" and src.target == "size" and len(src.args) == 1:
            return src.args[0], node.args[1]
    return None


def mark_dynamic(gm: torch.fx.GraphModule, inputs: list, dims: dict[int, tuple[int, ...]]) -> SizeEnv:
    """Gives every placeholder a `meta["example_value"]`: input i's dims `dims[i]` symbolic
    (one SizeEnv, as capture makes), the rest static; an int input listed with `()` becomes a
    SymInt. Returns the env."""
    env, mode = SizeEnv(), plain_fake_mode()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, x) in enumerate(zip(placeholders, inputs)):
        if isinstance(x, torch.Tensor):
            sizes = [env.symint(s, f"{node.name}.size({d})") if d in dims.get(i, ()) else s
                     for d, s in enumerate(x.shape)]
            node.meta["example_value"] = fake_with_sizes(mode, x, sizes)
        elif i in dims:
            node.meta["example_value"] = env.symint(x, node.name)
        else:
            node.meta["example_value"] = x
    return env


def eager_compiler(gm: torch.fx.GraphModule, example_inputs):
    """The aot_eager equivalent: the graph itself, run on real tensors."""
    return gm


class AttentionBlock(torch.nn.Module):
    """A pre-norm transformer block (causal attention, layer norms, GELU MLP) whose shapes come
    from its input's sizes (`b, t, d = x.shape`), traceable by torch.fx."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        att = att.masked_fill(x.new_ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class ConvNet(torch.nn.Module):
    """Convolution, batch norm in training (running statistics updated in place), max pooling,
    a linear head: every dim of the image may be symbolic (adaptive pooling to 2x2)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn_weight, self.bn_bias = torch.nn.Parameter(torch.rand(8) + 0.5), torch.nn.Parameter(torch.randn(8))
        self.register_buffer("running_mean", torch.zeros(8))
        self.register_buffer("running_var", torch.ones(8))
        self.fc = torch.nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = self.conv(x)
        x = torch.batch_norm(x, self.bn_weight, self.bn_bias, self.running_mean, self.running_var,
                             True, 0.1, 1e-5, False)
        x = torch.nn.functional.max_pool2d(torch.relu(x), 2)
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 2).flatten(1))
