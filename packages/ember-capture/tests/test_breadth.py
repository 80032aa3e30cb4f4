"""Capture breadth (issue 13): Python's semantics for user classes that subclass builtins,
classes made inside the traced code, and library Python. Each case runs eagerly and captured on
two fresh inputs of different shapes, and pins the number of graphs (one per shape: no break).
"""
import abc
import collections
import dataclasses

import pytest
import torch

import ember_capture
from capture_helpers import Recorder, assert_same, check


def r(*shape):
    return torch.randn(*shape)


TWO = ((r(3, 4),), (r(5, 4),))


# ---- a dict subclass held by a library (a registry), reached through super().get ------------
class Registry(dict):
    def get(self, key):
        return super().get(key) or {}


REGISTRY = Registry(scale={"a": 2.0})


def uses_registry(x):
    return x * REGISTRY.get("scale")["a"] + len(REGISTRY.get("missing"))


def test_dict_subclass_inherited_get():
    check(uses_registry, *TWO, graphs=2, breaks=0)


def test_dict_subclass_read_is_guarded():
    rec = Recorder()
    captured = ember_capture.capture(uses_registry, rec)
    x = r(3)
    assert_same(captured(x), uses_registry(x))
    REGISTRY["scale"] = {"a": 5.0}  # what the trace read changed: recompile, do not reuse
    try:
        assert_same(captured(x), uses_registry(x))
        assert len(rec.graphs) == 2
    finally:
        REGISTRY["scale"] = {"a": 2.0}


def dict_descriptor_on_plain_dict(x):
    d = {"w": x * 2}
    dict.__setitem__(d, "v", x + 1)
    return dict.get(d, "w") + dict.__getitem__(d, "v") * len(d)


def test_dict_descriptor_on_plain_dict():
    check(dict_descriptor_on_plain_dict, *TWO, graphs=2, breaks=0)


