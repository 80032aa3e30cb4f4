"""Dropout and stateful random ops: masks agree between the forward and the backward."""
import pytest
import torch
import torch.fx
import torch.nn.functional as F

from ember_autograd import AotConfig, aot, default_partition, min_cut_partition, verify_functional

aten = torch.ops.aten
PARTITIONS = [default_partition, min_cut_partition]

# A hand-written counter-based RNG in the style of ember_prims: `seed` is stateful (it draws from
# torch's generator; not tagged, named in the config), `uniform` is deterministic given the seed.
_lib = torch.library.Library("ember_autograd_test", "DEF")
_lib.define("seed() -> Tensor")
_lib.define("uniform(int[] shape, Tensor seed) -> Tensor")
_lib.impl("seed", lambda: torch.randint(0, 2**62, (), dtype=torch.int64), "CompositeExplicitAutograd")


def _uniform_ref(shape, seed):
    return torch.rand(shape, generator=torch.Generator().manual_seed(int(seed)))


_lib.impl("uniform", _uniform_ref, "CompositeExplicitAutograd")
torch.library.register_fake("ember_autograd_test::seed", lambda: torch.empty((), dtype=torch.int64), lib=_lib)
torch.library.register_fake("ember_autograd_test::uniform", lambda shape, seed: torch.empty(shape), lib=_lib)
T = torch.ops.ember_autograd_test


def _bernoulli_p(a, p=0.5, *, generator=None):
    return (T.uniform.default(list(a.shape), T.seed.default()) < p).to(a.dtype)


TABLE = {aten.bernoulli.p: _bernoulli_p}
CONFIG = AotConfig(stateful_ops=frozenset({"ember_autograd_test::seed"}),
                   recompute_ops=frozenset({"ember_autograd_test::uniform"}))


def eager_compiler(gm, example_inputs):
    verify_functional(gm)
    return gm


def ops(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def test_p0_equals_eager():
    gm = torch.fx.symbolic_trace(lambda x: (F.dropout(torch.sin(x), 0.0, True),))
    x = torch.randn(10, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=eager_compiler)
    fn(x)[0].sum().backward()
    torch.testing.assert_close(fn(x)[0], torch.sin(x))
    torch.testing.assert_close(x.grad, torch.cos(x).detach())


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("which", ["functional_dropout", "native_dropout"])
def test_grad_is_mask_times_scale(partition, which):
    p = 0.4
    if which == "native_dropout":
        f = lambda x: (torch.native_dropout(x * 2, p, True)[0],)  # noqa: E731
    else:
        f = lambda x: (F.dropout(x * 2, p, True),)  # noqa: E731
    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(256, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=eager_compiler, partition=partition)
    y = fn(x)[0]
    g = torch.randn_like(y)
    y.backward(g)
    mask = (y != 0).float()  # x is nonzero almost surely
    assert 0.3 < 1 - mask.mean().item() < 0.5
    torch.testing.assert_close(x.grad, g * mask * 2 / (1 - p))


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.__name__)
def test_stateful_seed_is_saved_never_recomputed(partition):
    p = 0.5
    gm = torch.fx.symbolic_trace(lambda x: (F.dropout(torch.exp(x), p, True) * 3,))
    x = torch.randn(128, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=eager_compiler, decompositions=TABLE, partition=partition, config=CONFIG)
    art = fn.training
    assert T.seed.default in ops(art.forward)
    assert T.seed.default not in ops(art.backward)
    y = fn(x)[0]
    g = torch.randn_like(y)
    y.backward(g)
    mask = (y != 0).float()
    torch.testing.assert_close(x.grad, g * mask * 3 * torch.exp(x).detach() / (1 - p))
    if partition is min_cut_partition:
        # the mask is recomputed from the saved seed: uniform runs again in the backward
        assert T.uniform.default in ops(art.backward)
        seeds = [n for n in art.forward.graph.nodes if n.target is T.seed.default]
        assert seeds[0].name in art.saved


def test_ember_prims_dropout_masks_agree():
    ember_prims = pytest.importorskip("ember_prims")
    gm = torch.fx.symbolic_trace(lambda x: (F.dropout(x * 2, 0.5, True),))
    x = torch.randn(64, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=eager_compiler, decompositions=ember_prims.Decomposer(),
             partition=min_cut_partition)
    y = fn(x)[0]
    y.backward(torch.ones_like(y))
    mask = (y != 0).float()
    torch.testing.assert_close(x.grad, mask * 2 / 0.5)
    assert torch.ops.ember_prims.random_seed.default not in ops(fn.training.backward)


def test_ember_prims_min_cut_saves_the_seed_and_recomputes_the_mask():
    ember_prims = pytest.importorskip("ember_prims")
    cheap = (ember_prims.UNARY, ember_prims.BINARY, ember_prims.TERNARY, ember_prims.CAST,
             ember_prims.VIEW, ember_prims.CREATION, ember_prims.RANDOM)
    config = AotConfig(recompute_ops=frozenset(
        f"ember_prims::{name}" for name, info in ember_prims.PRIMS.items() if info.category in cheap))

    def f(x, w1, w2):
        h = F.dropout(F.gelu(x @ w1), 0.5, True)
        return ((h @ w2).sum(), h)

    args = [torch.randn(16, 8), torch.randn(8, 32, requires_grad=True), torch.randn(32, 4, requires_grad=True)]
    fn = aot(torch.fx.symbolic_trace(f), args, fw_compiler=eager_compiler,
             decompositions=ember_prims.Decomposer(), partition=min_cut_partition, config=config)
    art = fn.training
    seed = torch.ops.ember_prims.random_seed.default
    assert any(n.target is seed and n.name in art.saved for n in art.forward.graph.nodes)
    assert seed not in ops(art.backward) and torch.ops.ember_prims.uniform.default in ops(art.backward)
    loss, h = fn(*args)
    loss.backward()
    # the backward's recomputed mask is the forward's: gradients match the observed output h
    x, w1, w2 = (a.detach() for a in args)
    pre = (x @ w1).requires_grad_()
    (gelu_grad,) = torch.autograd.grad(F.gelu(pre).sum(), pre)
    mask = (h != 0).float()
    grad_pre = torch.ones(16, 4) @ w2.t() * mask / 0.5 * gelu_grad
    torch.testing.assert_close(args[2].grad, h.detach().t() @ torch.ones(16, 4), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(args[1].grad, x.t() @ grad_pre, rtol=1e-4, atol=1e-5)
