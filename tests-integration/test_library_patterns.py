"""Python that model libraries run inside forward, captured in one graph (fullgraph=True) and
equal to eager through capture alone and the default backend, on two calls with new inputs:
copy.deepcopy of a config object (Hugging Face T5/BART/Marian/Whisper), setattr/delattr on the
copy, a class's own __getattribute__/__setattr__ (attribute aliases), functools.lru_cache and
functions marked constant (wav2vec2), torch.autograd.Function subclasses with their own
backward (BLOOM's GELU), dict.pop on the **kwargs dict a frame was given.
"""
import collections
import copy
import functools
import typing

import pytest
import torch

import ember

BACKENDS = ["eager", "inductor"]


def run_twice(fn, make_inputs, backend, fullgraph=True):
    compiled = ember.compile(fn, backend=backend, fullgraph=fullgraph)
    for seed in (1, 2):
        torch.manual_seed(seed)
        args = make_inputs()
        want = fn(*copy.deepcopy(args))
        got = compiled(*args)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    return compiled


class Config:
    """A config in the style of transformers' PreTrainedConfig: aliases mapped both ways."""

    attribute_map = {"num_layers": "encoder_layers"}

    def __init__(self):
        self.encoder_layers = 2
        self.decoder_layers = 3
        self.scale = 1.5
        self.names = ["a", "b"]
        self.sub = SubConfig()

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class SubConfig:
    def __init__(self):
        self.width = 4


class UsesCopiedConfig(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()

    def forward(self, x):
        cfg = copy.deepcopy(self.config)
        cfg.num_layers = self.config.decoder_layers  # through the alias: encoder_layers
        for key in list(vars(cfg)):
            if key.startswith("decoder"):
                value = getattr(cfg, key)
                delattr(cfg, key)
                setattr(cfg, "renamed_" + key, value)
        cfg.names.append("c")  # the copy's list, not the original's
        cfg.sub.width += 1
        return x * cfg.num_layers + cfg.scale * len(cfg.names) + cfg.sub.width + cfg.renamed_decoder_layers


@pytest.mark.parametrize("backend", BACKENDS)
def test_deepcopy_of_a_config_object_in_forward(backend):
    m = UsesCopiedConfig()
    run_twice(m, lambda: (torch.randn(4),), backend)
    assert m.config.names == ["a", "b"] and m.config.sub.width == 4 and m.config.decoder_layers == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_deepcopy_sees_a_config_changed_after_compiling(backend):
    m = UsesCopiedConfig()
    compiled = ember.compile(m, backend=backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), m(x))
    m.config.scale = 2.5  # read through the copy: a guard on the original recompiles
    torch.testing.assert_close(compiled(x), m(x))


def test_deepcopy_of_a_container_keeps_sharing():
    def f(x, d):
        c = copy.deepcopy(d)
        c["a"].append(1)
        return x * len(c["b"]), c

    def make():
        shared = [1, 2]
        return torch.randn(3), {"a": shared, "b": shared}

    for backend in BACKENDS:
        compiled = ember.compile(f, backend=backend, fullgraph=True)
        for _ in range(2):
            x, d = make()
            out, c = compiled(x, d)
            torch.testing.assert_close(out, x * 3)
            assert d == {"a": [1, 2], "b": [1, 2]} and c["a"] is c["b"] and c["a"] == [1, 2, 1]


@functools.lru_cache
def cached_scale(n):
    return n * 0.5


def marked(fn):
    fn._dynamo_marked_constant = True  # what torch._dynamo.assume_constant_result sets
    return fn


@functools.lru_cache
@marked
def probe():
    return 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_lru_cache_wrapped_functions(backend):
    def f(x):
        return x * cached_scale(4) + probe()

    run_twice(f, lambda: (torch.randn(5),), backend)


class Notes:
    """A logger in the style of transformers' `logger.warning_once`: an lru_cache'd function set
    on the class, so `notes.warn_once(msg)` is the wrapper bound to the instance."""

    def __init__(self):
        self.said = []