# ---- a ModelOutput-like record: a dataclass that subclasses OrderedDict -----------------------
class Output(collections.OrderedDict):
    """Hugging Face's ModelOutput, reduced: fields that are not None are also dict items;
    integer indexing goes through to_tuple()."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            v = self.__dict__.get(field.name)
            if v is not None:
                self[field.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(Output):
    loss: torch.Tensor = None
    logits: torch.Tensor = None
    hidden: tuple = None


def model_output(x):
    out = LMOutput(logits=x.relu(), hidden=(x, x * 2))
    first = out[0]  # the first field that is not None: logits
    return LMOutput(loss=first.sum(), logits=out.logits + out["hidden"][1])


def test_model_output_built_indexed_and_returned():
    rec, _ = check(model_output, *TWO, graphs=2, breaks=0)


def test_model_output_result_is_a_real_record():
    captured = ember_capture.capture(model_output, Recorder())
    x = r(2, 3)
    got, want = captured(x), model_output(x)
    assert type(got) is LMOutput and list(got.keys()) == list(want.keys()) == ["loss", "logits"]
    assert got.hidden is None and torch.equal(got[1], want[1]) and torch.equal(got.loss, want.loss)


def model_output_truth_and_len(x):
    out = LMOutput(logits=x)
    empty = collections.OrderedDict()
    return x * len(out) if out and not empty else x


def test_model_output_truth_and_len():
    check(model_output_truth_and_len, *TWO, graphs=2, breaks=0)


# ---- small user classes made inside the traced code --------------------------------------------
class LayerView(collections.abc.Sequence):  # an ABCMeta class, like transformers' config views
    def __init__(self, scales):
        self._scales = scales

    def __len__(self):
        return len(self._scales)

    def __getitem__(self, i):
        return self._scales[i]


SCALES = [1.0, 2.0, 3.0]


def per_layer_view(x):
    view = LayerView(SCALES)
    for i in range(len(view)):
        x = x * view[i]
    return x + view[-1]


def test_abc_class_made_in_trace():
    check(per_layer_view, *TWO, graphs=2, breaks=0)


class Stack(list):
    def push(self, v):
        self.append(v)
        return self


def list_subclass(x):
    s = Stack([x])
    s.push(x * 2).push(x * 3)
    return s, len(s), s[1] + s[-1], [t.sum() for t in s]


def test_list_subclass_made_in_trace():
    check(list_subclass, *TWO, graphs=2, breaks=0)


class Abstract(abc.ABC):
    @abc.abstractmethod
    def f(self):
        ...


def make_abstract(x):
    return Abstract(), x


def test_abstract_class_is_not_instantiated():
    with pytest.raises(TypeError):
        ember_capture.capture(make_abstract, Recorder())(r(2))


# ---- operators -------------------------------------------------------------------------------
def int_iadd_tensor(x):
    total = 0
    for t in (x, x * 2):
        total += t.sum(0)
    return total


def test_int_augmented_assign_with_tensor():
    check(int_iadd_tensor, *TWO, graphs=2, breaks=0)


# ---- exceptions raised and caught inside the traced code (Note [Traced exceptions]) -----------
def first_missing(d, keys):
    for k in keys:
        try:
            d[k]
        except KeyError:
            return k
    return None


def traced_try_except(x):
    table = {"a": x, "b": x * 2}
    missing = first_missing(table, ["a", "b", "c"])  # KeyError raised and caught in the trace
    try:
        extra = [x][1]
    except IndexError:
        extra = x.sum()
    return table["b"] * len(missing) + extra


def test_exception_caught_in_trace():
    check(traced_try_except, *TWO, graphs=2, breaks=0)


def pops_what_is_not_there(x):
    table, stack = {"a": 1}, []
    try:
        scale = table.pop("missing")
    except KeyError:
        scale = 2.0
    try:
        stack.pop()
    except IndexError:
        scale = scale + 1
    order = collections.OrderedDict(a=1)
    try:
        order.move_to_end("missing")
    except KeyError:
        scale = scale * 2
    return x * scale


def test_pop_of_a_missing_key_or_an_empty_list_raises_in_the_trace():
    """dict.pop / list.pop / move_to_end raised their KeyError or IndexError inside capture's own
    code: an internal error (a fallback with an 'ember bug' warning; a raise in the test mode)."""
    check(pops_what_is_not_there, *TWO, graphs=2, breaks=0,
          config=ember_capture.CaptureConfig(raise_internal=True))


def sequence_iteration(x):
    # Sequence.__iter__ (collections.abc) stops at the IndexError its __getitem__ raises
    return sum(s * x for s in LayerView(SCALES)), list(reversed(LayerView(SCALES)))


def test_abc_sequence_iteration_ends_by_index_error():
    check(sequence_iteration, *TWO, graphs=2, breaks=0)


class Env(collections.abc.Mapping):  # like os.environ: Mapping.get catches the KeyError
    def __init__(self, data):
        self._data = data

    def __getitem__(self, k):
        if k not in self._data:
            raise KeyError(k)
        return self._data[k]

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return iter(self._data)


ENV = Env({"SCALE": 3.0})


def mapping_get_default(x):
    return x * ENV.get("SCALE", 1.0) + ENV.get("MISSING", 0.5)


def test_mapping_get_default_through_key_error():
    check(mapping_get_default, *TWO, graphs=2, breaks=0)


def uncaught(x):
    y = x * 2
    if y.shape[0] > 100:
        raise ValueError("too long")
    return {"a": y}["b"]  # KeyError reaches the root: a graph break, the subscript raises natively


def test_uncaught_exception_is_raised_natively():
    stats = ember_capture.CaptureStats()
    captured = ember_capture.capture(uncaught, Recorder(), stats=stats)
    with pytest.raises(KeyError):
        captured(r(3))
    assert [b.kind for b in stats.breaks] == ["raise"]


# ---- torch's own Python: context decorators ------------------------------------------------------
class Rotary(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x):
        return x.cos(), torch.is_grad_enabled()


class UsesRotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rot = Rotary()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        c, inner_grad = self.rot(x)
        return self.lin(x) * c, inner_grad, torch.is_grad_enabled()


def test_no_grad_decorated_forward_is_inlined():
    from capture_helpers import check_module
    check_module(UsesRotary, [(r(3, 4),), (r(5, 4),)], graphs=2, breaks=0)


# ---- containers and itertools made in the trace -----------------------------------------------
Pair = collections.namedtuple("Pair", "a b")


def collections_made_in_trace(x):
    d = collections.OrderedDict(a=x, b=x * 2)
    dd = collections.defaultdict(list)
    dd["k"].append(x)
    dd["k"].append(x + 1)
    p = Pair(x, x + 1)
    return d["a"] + d["b"] + dd["k"][1] + p.b, dd, d


def test_ordereddict_defaultdict_namedtuple():
    check(collections_made_in_trace, *TWO, graphs=2, breaks=0)


def itertools_in_trace(x):
    import itertools
    out = [x * a * b for a, b in itertools.product([1, 2], [3])]
    out += list(itertools.chain([x], [x * 2])) + list(itertools.chain.from_iterable([[x], [x]]))
    out += [a if a is not None else b for a, b in itertools.zip_longest([x], [x, x])]
    out += list(itertools.islice(itertools.repeat(x, 5), 1, 3)) + list(itertools.starmap(torch.add, [(x, x)]))
    acc = list(itertools.accumulate([x, x, x]))
    return sum(out) * list(itertools.accumulate([1, 2, 3]))[-1] + acc[-1]


def test_itertools():
    check(itertools_in_trace, *TWO, graphs=2, breaks=0)


class BuildsModules(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        act = torch.nn.GELU(approximate="tanh")
        return torch.nn.Softmax(dim=-1)(act(self.lin(x))), torch.nn.MSELoss()(x, x.relu())


class BuildsLinear(torch.nn.Module):
    def forward(self, x):
        return torch.nn.Linear(4, 4)(x)  # fresh random weights on each call: never captured


def test_stateless_modules_built_in_forward():
    from capture_helpers import check_module
    check_module(BuildsModules, [(r(3, 4),), (r(5, 4),)], graphs=2, breaks=0)


def test_module_with_parameters_built_in_forward_is_not_captured():
    stats = ember_capture.CaptureStats()
    torch.manual_seed(0)
    out = ember_capture.capture(BuildsLinear(), Recorder(), stats=stats)(r(3, 4))
    assert out.shape == (3, 4) and [b.kind for b in stats.breaks] == ["unsupported_call"]


# ---- frames with cells break and resume (Note [Resuming with cells]) ---------------------------
def cells_across_a_break(x, n):
    scale = 2.0

    def inner(t):
        return t * scale + n  # reads the cells of the frame that made it

    y = inner(x)
    print("graph break")
    scale = 3.0  # written after the break: the closure made before it sees the new value
    return inner(y) + x.sum(), scale


def test_frame_with_cells_breaks_and_resumes():
    check(cells_across_a_break, (r(3), 1.0), (r(3), 2.0), (r(4), 2.0), breaks=3)


def cells_and_data_branch(x):
    acc = [x * 2]

    def total():
        return sum(acc) + x

    if x.sum() > 0:  # a data-dependent branch in a frame with cells
        y = total() * 2
    else:
        y = total() - 1
    return y


def test_frame_with_cells_data_dependent_branch():
    check(cells_and_data_branch, (torch.ones(3),), (-torch.ones(3),), (r(3),))


def nonlocal_write(x):
    seen = []
    scale = 1.0

    def grow(t):
        nonlocal scale
        scale *= 2
        seen.append(t.shape)
        return t * scale

    y = grow(x)
    print("graph break")  # the cell `scale` written before and after the break
    return grow(y), scale, len(seen)


def test_nonlocal_write_after_break():
    check(nonlocal_write, *TWO)  # the list append after the resume is an input mutation: a break


# ---- forward hooks and pre-hooks on submodules -------------------------------------------------
class Hooked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()  # stateless: guarded by class, and by having no hooks
        self.handles = [
            self.lin.register_forward_pre_hook(lambda m, args: (args[0] + 1,)),
            self.lin.register_forward_hook(lambda m, args, out: out * 2),
            self.lin.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 3,), kwargs), with_kwargs=True),
            self.act.register_forward_hook(lambda m, args, out: out - args[0]),
        ]

    def forward(self, x):
        return self.act(self.lin(x))


def test_submodule_hooks_are_traced():
    from capture_helpers import check_module
    check_module(Hooked, [(r(3, 4),), (r(5, 4),)], graphs=2, breaks=0)


def test_removing_a_hook_recompiles():
    torch.manual_seed(0)
    model, rec = Hooked(), Recorder()
    compiled = ember_capture.capture(model, rec)
    x = r(3, 4)
    assert_same(compiled(x), model(x))
    model.handles[1].remove()
    model.handles[3].remove()
    assert_same(compiled(x), model(x))
    assert len(rec.graphs) == 2


# ---- context managers written in Python ---------------------------------------------------------
class Scaled:
    def __init__(self, s):
        self.s = s
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


class Settings:
    def __init__(self):
        self.scale = 1.0


SETTINGS = Settings()


class Override:
    def __init__(self, v):
        self.v = v

    def __enter__(self):
        self.old, SETTINGS.scale = SETTINGS.scale, self.v

    def __exit__(self, *exc):
        SETTINGS.scale = self.old


def python_context_managers(x):
    with Scaled(3.0) as ctx:
        y = x * ctx.s
    with Override(5.0):
        z = y * SETTINGS.scale
    return z + SETTINGS.scale, ctx.log


def test_python_context_managers():
    check(python_context_managers, *TWO, graphs=2, breaks=0)


def break_inside_python_context(x):
    with Scaled(2.0) as ctx:
        y = x * ctx.s
        print("graph break")
        y = y + 1
    return y, ctx.log


def test_break_inside_python_context_manager():
    # resumes inside the block; __exit__ then appends to the log it was given (an input list: a break)
    check(break_inside_python_context, *TWO)


VIEW = LayerView(SCALES)  # a real Sequence held by the program (a config's per-layer view)


def iterate_real_sequence(x):
    return sum(s * x for s in VIEW)


def test_iterating_a_real_sequence_calls_its_iter():
    check(iterate_real_sequence, *TWO, graphs=2, breaks=0)


# ---- contextlib is plain Python: nullcontext (Hugging Face's "no autocast" branch) is traced --
def under_optional_context(x):
    import contextlib
    with contextlib.nullcontext() as nothing:
        y = x.sin() if nothing is None else x
    return y * 2


def test_nullcontext_is_traced():
    check(under_optional_context, *TWO, graphs=2, breaks=0)  # one per input shape
