"""Note [registry lookups]: Mapping objects of functions (a model library's attention
registry) are looked up at trace time and guarded; str() of a class folds to a constant."""
import collections.abc

import pytest
import torch

import ember_capture
from capture_helpers import Recorder
from ember_capture import CaptureConfig


class Registry(collections.abc.MutableMapping):
    """Shaped like a model library's registry: a class-level default table plus local entries;
    `in` comes from collections.abc (standard library code, which capture does not inline)."""
    _global = {"fast": torch.sin}

    def __init__(self):
        self._local = {}

    def __getitem__(self, k):
        return self._local[k] if k in self._local else self._global[k]

    def __setitem__(self, k, v):
        self._local[k] = v

    def __delitem__(self, k):
        del self._local[k]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global.keys() | self._local.keys())


FUNCS = Registry()


class Layer(torch.nn.Module):
    def __init__(self, impl):
        super().__init__()
        self.impl = impl

    def forward(self, x):
        if self.impl != "eager" and self.impl not in FUNCS:
            raise ValueError(f"unknown implementation {self.impl}")
        fn = FUNCS[self.impl] if self.impl != "eager" else torch.cos
        return fn(x) + str(type(self)).count("Layer")


class Net(torch.nn.Module):
    def __init__(self, impl="fast"):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(impl), Layer(impl)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def graphs_of(fn, **config):
    rec = Recorder()
    return ember_capture.capture(fn, rec, config=CaptureConfig(**config)), rec.graphs


def test_registry_lookup_is_one_graph_and_guarded():
    net, x = Net(), torch.randn(8)
    compiled, graphs = graphs_of(net, fullgraph=True)
    torch.testing.assert_close(compiled(x), net(x))
    assert len(graphs) == 1
    FUNCS["fast"] = torch.tanh  # the registry changes: the guard fails and it recompiles
    try:
        torch.testing.assert_close(compiled(x), net(x))
        assert len(graphs) == 2
    finally:
        del FUNCS["fast"]
    torch.testing.assert_close(compiled(x), net(x))


def test_missing_registry_key_breaks_and_raises_like_eager():
    net, x = Net("nonexistent"), torch.randn(8)
    compiled, _ = graphs_of(net)
    with pytest.raises(ValueError, match="unknown implementation"):
        with pytest.warns(UserWarning):
            compiled(x)


def test_str_of_an_instance_is_not_folded():
    class Shown:
        def __init__(self):
            self.n = 1

        def __str__(self):
            return f"n={self.n}"
    obj = Shown()
    compiled, _ = graphs_of(lambda x: x + len(str(obj)), fullgraph=True)
    with pytest.raises(Exception, match="str"):
        compiled(torch.randn(3))


def apply_in_chunks(forward_fn, chunk_size, *inputs):
    """Shaped like a model library's helper: checks the callee's arity with inspect."""
    import inspect
    if len(inspect.signature(forward_fn).parameters) != len(inputs):
        raise ValueError("arity mismatch")
    return forward_fn(*inputs)


class Chunked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def ff(self, x):
        return torch.relu(self.lin(x))

    def forward(self, x):
        for _ in range(2):
            x = apply_in_chunks(self.ff, 0, x)
        return x


def test_inspect_signature_of_a_bound_method_in_a_loop():
    m, x = Chunked(), torch.randn(4, 8)
    compiled, graphs = graphs_of(m, fullgraph=True)
    torch.testing.assert_close(compiled(x), m(x))
    assert len(graphs) == 1
