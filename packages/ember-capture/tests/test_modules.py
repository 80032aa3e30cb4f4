"""nn.Module capture: containers, attributes, buffers, training mode, and model code."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember_capture
from capture_helpers import Recorder, check_module

torch.manual_seed(0)
MODULE_CASES = []


def module_case(make, *input_sets, graphs=None, train=False, fallback_ok=False):
    MODULE_CASES.append(pytest.param(make, input_sets, graphs, train, fallback_ok, id=make.__name__))
    return make


def r(*shape):
    return torch.randn(*shape)


class Sequential3(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class ModuleListLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        return x + self.layers[-1].bias, len(self.layers)


class ModuleDictSelect(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        out = {k: head(x) for k, head in self.heads.items()}
        return out, self.heads["a"](x) * 2, "b" in self.heads


class AttrReadsWrites(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        self.last_scale = self.scale * 2
        return self.lin(x) * self.scale


class BufferMutation(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.total.add_(x.sum(0))
        self.steps += 1
        return x - self.total / self.steps


class WithSuper(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class PropertyAndMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    @property
    def doubled(self):
        return self.w * 2

    def helper(self, x, k=1):
        return x * k + self.doubled

    def forward(self, x):
        return self.helper(x, k=3)


class TrainingFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        y = self.bn(x)
        if self.training:
            y = y + 1
        return self.drop(y)


class ParameterListSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])

    def forward(self, x):
        for p in self.ps:
            x = x + p
        return x


class Conv2dBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(F.relu(self.bn(self.conv(x)))).flatten(1)


class EmbeddingLSTMish(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.ln = nn.LayerNorm(4)
        self.gru = nn.GRUCell(4, 4)

    def forward(self, idx):
        h = torch.zeros(idx.shape[0], 4)
        e = self.ln(self.emb(idx))
        for t in range(e.shape[1]):
            h = self.gru(e[:, t], h)
        return h


class NestedSubmoduleCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Sequential3()
        self.extra = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        return self.extra(self.block(x)) + self.block.net[0].bias.sum()


class GeluMLPWithAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(x + self.fc2(self.act(self.fc1(x))))


for make, inputs in [
    (Sequential3, ((r(2, 4),), (r(3, 4),))),
    (ModuleListLoop, ((r(2, 4),), (r(5, 4),))),
    (ModuleDictSelect, ((r(2, 4),), (r(3, 4),))),
    (WithSuper, ((r(2, 4),), (r(3, 4),))),
    (PropertyAndMethod, ((r(2, 4),), (r(3, 4),))),
    (ParameterListSum, ((r(2, 4),), (r(3, 4),))),
    (Conv2dBN, ((r(2, 3, 6, 6),), (r(1, 3, 5, 5),))),
    (EmbeddingLSTMish, ((torch.randint(0, 10, (2, 3)),), (torch.randint(0, 10, (3, 2)),))),
    (NestedSubmoduleCalls, ((r(2, 4),), (r(3, 4),))),
    (GeluMLPWithAct, ((r(2, 4),), (r(3, 4),))),
]:
    module_case(make, *inputs, graphs=2)


def _with_super():
    return WithSuper(4, 4)


MODULE_CASES[3] = pytest.param(_with_super, ((r(2, 4),), (r(3, 4),)), 2, False, False, id="WithSuper")


@pytest.mark.parametrize("make, input_sets, graphs, train, fallback_ok", MODULE_CASES)
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_module(make, input_sets, graphs, train, fallback_ok, mode):
    check_module(make, input_sets, train=mode == "train", graphs=graphs)


def test_module_attribute_writes_replayed():
    m = AttrReadsWrites()
    compiled = ember_capture.capture(m, Recorder())
    x = r(2, 4)
    out = compiled(x)
    torch.testing.assert_close(out, m.lin(x) * 2.0)
    assert m.calls == 1 and m.last_scale == 4.0
    compiled(x)
    assert m.calls == 2  # the attribute guard recompiles (calls changed) or the write replays


def test_buffer_mutation_matches_eager():
    torch.manual_seed(0)
    eager, cap = BufferMutation(), BufferMutation()
    compiled = ember_capture.capture(cap, Recorder())
    for _ in range(3):
        x = r(3, 4)
        torch.testing.assert_close(compiled(x), eager(x))
    torch.testing.assert_close(cap.total, eager.total)
    assert int(cap.steps) == int(eager.steps) == 3


def test_training_flag_recompiles_and_batchnorm_stats():
    torch.manual_seed(0)
    eager, cap = TrainingFlag(), TrainingFlag()
    rec = Recorder()
    compiled = ember_capture.capture(cap, rec)
    for train in (True, False, True):
        eager.train(train)
        cap.train(train)
        x = r(5, 4)
        torch.manual_seed(3)
        expected = eager(x)
        torch.manual_seed(3)
        torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(cap.bn.running_mean, eager.bn.running_mean)
    torch.testing.assert_close(cap.bn.running_var, eager.bn.running_var)
    assert int(cap.bn.num_batches_tracked) == 2
    assert len(rec.graphs) == 2  # train and eval


def test_module_with_hook_is_right():
    m = Sequential3()
    calls = []
    m.net[0].register_forward_hook(lambda mod, i, o: calls.append(o.shape))
    rec = Recorder()
    compiled = ember_capture.capture(m, rec)
    x = r(2, 4)
    # The hook is traced; its append to a list it closes over is written back into that list
    # after the graph (Note [Mutated input lists]): no break, no eager frame.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(compiled(x), m(x))
    assert len(calls) == 2  # the hook ran for the captured call too
    assert len(rec.graphs) == 1


# ---- model code: ResNet basic block, transformer block, RNN loop ------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        if mask is not None:
            att = att.masked_fill(mask[:t, :t] == 0, float("-inf"))
        att = self.drop(att.softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class TransformerBlock(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(0.1))
        self.register_buffer("mask", torch.tril(torch.ones(8, 8)))

    def forward(self, x):
        x = x + self.attn(self.ln1(x), self.mask)
        return x + self.mlp(self.ln2(x))


class RNNCell(nn.Module):
    def __init__(self, n_in=3, hidden=5):
        super().__init__()
        self.ih = nn.Linear(n_in, hidden)
        self.hh = nn.Linear(hidden, hidden)
        self.hidden = hidden

    def forward(self, xs):
        h = torch.zeros(xs.shape[1], self.hidden)
        outs = []
        for t in range(xs.shape[0]):
            h = torch.tanh(self.ih(xs[t]) + self.hh(h))
            outs.append(h)
        return torch.stack(outs), h


@pytest.mark.parametrize("make, inputs, graphs", [
    (lambda: BasicBlock(4, 4), [r(2, 4, 8, 8), r(2, 4, 8, 8), r(1, 4, 6, 6)], 2),
    (lambda: BasicBlock(4, 8, stride=2), [r(2, 4, 8, 8), r(3, 4, 8, 8)], 2),
    (lambda: TransformerBlock(), [r(2, 8, 16), r(2, 8, 16), r(3, 5, 16)], 2),
    (lambda: RNNCell(), [r(6, 2, 3), r(6, 2, 3), r(4, 3, 3)], 2),
], ids=["resnet_block", "resnet_block_downsample", "transformer_block", "rnn_loop"])
@pytest.mark.parametrize("train", [False, True])
def test_model(make, inputs, graphs, train):
    check_module(make, inputs, train=train, graphs=graphs, rtol=1e-4, atol=1e-5)  # one graph per input shape


def test_model_backward_through_graph():
    torch.manual_seed(0)
    eager = TransformerBlock().eval()
    torch.manual_seed(0)
    model = TransformerBlock().eval()
    compiled = ember_capture.capture(model, Recorder())
    x = r(2, 8, 16)
    compiled(x).sum().backward()
    eager(x).sum().backward()
    for (name, a), (_, b) in zip(model.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_root_module_hooks_run():
    m = Sequential3()
    seen = []
    compiled = ember_capture.capture(m, Recorder())
    x = r(2, 4)
    torch.testing.assert_close(compiled(x), m(x))  # no hooks: captured
    handle = m.register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(x), m(x))
        torch.testing.assert_close(compiled(x), m(x))  # the eager entry's guard holds: no recompile
    messages = [str(w.message) for w in caught]
    assert any("has hooks" in msg for msg in messages), messages
    assert not any("internal guard error" in msg for msg in messages), messages
    assert len(seen) == 4
    handle.remove()
    torch.testing.assert_close(compiled(x), m(x))
    assert len(seen) == 4  # no hook after its removal


@pytest.mark.parametrize("make, inputs", [
    (lambda: nn.MultiheadAttention(16, 4, batch_first=True), lambda: (r(2, 5, 16), r(2, 5, 16), r(2, 5, 16))),
    (lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0), lambda: (r(2, 5, 16),)),
    (lambda: nn.LSTM(4, 8, batch_first=True), lambda: (r(2, 5, 4),)),
    (lambda: nn.GRU(4, 8), lambda: (r(5, 2, 4),)),
], ids=["MultiheadAttention", "TransformerEncoderLayer", "LSTM", "GRU"])
@pytest.mark.parametrize("train", [False, True])
def test_torch_nn_layers_one_graph(make, inputs, train):
    check_module(make, [inputs(), inputs()], train=train, graphs=1)


def test_stateless_module_built_on_each_call_does_not_recompile():
    """Hugging Face models build `CrossEntropyLoss()` in their forward, after a graph break: a
    stateless module is guarded by class and attributes, not identity, so the frame that calls
    it compiles once; a different reduction still recompiles, and the results stay right."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.reduction = "mean"

        def forward(self, x, t):
            y = self.lin(x)
            return nn.CrossEntropyLoss(reduction=self.reduction)(y, t)

    m = Model()
    rec = Recorder()
    captured = ember_capture.capture(m, rec)
    x, t = r(2, 4), torch.tensor([1, 2])
    for _ in range(5):
        torch.testing.assert_close(captured(x, t), m(x, t))
    compiled = len(rec.graphs)
    assert compiled <= 2, compiled  # the model's graph and the resumed one, each once
    m.reduction = "sum"
    torch.testing.assert_close(captured(x, t), m(x, t))
    assert len(rec.graphs) > compiled


