"""The documents' whole training step under ember.compile (issue 17).

    def train(mod, data):
        opt.zero_grad(True)
        pred = mod(data[0])
        loss = torch.nn.CrossEntropyLoss()(pred, data[1])
        loss.backward()
        opt.step()

compiled with the default backend (inductor) and backend="eager", on an MLP, a small CNN with
BatchNorm and a transformer block, with SGD (momentum), Adam and AdamW: after five steps the
parameters, gradients, buffers and optimizer state equal eager's (float32; the compiled update
computes the same formulas in another order: rtol=1e-4, atol=1e-5).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import ember

TOL = dict(rtol=1e-4, atol=1e-5)


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
        # No bias before BatchNorm (as real CNNs): its gradient is rounding noise, which Adam
        # normalizes into full-size steps of noise that no two orders of summation agree on.
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class TransformerBlock(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        # bias=False: the attention's key bias has a zero gradient (softmax ignores it), and Adam
        # turns that rounding noise into full-size steps (as with a bias before BatchNorm).
        self.layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.0,
                                                      batch_first=True, bias=False)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


MODELS = {"mlp": (MLP, (16, 32)), "cnn": (SmallCNN, (4, 3, 8, 8)), "transformer": (TransformerBlock, (4, 6, 32))}
OPTIMIZERS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
}


def make_train(opt):
    """The documents' training step, over this test's optimizer."""
    def train(mod, data):
        opt.zero_grad(True)
        pred = mod(data[0])
        loss = torch.nn.CrossEntropyLoss()(pred, data[1])
        loss.backward()
        opt.step()
    return train


def batches(shape, n):
    return [(torch.randn(shape), torch.randint(0, 10, (shape[0],))) for _ in range(n)]


def assert_same_training_state(model, opt, ref_model, ref_opt):
    for (name, p), q in zip(ref_model.named_parameters(), model.parameters()):
        torch.testing.assert_close(q, p, **TOL, msg=lambda m: f"parameter {name}: {m}")
        torch.testing.assert_close(q.grad, p.grad, **TOL, msg=lambda m: f"grad of {name}: {m}")
    for (name, b), c in zip(ref_model.named_buffers(), model.buffers()):
        torch.testing.assert_close(c, b, **TOL, msg=lambda m: f"buffer {name}: {m}")
    for p, q in zip(ref_model.parameters(), model.parameters()):
        want, got = ref_opt.state[p], opt.state[q]
        assert set(got) == set(want)
        for key in want:
            torch.testing.assert_close(got[key], want[key], **TOL, msg=lambda m: f"optimizer state {key}: {m}")


def run_both(model_name, opt_name, backend, steps=5, make_step=make_train):
    make, shape = MODELS[model_name]
    ref_model = make()
    model = copy.deepcopy(ref_model)
    ref_opt, opt = OPTIMIZERS[opt_name](ref_model.parameters()), OPTIMIZERS[opt_name](model.parameters())
    ref_step, step = make_step(ref_opt), ember.compile(make_step(opt), backend=backend)
    for data in batches(shape, steps):
        ref_step(ref_model, data)
        step(model, data)
    assert_same_training_state(model, opt, ref_model, ref_opt)
    return model, opt


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_documents_training_step_matches_eager(model_name, opt_name, backend):
    run_both(model_name, opt_name, backend)
