"""Dicts from the inputs changed by the compiled code (Note [Mutated input dicts]): the trace
models the change and writes it back after the graph into the same dict, keys in eager's order,
instead of breaking the graph (issue 13: timm's LeViT fills an attention-bias cache, a dict on
the module, inside forward). Every case runs through `ember.compile` with the eager and the
default (inductor) backends, on several calls with the dict changed between calls, against eager
PyTorch run on its own copy of the same state: the results, the dict's keys in order and its
values, and that it is still the same object.
"""
import collections
import json
import types

import pytest
import torch

import ember

BACKENDS = ["eager", "inductor"]
TOL = dict(rtol=1e-4, atol=1e-5)


def same(actual, expected):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), type(actual)
        torch.testing.assert_close(actual, expected, **TOL)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and list(actual) == list(expected), (list(actual), list(expected))
        for k in expected:
            same(actual[k], expected[k])
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            same(a, e)
    elif hasattr(expected, "__dict__"):  # an object: its attributes
        assert type(actual) is type(expected)
        same(vars(actual), vars(expected))
    else:
        assert actual == expected, (actual, expected)


# -- LeViT's attention-bias cache (timm.models.levit.Attention, shape kept) ------------------
class LeViTAttention(torch.nn.Module):
    def __init__(self, heads=2, resolution=3):
        super().__init__()
        points = resolution * resolution
        self.qkv = torch.nn.Linear(8, 3 * 8)
        self.attention_biases = torch.nn.Parameter(torch.randn(heads, points))
        self.register_buffer("attention_bias_idxs", torch.randint(0, points, (points, points)), persistent=False)
        self.attention_bias_cache = {}
        self.heads = heads

    @torch.no_grad()
    def train(self, mode=True):
        super().train(mode)
        if mode and self.attention_bias_cache:
            self.attention_bias_cache = {}  # clear ab cache

    def get_attention_biases(self, device):
        if torch.jit.is_tracing() or self.training:
            return self.attention_biases[:, self.attention_bias_idxs]
        device_key = str(device)
        if device_key not in self.attention_bias_cache:
            self.attention_bias_cache[device_key] = self.attention_biases[:, self.attention_bias_idxs]
        return self.attention_bias_cache[device_key]

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = q @ k.transpose(-2, -1) + self.get_attention_biases(x.device)
        return (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_levit_bias_cache_is_one_graph_on_the_first_call(backend):
    eager = LeViTAttention()
    model = LeViTAttention()
    model.load_state_dict(eager.state_dict())
    model.attention_bias_idxs.copy_(eager.attention_bias_idxs)
    eager.eval()
    model.eval()
    cache = model.attention_bias_cache
    compiled = ember.compile(model, backend=backend, fullgraph=True)
    for step in range(3):
        x = torch.randn(2, 9, 8)
        same(compiled(x), eager(x))
        if step == 0:  # the cache was empty: one graph, no break, as torch.compile
            report = ember.compile_report(compiled)
            assert len(report.graphs) == 1 and report.breaks == [], report.breaks
        assert model.attention_bias_cache is cache  # filled in place
        same(cache, eager.attention_bias_cache)
    assert len(ember.compile_report(compiled).graphs) <= 2  # the filled cache recompiles once


# -- changes to a dict, each against eager over several calls ---------------------------------
def set_new_and_existing(x, d):
    d["a"] = d["a"] + x
    d["new"] = x * 2
    return x + 1


def delete_and_reinsert(x, d):
    a = d["a"]
    del d["a"]
    d["a"] = a * x  # deleted and set again: last, as in eager
    return x.sum()


def pop_with_default(x, d):
    missing = d.pop("missing", x)
    b = d.pop("b", None)
    return missing * 2 if b is None else missing + b


def update_from_dict_and_kwargs(x, d):
    d.update({"b": x, "a": d["a"] * 2}, c=x * 3)
    d.update(e=x - 1)
    d |= {"f": x + 2}
    return x


def set_default(x, d):
    a = d.setdefault("a", x)
    z = d.setdefault("z", x * 2)
    return a + z


def clear_and_refill(x, d):
    keep = next(iter(d.values()))
    d.clear()
    d["only"] = keep + x
    return x * len(d)


def pop_item(x, d):
    k, v = d.popitem()
    d["last_popped"] = x if k != "last_popped" else v
    return x


def move_to_end(x, d):
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    d["a"] = d["a"] + x
    return x


def defaultdict_missing_key(x, d):
    d["new"].append(x)
    d["a"].append(x * 2)
    return len(d["new"]) * x


class Registry(dict):
    """A user subclass of dict with a method of its own and no override of dict's methods."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def total(self):
        return sum(v for k, v in self.items() if isinstance(v, torch.Tensor))


def subclass_method(x, d):
    d["x"] = x
    return d.total()


class LoggingDict(dict):
    """A subclass that overrides __setitem__: not modelled as a dict (a break, or its Python runs)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.writes = getattr(self, "writes", 0) + 1


def overridden_setitem(x, d):
    d["x"] = x
    return x * 2


def _tensors(*keys):
    return {k: torch.full((3,), float(i + 1)) for i, k in enumerate(keys)}


CASES = {  # name: (function, a fresh state, breaks the first call may have)
    "setitem": (set_new_and_existing, lambda: _tensors("a", "b"), 0),
    "del_reinsert": (delete_and_reinsert, lambda: _tensors("a", "b", "c"), 0),
    "pop_default": (pop_with_default, lambda: _tensors("a", "b"), 0),
    "update": (update_from_dict_and_kwargs, lambda: _tensors("a", "e"), 0),
    "setdefault": (set_default, lambda: _tensors("a"), 0),
    "clear": (clear_and_refill, lambda: _tensors("a", "b"), 0),
    "popitem": (pop_item, lambda: _tensors("a", "b", "c"), 0),
    "ordered_move_to_end": (move_to_end, lambda: collections.OrderedDict(_tensors("a", "b", "c")), 0),
    "defaultdict": (defaultdict_missing_key, lambda: collections.defaultdict(list, a=[torch.ones(3)]), 0),
    "subclass": (subclass_method, lambda: Registry(_tensors("a")), 0),
    "overriding_subclass": (overridden_setitem, lambda: LoggingDict(_tensors("a")), None),
}


def change_between_calls(d, step):
    """What the caller does to the dict between two calls: a new value for a key, a new key."""
    if not isinstance(d, dict):
        return
    if step == 1 and "a" in d and isinstance(d["a"], torch.Tensor):
        d["a"] = d["a"] * 3
    if step == 2:
        tensors = any(isinstance(v, torch.Tensor) for v in d.values())
        d["extra"] = torch.full((3,), -1.0) if tensors else 7


def run_against_eager(fn, make, backend, steps=4, first_breaks=0, holder=lambda f, d: (f, d), extra=lambda d: (),
                      first_reason=None):
    """Compiled (through `holder`: the dict passed, or held by a module, a global, a closure;
    `extra(d)`: more arguments the caller makes, a view of it) equals eager on every call, the
    dict too, changed in place."""
    eager_fn, eager_d = holder(fn, make())
    comp_fn, comp_d = holder(fn, make())
    compiled = ember.compile(comp_fn, backend=backend)
    for step in range(steps):
        x = torch.randn(3)
        expected = eager_fn(x, eager_d, *extra(eager_d))
        d_before = comp_d
        got = compiled(x, comp_d, *extra(comp_d))
        same(got, expected)
        same(comp_d, eager_d)
        if isinstance(eager_d, dict):
            same(getattr(comp_d, "__dict__", None), getattr(eager_d, "__dict__", None))
        assert comp_d is d_before
        breaks = ember.compile_report(compiled).breaks
        if step == 0 and first_breaks is not None:
            assert len(breaks) == first_breaks, breaks
        if step == 0 and first_reason is not None:  # the change is modelled: the native read breaks
            assert [first_reason in b.reason for b in breaks] == [True], breaks
        change_between_calls(eager_d, step)
        change_between_calls(comp_d, step)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_dict_changes_against_eager(case, backend):
    fn, make, breaks = CASES[case]
    run_against_eager(fn, make, backend, first_breaks=breaks)


# -- where the dict comes from: an argument, a module, a global, a closure ---------------------
def fill_cache(x, cache):
    key = str(x.shape[0])
    if key not in cache:
        cache[key] = x.new_ones(x.shape) * 2
    cache["calls"] = cache["calls"] + 1 if "calls" in cache else torch.zeros(())
    return x * cache[key]


class CacheModule(torch.nn.Module):
    def __init__(self, cache):
        super().__init__()
        self.cache = cache

    def forward(self, x, _unused):
        return fill_cache(x, self.cache)


def held_by_module(fn, d):
    return CacheModule(d), d


def held_by_global(fn, d):
    def uses_global(x, _unused):
        return fill_cache(x, CACHE)  # noqa: F821 - CACHE is this function's own global
    g = types.FunctionType(uses_global.__code__, {**globals(), "CACHE": d}, "uses_global")
    return g, d


def held_by_closure(fn, d):
    def uses_closure(x, _unused):
        return fill_cache(x, d)
    return uses_closure, d


HOLDERS = {"argument": lambda fn, d: (fn, d), "module": held_by_module, "global": held_by_global,
           "closure": held_by_closure}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("holder", list(HOLDERS))
def test_dict_holders(holder, backend):
    run_against_eager(fill_cache, dict, backend, first_breaks=0, holder=HOLDERS[holder])


# -- native reads of a changed dict: they see the new contents ---------------------------------
def view_before_change(x, d):
    keys, values = d.keys(), d.values()
    d["new"] = x
    del d[next(iter(d))]
    return x * len(keys), list(keys), sum(values)


def view_from_the_caller(x, d, items):
    d["b"] = x * 2
    return [k for k, _ in items], len(items) * x, ("b" in d.keys())


def str_after_change(x, d):
    d["count"] = d["count"] + 1
    text = str(d)
    return x * len(text), text


def json_after_change(x, d):
    d["count"] = d["count"] + 1
    text = json.dumps(d)
    return x * len(text), text


def proxy_after_change(x, d, proxy):
    d["new"] = 1
    return x * len(proxy), "new" in proxy


def break_after_change(x, d):
    d["a"] = x * 2
    print("", end="")  # a graph break: the resumed code reads the dict written back
    return d["a"] + len(d)


def add_keys_while_iterating(x, d):
    try:
        for k in d:
            d[k + "_"] = x  # eager: RuntimeError at the next step of the loop
    except RuntimeError as e:
        return x * 2, str(e)
    return x, ""


def set_values_while_iterating(x, d):
    out = x
    for k, v in d.items():
        print("", end="")  # a break inside the loop: a real iterator over the written-back dict
        d[k] = v + x
        out = out + d[k]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [add_keys_while_iterating, set_values_while_iterating], ids=["add", "set"])
