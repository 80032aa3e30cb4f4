"""Training steps through aot with eager compilers (the facade's aot_eager), against eager.

Tolerance: float32, rtol=1e-5, atol=1e-5 on parameters, gradients and buffers after 3 steps
(the graphs run the same ATen kernels as eager, so differences are rounding at most)."""
import copy
import importlib.util
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

from ember_autograd import aot, default_partition, min_cut_partition, verify_functional

_spec = importlib.util.spec_from_file_location("ember_autograd_test_models",
                                               pathlib.Path(__file__).with_name("models.py"))
models = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, models)  # dynamo looks classes' modules up by name
_spec.loader.exec_module(models)

TOL = dict(rtol=1e-5, atol=1e-5)


def eager_compiler(gm, example_inputs):
    verify_functional(gm)
    return gm


def aot_backend(partition, store):
    def backend(gm, example_inputs):
        fn = aot(gm, example_inputs, fw_compiler=eager_compiler, partition=partition)
        store.append(fn)
        return fn
    return backend


def train_and_compare(model, batches, loss_fn, partition, seed_each_step=True):
    torch.manual_seed(0)
    ref = copy.deepcopy(model)
    store = []
    compiled = torch.compile(model, backend=aot_backend(partition, store), fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    for step, (x, y) in enumerate(batches):
        for fn, m, o in ((compiled, model, opt), (ref, ref, ref_opt)):
            if seed_each_step:
                torch.manual_seed(100 + step)
            loss = loss_fn(fn(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
        for (name, a), b in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(a.grad, b.grad, **TOL, msg=lambda m: f"grad {name}: {m}")
    for (name, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"{name}: {m}")
    assert store and store[0].training is not None
    return store[0]


PARTITIONS = [default_partition, min_cut_partition]


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.__name__)
def test_mlp(partition):
    batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]
    fn = train_and_compare(models.MLP(), batches, F.cross_entropy, partition)
    # backward ops carry the user line of the forward op they differentiate
    lines = [n.meta.get("stack_trace", "") for n in fn.training.backward.graph.nodes if n.op == "call_function"]
    assert lines and all("models.py" in line for line in lines)


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.__name__)
def test_cnn_batchnorm_dropout(partition):
    # On CPU, dropout draws its mask with bernoulli_ on the global generator in eager and in the
    # traced graph alike, so with the same seed the masks (and everything else) match.
    batches = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(3)]
    fn = train_and_compare(models.CNN(p=0.25), batches, F.cross_entropy, partition)
    assert fn.training.signature.mutated_inputs  # running stats, num_batches_tracked


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.__name__)
def test_transformer_block(partition):
    batches = [(torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))) for _ in range(3)]

    def loss_fn(logits, y):
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    train_and_compare(models.TinyLM(), batches, loss_fn, partition)
