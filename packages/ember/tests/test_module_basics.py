"""ember.OptimizedModule: wraps, never copies, the user's module."""
import torch

import ember
from ember.module import OptimizedModule


def compiled_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    return model, ember.compile(model, backend="eager")


def test_shares_parameters_and_state_dict_keys():
    model, compiled = compiled_model()
    assert isinstance(compiled, OptimizedModule)
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert list(compiled.state_dict()) == list(model.state_dict()) == ["0.weight", "0.bias"]
    assert [n for n, _ in compiled.named_parameters()] == ["0.weight", "0.bias"]


def test_load_state_dict_reaches_the_original():
    model, compiled = compiled_model()
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    compiled.load_state_dict(state)
    assert torch.count_nonzero(model[0].weight) == 0


def test_attributes_and_modes_forward_to_the_original():
    model, compiled = compiled_model()
    model.temperature = 0.5  # a plain attribute, set after compiling
    assert compiled.temperature == 0.5 and compiled._orig_mod is model
    assert getattr(compiled, "0") is model[0]
    compiled.eval()
    assert not model.training
    compiled.train()
    assert model.training
    assert repr(compiled).startswith("OptimizedModule(Sequential(")


def test_forward_matches_on_new_inputs():
    model, compiled = compiled_model()
    for n in (2, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), model(x))