def test_iterating_while_changing(fn, backend):
    run_against_eager(fn, lambda: _tensors("a", "b"), backend, first_breaks=None)


class Plain:
    def __init__(self):
        self.a = torch.ones(3)


def instance_dict_then_attribute(x, o):
    o.__dict__["a"] = o.a + x  # the instance dict, changed; then read through the attribute
    o.__dict__["b"] = x * 2
    return o.a + o.b, hasattr(o, "b")


def module_dict_then_attribute(x, mod):
    mod.__dict__["scale"] = mod.scale + x  # a Python module's namespace
    return mod.scale * 2


class BufferWriter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x, _unused=None):
        self._buffers["buf"] = self.buf + x
        return self.buf * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_read_after_changing_the_instance_dict(backend):
    run_against_eager(instance_dict_then_attribute, Plain, backend, first_breaks=None)

    def make_module():
        mod = types.ModuleType("holder")
        mod.scale = torch.ones(3)
        return mod
    run_against_eager(module_dict_then_attribute, make_module, backend, first_breaks=None)
    eager, model = BufferWriter(), BufferWriter()
    compiled = ember.compile(model, backend=backend)
    for _ in range(3):
        x = torch.randn(3)
        same(compiled(x), eager(x))
        same(model.buf, eager.buf)


