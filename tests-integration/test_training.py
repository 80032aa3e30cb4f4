"""Whole training steps (forward, loss, backward, optimizer step) through ember.compile.

After three steps, parameters, gradients and buffers equal eager's. Tolerances (float32):
aot_eager runs the same ATen kernels, so rtol=1e-5, atol=1e-6; inductor computes through
decompositions and generated kernels in a different order: rtol=1e-4, atol=1e-5.
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import ember

TOL = {"aot_eager": dict(rtol=1e-5, atol=1e-6), "inductor": dict(rtol=1e-4, atol=1e-5)}


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Block(torch.nn.Module):
    """LayerNorm + GELU MLP with a residual and a softmax head: normalization-heavy."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = x + self.down(F.gelu(self.up(self.norm(x))))
        return torch.log_softmax(self.head(x), dim=-1)


CASES = {"mlp": (MLP, (16, 32)), "cnn": (SmallCNN, (4, 3, 8, 8)), "block": (Block, (16, 32))}


def train(model, step_fn, inputs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in inputs:
        opt.zero_grad()
        loss = F.cross_entropy(step_fn(x), y)
        loss.backward()
        opt.step()
    return loss


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", list(CASES))
def test_three_training_steps_match_eager(case, backend):
    make, shape = CASES[case]
    torch.manual_seed(0)
    eager_model = make()
    ember_model = copy.deepcopy(eager_model)
    compiled = ember.compile(ember_model, backend=backend)
    inputs = [(torch.randn(shape), torch.randint(0, 10, (shape[0],))) for _ in range(3)]
    eager_loss = train(eager_model, eager_model, inputs)
    ember_loss = train(ember_model, compiled, inputs)
    tol = TOL[backend]
    torch.testing.assert_close(ember_loss, eager_loss, **tol)
    for (name, p), q in zip(eager_model.named_parameters(), ember_model.parameters()):
        torch.testing.assert_close(q, p, **tol, msg=lambda m: f"parameter {name}: {m}")
        torch.testing.assert_close(q.grad, p.grad, **tol, msg=lambda m: f"grad of {name}: {m}")
    for (name, b), c in zip(eager_model.named_buffers(), ember_model.buffers()):
        torch.testing.assert_close(c, b, **tol, msg=lambda m: f"buffer {name}: {m}")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inference_under_no_grad_and_eval(backend):
    torch.manual_seed(0)
    model = SmallCNN().eval()
    compiled = ember.compile(model, backend=backend)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 8, 8)
            torch.testing.assert_close(compiled(x), model(x), **TOL[backend])


NORMALIZATIONS = {
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "softmax": lambda x: torch.softmax(x, -1),
    "layer_norm": lambda x: F.layer_norm(x, (32,)),
    "cross_entropy": lambda x: F.cross_entropy(x, torch.arange(16) % 10),
}


@pytest.mark.parametrize("name", list(NORMALIZATIONS))
def test_normalization_gradients_match_eager(name):
    # Regression: the C++ kernel of log_softmax's backward once read a row cache it never filled.
    fn = NORMALIZATIONS[name]
    compiled = ember.compile(fn, backend="inductor")
    for _ in range(2):
        x = torch.randn(16, 32, requires_grad=True)
        out, ref = compiled(x), fn(x)
        torch.testing.assert_close(out, ref, **TOL["inductor"])
        g = torch.randn_like(ref)
        (got,), (want,) = torch.autograd.grad(out, x, g), torch.autograd.grad(ref, x, g)
        torch.testing.assert_close(got, want, **TOL["inductor"])


class HeadsAttention(torch.nn.Module):
    """Attention with the usual head transposes around scaled_dot_product_attention: its
    operands reach the library kernel as permuted views (the case of the wrapper's `fit`)."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(a.transpose(1, 2).reshape(b, s, d))


def test_attention_with_head_transposes_matches_eager():
    torch.manual_seed(0)
    model = HeadsAttention()
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin, backend="inductor")
    x = torch.randn(2, 16, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    model(xe).square().sum().backward()
    compiled(xc).square().sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4, msg=name)


def test_batch_norm_channels_last_training_matches_eager():
    """A BatchNorm step on a channels_last input: statistics over strided dimensions."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(16), torch.nn.ReLU())
    twin = copy.deepcopy(model)
    compiled = ember.compile(twin, backend="inductor")
    x = torch.randn(8, 16, 12, 12).to(memory_format=torch.channels_last)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    ye, yc = model(xe), compiled(xc)
    torch.testing.assert_close(yc, ye, rtol=1e-4, atol=1e-5)
    g = torch.randn_like(ye)
    ye.backward(g)
    yc.backward(g)
    torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-4, atol=1e-4)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(twin[0].running_var, model[0].running_var)


def _inductor_graph_compiler(kernels):
    """The inductor composition as capture hands it a graph (the path ember.compile takes after
    capture), for graphs of ops that capture cannot run on the CPU."""
    from ember.backends import lookup
    from ember.settings import make_settings
    settings = make_settings(backend_name="inductor", fullgraph=True, dynamic=None, mode=None,
                             options={"backend": kernels})
    return lookup("inductor").build(settings)


@pytest.mark.parametrize("kernels", ["cpp", "triton"])
def test_cudnn_batch_norm_training_matches_native(kernels):
    """Note [vendor batch norm]: on CUDA, F.batch_norm traces to cudnn_batch_norm and its backward.
    CPU tensors have no cuDNN kernel (eager, and so capture and backend="eager", cannot run the op
    here), so the graph is handed to the inductor composition directly: the compiled step must
    equal native batch norm (output, input and affine gradients, running statistics) over two
    calls with fresh inputs, with C++ kernels and with Triton's, interpreted."""
    def step(x, w, b, rm, rv):
        y = torch.ops.aten.cudnn_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[0]
        return (torch.relu(y + x),)

    def reference(x, w, b, rm, rv):
        return torch.relu(F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5) + x)

    def make():
        return torch.randn(4, 6, 5, 5), torch.randn(6), torch.randn(6)

    stats = [torch.randn(6), torch.rand(6) + 0.5]
    mine = [s.clone() for s in stats]
    args = [t.requires_grad_() for t in make()] + mine
    compiled = _inductor_graph_compiler(kernels)(torch.fx.symbolic_trace(step), args)
    for _ in range(2):
        x, w, b = make()
        g = torch.randn(4, 6, 5, 5)
        xe, we, be = (t.clone().requires_grad_() for t in (x, w, b))
        xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
        ye, (yc,) = reference(xe, we, be, *stats), compiled(xc, wc, bc, *mine)
        torch.testing.assert_close(yc, ye, rtol=1e-4, atol=1e-5)
        ye.backward(g)
        yc.backward(g)
        for c, e in ((xc, xe), (wc, we), (bc, be)):
            torch.testing.assert_close(c.grad, e.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(mine, stats)

    def infer(x, rm, rv):  # evaluation: the running statistics, no update
        return (torch.ops.aten.cudnn_batch_norm(x, torch.ones(6), torch.zeros(6), rm, rv, False, 0.1, 1e-5)[0],)

    x = torch.randn(4, 6, 5, 5)
    with torch.no_grad():
        (got,) = _inductor_graph_compiler(kernels)(torch.fx.symbolic_trace(infer), [x, *mine])(x, *mine)
    torch.testing.assert_close(got, F.batch_norm(x, *stats, None, None, False, 0.1, 1e-5), rtol=1e-4, atol=1e-5)