@functools.lru_cache(None)
def _warn_once(self, msg):
    self.said.append(msg)


Notes.warn_once = _warn_once


@pytest.mark.parametrize("backend", BACKENDS)
def test_lru_cached_method_bound_to_an_object(backend):
    # Hugging Face's loss_function property calls logger.warning_once(...): a graph break
    # split GPT-2's loss from its model ("attribute 'warning_once' (_lru_cache_wrapper) of Logger").
    notes = Notes()

    def f(x):
        notes.warn_once("unrecognized loss type")
        return x * 2

    compiled = run_twice(f, lambda: (torch.randn(5),), backend)
    assert notes.said == ["unrecognized loss type"]  # once, as eager: the calls after are cache hits
    other = Notes()  # another object is another cache key: the identity is guarded
    notes = other
    compiled(torch.randn(5))
    assert other.said == ["unrecognized loss type"]


class StraightThroughRound(torch.autograd.Function):
    """round() forward, identity backward: not the derivative of the forward's ops."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.scale * torch.sigmoid(x), None


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_function_keeps_its_backward(backend):
    def f(x, w):
        return (StraightThroughRound.apply(x * w, 4.0) * 2).sum()

    compiled = ember.compile(f, backend=backend, fullgraph=True)
    for seed in (1, 2):
        torch.manual_seed(seed)
        x = torch.randn(6)
        w = torch.randn(6, requires_grad=True)
        w2 = w.detach().clone().requires_grad_(True)
        f(x, w).backward()
        compiled(x, w2).backward()
        torch.testing.assert_close(w2.grad, w.grad)
    with torch.no_grad():
        run_twice(f, lambda: (torch.randn(6), torch.randn(6)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pop_from_the_kwargs_dict(backend):
    def inner(x, **kwargs):
        scale = kwargs.pop("scale", 1.0)
        kwargs.pop("missing", None)
        return x * scale + len(kwargs)

    def f(x, **kwargs):
        extra = kwargs.pop("extra")
        return inner(x, **kwargs) + extra, sorted(kwargs)

    compiled = ember.compile(f, backend=backend, fullgraph=True)
    for seed in (1, 2):
        x = torch.randn(3)
        kw = dict(extra=torch.randn(3), scale=2.0, other=1)
        got, keys = compiled(x, **kw)
        want, want_keys = f(x, **dict(kw))
        torch.testing.assert_close(got, want)
        assert keys == want_keys and list(kw) == ["extra", "scale", "other"]


_VALIDATORS = {list: 2.0, typing.Union: 3.0}  # keys that are not str/int: held as a real dict
_OPTIONAL = typing.Optional[int]


class Output(collections.OrderedDict):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_c_methods_of_real_dicts_and_typing_introspection(backend):
    """`d.get(k)` on a dict read through dict's own __getattribute__ slot, `.keys()` of an
    OrderedDict subclass given as input, typing.get_origin on an annotation (huggingface_hub's
    strict dataclass validators)."""
    def f(x, out):
        scale = _VALIDATORS.get(typing.get_origin(_OPTIONAL), 1.0)
        return x * scale + sum(out[k] for k in out.keys())

    compiled = ember.compile(f, backend=backend, fullgraph=True)
    for seed in (1, 2):
        x = torch.randn(3)
        out = Output(a=torch.randn(3), b=torch.randn(3))
        torch.testing.assert_close(compiled(x, out), f(x, out))
    out["c"] = torch.randn(3)  # a new key: the guard on its keys recompiles
    torch.testing.assert_close(compiled(x, out), f(x, out))


@pytest.mark.parametrize("backend", BACKENDS)
def test_api_usage_logging_in_forward(backend):
    """torchvision's functional ops (stochastic_depth, ...) log their use on each call."""
    def f(x):
        torch._C._log_api_usage_once(f"ember.test.{type(x).__name__}")
        return x.relu() * 2

    run_twice(f, lambda: (torch.randn(4),), backend)