def sgd_step_with_new_lr(x, model, opt, lr):
    loss = model(x).pow(2).sum()
    loss.backward()
    for group in opt.param_groups:
        group["lr"] = lr  # the optimizer's step must see it
    opt.step()
    opt.zero_grad()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_optimizer_step_after_changing_a_param_group(backend):
    def make():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)
    (eager_model, eager_opt), (model, opt) = make(), make()
    compiled = ember.compile(sgd_step_with_new_lr, backend=backend)
    for lr in (0.5, 0.01, 0.3):
        x = torch.randn(4, 3)
        same(compiled(x, model, opt, lr), sgd_step_with_new_lr(x, eager_model, eager_opt, lr))
        same(model.weight, eager_model.weight)
        assert opt.param_groups[0]["lr"] == lr


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_taken_before_the_change(backend):
    run_against_eager(view_before_change, lambda: _tensors("a", "b"), backend, first_breaks=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_made_by_the_caller(backend):
    run_against_eager(view_from_the_caller, lambda: _tensors("a"), backend, first_breaks=0,
                      extra=lambda d: (d.items(),))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [str_after_change, json_after_change], ids=["str", "json"])
def test_native_read_after_the_change(fn, backend):
    run_against_eager(fn, lambda: {"count": 0, "name": "x"}, backend, first_breaks=1, first_reason=fn.__name__[:3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_mapping_proxy_after_the_change(backend):
    run_against_eager(proxy_after_change, lambda: {"a": 1}, backend, first_breaks=1, first_reason="read natively",
                      extra=lambda d: (types.MappingProxyType(d),))


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_after_the_change(backend):
    run_against_eager(break_after_change, lambda: _tensors("a"), backend, first_breaks=1)