def test_module_built_on_each_call_is_captured_a_bounded_number_of_times():
    """A module built on every call whose forward itself breaks is called natively at the
    break and captured per instance; at most recompile_limit instances of one forward are
    captured (later ones run eagerly), so they are not all compiled nor kept alive."""
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(4))  # state: guarded by identity

        def forward(self, x):
            print("", end="")  # a graph break inside the callee
            return torch.tanh(x) * self.scale

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return Head()(self.lin(x))

    m = Model()
    captured = ember_capture.capture(m, Recorder(), ember_capture.CaptureConfig(recompile_limit=3))
    session = captured._ember_state.session
    x = r(2, 4)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for _ in range(6):
            torch.testing.assert_close(captured(x), m(x))
    assert session.instances[Head.forward.__code__] <= 3
    assert len(session.callees) <= 3  # instances are not all kept alive


def _named_wrapper(func):
    """A decorator as libraries write them (transformers' deprecate_kwarg): `self` arrives in
    *args, and the wrapper reads it there."""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        kwargs["scale"] = 3.0 if type(args[0]).__name__.endswith("Wrapped") else 0.0
        return func(*args, **kwargs)
    return wrapper


class ForwardWrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @_named_wrapper
    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


def test_forward_wrapped_in_a_varargs_decorator():
    """The compiled module's forward is `wrapper(*args, **kwargs)`: the module is args[0], bound
    into the *args tuple (it was bound to `args` itself, and `args[0]` subscripted the module)."""
    check_module(ForwardWrapped, [(r(2, 4),), (r(2, 4),)], graphs=1)
    m = ForwardWrapped()
    x = r(2, 4)
    out = ember_capture.capture(m, Recorder(), ember_capture.CaptureConfig(fullgraph=True))(x, scale=5.0)
    torch.testing.assert_close(out, m.lin(x) * 3.0)
