"""Bad input to the facade: a clear error naming what is valid, and the user's module untouched."""
import copy
import warnings

import pytest
import torch

import ember


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())


def snapshot(mod):
    return copy.deepcopy(mod.state_dict()), dict(mod.__dict__), [id(p) for p in mod.parameters()]


BAD_CALLS = [
    (dict(backend="nope"), "unknown backend 'nope'.*valid backends"),
    (dict(backend=3), "neither a backend name nor a callable"),
    (dict(mode="fastest"), "unknown mode 'fastest'.*reduce-overhead"),
    (dict(mode=1), "mode=1"),
    (dict(fullgraph="yes"), "fullgraph='yes'.*True or False"),
    (dict(dynamic="maybe"), "dynamic='maybe'"),
    (dict(disable=1), "disable=1"),
    (dict(options=[("a", 1)]), "options=.*dict"),
    (dict(mode="max-autotune", options={}), "either mode or options"),
    (dict(backend="eager", options={"x": 1}), "takes no options"),
    (dict(backend=lambda gm, ex: gm.forward, mode="max-autotune"), "custom backend callable takes none"),
]


@pytest.mark.parametrize("kwargs,message", BAD_CALLS, ids=[m for _, m in BAD_CALLS])
def test_bad_arguments_raise_and_leave_module_unchanged(kwargs, message):
    mod = model()
    before = snapshot(mod)
    with pytest.raises(ember.InvalidArgument, match=message):
        ember.compile(mod, **kwargs)
    with pytest.raises(ember.InvalidArgument, match=message):
        ember.compile(**kwargs)  # the decorator form fails at the decorator line too
    after = snapshot(mod)
    assert before[0].keys() == after[0].keys()
    for k in before[0]:
        assert torch.equal(before[0][k], after[0][k])
    assert before[1].keys() == after[1].keys() and before[2] == after[2]


@pytest.mark.skipif("inductor" not in ember.list_backends(), reason="the inductor layer is not here")
def test_unknown_inductor_option_names_valid_keys():
    with pytest.raises(ember.InvalidArgument, match="(?s)no_such_option.*trace.enabled"):
        ember.compile(model(), options={"no_such_option": True})


def test_not_callable():
    with pytest.raises(ember.InvalidArgument, match="expected a function, method or nn.Module, got int"):
        ember.compile(3)


def test_disable_flag_returns_model_itself():
    mod = model()
    assert ember.compile(mod, disable=True) is mod


def test_register_and_list_backends():
    seen = []

    @ember.register_backend("test_counting_backend")
    def counting(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    assert "test_counting_backend" in ember.list_backends()
    assert "eager" in ember.list_backends()
    with pytest.raises(ember.InvalidArgument, match="exists already"):
        ember.register_backend("test_counting_backend", counting)
    f = ember.compile(lambda x: x * 2 + 1, backend="test_counting_backend")
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 2 + 1)
    assert len(seen) == 1


def test_unknown_log_name_is_rejected(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "graph_breaks,bogus")
    with pytest.raises(ember.InvalidArgument, match="bogus.*valid: "):
        ember.compile(model(), backend="eager")


def test_backend_failure_falls_back_with_warning_or_raises_under_fullgraph():
    def broken(gm, example_inputs):
        raise RuntimeError("this backend always fails")

    f = lambda x: torch.relu(x) + 1  # noqa: E731
    x = torch.randn(5)
    with pytest.warns(UserWarning, match="failed at the forward compile.*always fails.*runs eagerly"):
        out = ember.compile(f, backend=broken)(x)
    torch.testing.assert_close(out, f(x))
    with pytest.raises(Exception, match="always fails"):
        ember.compile(f, backend=broken, fullgraph=True)(x)


# Note [Introspecting user objects]: a user's __getattr__ may raise anything, or answer for any name.
class _RaisingLookup:
    """Answers every attribute it lacks with a ValueError (not AttributeError)."""

    def __init__(self, fn=None):
        self.fn = fn

    def __getattr__(self, name):
        raise ValueError(f"no attribute {name}")

    def __call__(self, *args):
        return self.fn(*args) if self.fn is not None else args[0] * 2 + 1


class _KeyErrorModule(torch.nn.Module):
    def __getattr__(self, name):
        if name.startswith("_"):
            raise KeyError(name)
        return super().__getattr__(name)

    def forward(self, x):
        return torch.relu(x) * 3


class _AnswersEverything:
    def __getattr__(self, name):
        return lambda *args, **kwargs: "surprise"

    def __call__(self, x):
        return x - 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("make", [_RaisingLookup, _KeyErrorModule, _AnswersEverything])
def test_model_whose_getattr_raises_anything_compiles(make, backend):
    """ember.compile read `getattr(model, "__qualname__", None)`, and capture its markers
    (`_ember_state`, `_ember_disabled`) the same way: a `__getattr__` raising KeyError or
    ValueError crashed the compile, and one answering every name was taken for a captured
    function. The model's name and ember's markers are read without the user's lookup."""
    model = make()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback either: it compiles
        torch.testing.assert_close(compiled(x), model(x))
    assert ember.compile_report(compiled).function == type(model).__qualname__
    with pytest.raises(ember.InvalidArgument, match="was not made by ember.compile"):
        ember.compile_record(model)


def test_callable_with_raising_getattr_called_inside_and_returned_by_a_backend():
    """The same lookups of a user object that the compiled function calls (capture describes it
    in a break reason; a break runs it), and of the callable a user backend returns (the facade
    asks it for `__self__`, `_boxed_call`, `compiled_graph`)."""
    def f(x, helper):
        y = helper(x)
        print("between")
        return helper(y) - 1

    def backend(gm, example_inputs):
        return _RaisingLookup(lambda *args: gm.forward(*args))

    for be in ("eager", "aot_eager", backend):
        compiled = ember.compile(f, backend=be)
        for _ in range(2):
            x = torch.randn(3)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no fallback either
                torch.testing.assert_close(compiled(x, _RaisingLookup()), f(x, _RaisingLookup()))
