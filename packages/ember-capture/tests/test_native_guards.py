"""Batched guards (Note [Native guards]): a cached entry's tensor guards and its modules' "no
hooks" guards run in batches, through the C++ checker once it is built and through generated
Python before that (or where it cannot be built). Each test runs on both paths: hooks
registered or removed between two calls (module and global, pre and post, backward, through a
handle and by editing or replacing the hook dicts), and tensors whose metadata changes in
place, must give eager's result."""
from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as module_mod
from capture_helpers import Recorder, assert_same

import ember_capture
from ember_capture import native
from ember_capture.codegen import MISS


@pytest.fixture(params=["native", "python"])
def checks(request):
    if request.param == "native":
        if not native.wait():
            pytest.skip("the native guard checker could not be built on this machine")
        yield "native"
    else:
        with native.python_checks():
            yield "python"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU()  # stateless: guarded by its class and by having no hooks
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        return self.seq(self.act(self.lin(x))) * 2


def _compiled(m):
    fn = ember_capture.capture(m, Recorder())
    return fn


def _batches(fn):
    (entry,) = fn._ember_state.entries[:1]
    return [v for v in entry.__globals__.values() if isinstance(v, (native.TensorBatch, native.HookBatch))]


def _call(fn, m, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a module with hooks may run eagerly, with a warning
        got = fn(x)
    assert_same(got, m(x))


def _double(mod, args, out):
    return out * 2


def _plus_one(mod, args):
    return (args[0] + 1,)


def test_entry_checks_tensors_and_hooks_in_batches(checks):
    m = Net()
    fn = _compiled(m)
    x = torch.randn(3, 4)
    _call(fn, m, x)
    _call(fn, m, x)
    batches = _batches(fn)
    kinds = {type(b) for b in batches}
    assert kinds == {native.TensorBatch, native.HookBatch}, batches
    # Note [Native source reads]: the program reads the sources and checks the tensors; where
    # it answers, the hook batches run after it; else every batch of the Python guards does
    (program,) = [v for v in fn._ember_state.entries[0].__globals__.values() if isinstance(v, native.SourceProgram)]
    assert (program.run is native._undecided) == (checks == "python")
    decided = [b for b in batches if b.check != b._undecided]
    expected = {native.HookBatch} if checks == "native" else {native.TensorBatch, native.HookBatch}
    assert {type(b) for b in decided} == expected, decided
    for b in decided:  # decided on the first hit: the C++ checker, or the Python checks for good
        assert (b.check is b.py) == (checks == "python"), (checks, b.check)
    assert len(fn._ember_state.entries) == 1


# Each change adds hooks to a module of the traced model after the first (hook-free) call.
ADD_HOOKS = {
    "forward_hook": lambda m: m.lin.register_forward_hook(_double),
    "forward_pre_hook_on_stateless": lambda m: m.act.register_forward_pre_hook(_plus_one),
    "nested_forward_hook": lambda m: m.seq[0].register_forward_hook(_double),
    "kwargs_hook": lambda m: m.seq[1].register_forward_hook(lambda mod, a, kw, out: out - 1, with_kwargs=True),
    "root_forward_hook": lambda m: m.register_forward_hook(_double),
    "global_forward_hook": lambda m: module_mod.register_module_forward_hook(_double),
    "global_forward_pre_hook": lambda m: module_mod.register_module_forward_pre_hook(_plus_one),
    "dict_item": lambda m: m.lin._forward_hooks.__setitem__(10**9, _double),
    "pre_dict_item": lambda m: m.seq[0]._forward_pre_hooks.__setitem__(10**9, _plus_one),
    "dict_replaced": lambda m: setattr(m.lin, "_forward_hooks", collections.OrderedDict({10**9: _double})),
    "instance_dict_replaced": lambda m: m.seq[0].__dict__.__setitem__(
        "_forward_hooks", collections.OrderedDict({10**9: _double})),
    "global_dict_item": lambda m: module_mod._global_forward_hooks.__setitem__(10**9, _double),
}


@pytest.mark.parametrize("change", ADD_HOOKS)
def test_hook_added_between_calls_runs(change, checks):
    torch.manual_seed(0)
    m = Net()
    fn = _compiled(m)
    x = torch.randn(3, 4)
    _call(fn, m, x)
    _call(fn, m, x)  # a cache hit
    handle = ADD_HOOKS[change](m)
    try:
        _call(fn, m, x)
        _call(fn, m, torch.randn(3, 4))
    finally:
        if handle is not None:
            handle.remove()
        module_mod._global_forward_hooks.pop(10**9, None)
    _call(fn, m, x)  # and without it again


def _del_item(m, handle):
    del m.lin._forward_hooks[handle.id]


REMOVALS = {
    "handle": lambda m, handle: handle.remove(),
    "del_item": _del_item,
    "clear": lambda m, handle: m.lin._forward_hooks.clear(),
    "dict_replaced": lambda m, handle: setattr(m.lin, "_forward_hooks", collections.OrderedDict()),
}


@pytest.mark.parametrize("removal", REMOVALS)
def test_hook_removed_between_calls_is_not_run(removal, checks):
    torch.manual_seed(0)
    m = Net()
    handle = m.lin.register_forward_hook(_double)
    fn = _compiled(m)
    x = torch.randn(3, 4)
    _call(fn, m, x)
    _call(fn, m, x)
    REMOVALS[removal](m, handle)
    _call(fn, m, x)
    _call(fn, m, x)
    handle = m.lin.register_forward_hook(lambda mod, a, out: out + 3)  # another hook, added back
    _call(fn, m, x)
    handle.remove()
    _call(fn, m, x)


@pytest.mark.parametrize("kind", ["full_backward_hook", "full_backward_pre_hook", "global_full_backward_hook",
                                  "global_full_backward_pre_hook"])
def test_backward_hook_added_between_calls_runs(kind, checks):
    """A global backward hook registered after the trace was never run: the root's captured
    forward and the modules a graph break called natively bypassed Module.__call__, which sets
    it up (only global forward hooks were looked at, and no guard saw global backward hooks)."""
    m = Net()
    fn = _compiled(m)
    x = torch.randn(3, 4, requires_grad=True)
    _call(fn, m, x)
    seen = []
    register = {"full_backward_hook": lambda h: m.lin.register_full_backward_hook(h),
                "full_backward_pre_hook": lambda h: m.lin.register_full_backward_pre_hook(h),
                "global_full_backward_hook": module_mod.register_module_full_backward_hook,
                "global_full_backward_pre_hook": module_mod.register_module_full_backward_pre_hook}[kind]
    handle = register(lambda *args: seen.append(1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(x).sum().backward()
        expected = len(seen)
        m(x).sum().backward()
        assert expected >= 1 and len(seen) == 2 * expected, seen
    finally:
        handle.remove()


def test_class_attribute_or_getattribute_named_like_a_hook_dict(checks):
    """The C++ check reads the instance dict: a class whose `_forward_hooks` is a class attribute
    or whose `__getattribute__` is its own goes to the Python checks, which read as Python does."""
    class Special(nn.Linear):
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

    m = Net()
    m.lin = Special(4, 4)
    fn = _compiled(m)
    x = torch.randn(3, 4)
    _call(fn, m, x)
    _call(fn, m, x)
    m.lin.register_forward_hook(_double)
    _call(fn, m, x)


# Each change alters a tensor's metadata in place, without a new object (and, for most,
# without bumping its version): the tensor guard must see it.
def _no_grad(f):
    def change(m):
        with torch.no_grad():
            f(m)
    return change


TENSOR_CHANGES = {
    "data_shape": lambda m: setattr(m.lin.weight, "data", torch.randn(4, 6)),
    "data_dtype": lambda m: [setattr(p, "data", p.data.double()) for p in m.parameters()],
    "data_strides": lambda m: setattr(m.lin.weight, "data", torch.randn(4, 4).t()),
    "requires_grad": lambda m: m.seq[0].bias.requires_grad_(False),
    "transposed": _no_grad(lambda m: m.lin.weight.t_()),
    "set": _no_grad(lambda m: m.lin.bias.set_(torch.randn(8)[::2])),
    "meta": lambda m: m.to("meta"),
}


@pytest.mark.parametrize("change", TENSOR_CHANGES)
def test_tensor_metadata_changed_in_place_recompiles(change, checks):
    torch.manual_seed(0)
    m = Net()
    fn = _compiled(m)
    x = torch.randn(3, 4)
    _call(fn, m, x)
    _call(fn, m, x)
    TENSOR_CHANGES[change](m)
    p = m.lin.weight
    x = torch.randn(3, p.shape[1], dtype=p.dtype, device=p.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fn(x)
    want = m(x)
    assert (got.shape, got.dtype, got.device, got.requires_grad) == (want.shape, want.dtype, want.device,
                                                                       want.requires_grad)
    if want.device.type != "meta":
        torch.testing.assert_close(got, want)
    assert len(fn._ember_state.entries) == 2  # the first entry's guards failed


@pytest.mark.parametrize("arg", ["transposed", "subclass", "parameter", "sliced", "zero_dim"])
def test_tensor_argument_like_the_traced_one_but_not(arg, checks):
    class Sub(torch.Tensor):
        pass

    def f(x, y):
        return x * 2 + y

    fn = ember_capture.capture(f, Recorder())
    x, y = torch.randn(3, 3), torch.tensor(1.0)
    assert_same(fn(x, y), f(x, y))
    assert_same(fn(x, y), f(x, y))
    other = {"transposed": (x.t(), y), "subclass": (x.as_subclass(Sub), y), "parameter": (nn.Parameter(x), y),
             "sliced": (torch.randn(3, 6)[:, ::2], y), "zero_dim": (x, torch.tensor(1.0, dtype=torch.float64))}[arg]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fn(*other)
    want = f(*other)
    assert type(got) is type(want) and got.requires_grad == want.requires_grad
    torch.testing.assert_close(got.detach(), want.detach())
    assert len(fn._ember_state.entries) == 2


def test_native_functions_answer_as_python_would():
    if not native.wait():
        pytest.skip("the native guard checker could not be built on this machine")
    ext = native.extension()
    t = torch.randn(2, 3)
    p = nn.Parameter(torch.randn(3, 2))
    spec = ext.make_spec([(t.dtype, t.device, (2, 3), (3, 1), False), (p.dtype, p.device, (3, 2), (2, 1), True)])
    types = (torch.Tensor, nn.Parameter)
    assert ext.check_tensors(types, spec, (t, p)) is True
    for a, b in [(t.t(), p), (t.double(), p), (t, p.detach()), (t, torch.randn(3, 2)), (t.requires_grad_(), p)]:
        assert ext.check_tensors(types, spec, (a, b)) is False
    t.requires_grad_(False)
    assert ext.check_tensors(types, spec, (t,)) is False  # fewer tensors than records
    assert ext.check_tensors(types, spec, (t, p.to_sparse())) is False  # not strided
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    assert ext.check_tensors((torch.Tensor,), ext.make_spec([(t.dtype, t.device, (2, 3), (3, 1), False)]),
                             (nested,)) is False  # sizes() raises in C++: a mismatch
    names = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
             "_forward_hooks_always_called")
    mods = (nn.Linear(2, 2), nn.ReLU(), nn.Sequential())
    state = bytearray()  # Note [Hook witness]: armed by a passing check where dict watchers exist
    for _ in range(2):  # torch's modules keep these in their instance dict
        assert ext.no_hooks(names, mods, state) is True
    h = mods[1].register_forward_hook(_double)
    assert ext.no_hooks(names, mods, state) is False
    h.remove()
    assert ext.no_hooks(names, mods, state) is True
    mods[2]._backward_pre_hooks[1] = _double  # no handle
    assert ext.no_hooks(names, mods, state) is False
    mods[2]._backward_pre_hooks.clear()
    assert ext.no_hooks(names, mods, state) is True
    mods[0].__dict__["_forward_hooks"] = collections.OrderedDict({1: _double})  # no __setattr__
    assert ext.no_hooks(names, mods, state) is False
    mods[0].__dict__["_forward_hooks"] = collections.OrderedDict()
    assert ext.no_hooks(names, mods, state) is True
    assert ext.no_hooks(names, (mods[0], nn.Linear(2, 2), mods[2]), state) is True  # other modules
    other = nn.ReLU()
    other.register_forward_pre_hook(_plus_one)
    assert ext.no_hooks(names, (mods[0], other, mods[2]), state) is False
    class R(nn.ReLU):
        pass

    mods = (nn.Linear(2, 2), R())
    assert ext.no_hooks(names, mods, state) is True and ext.no_hooks(names, mods, state) is True
    R._forward_hooks = property(lambda self: {1: _double})  # a class change after the check
    assert ext.no_hooks(names, mods, state) is False
    del R._forward_hooks
    assert ext.no_hooks(names, mods, state) is True
    assert ext.witness_available() is (sys.version_info >= (3, 12))


def test_a_failed_build_means_python_checks(tmp_path):
    """No compiler: the checker never loads, one debug line says why, and captures still work."""
    script = textwrap.dedent("""
        import logging, torch
        import ember_capture
        from ember_capture import native
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
        native.start(cache_dir=CACHE_DIR)
        assert native.wait(60) is False and native._STATE.failed
        f = ember_capture.capture(lambda x: x * 2 + 1, lambda gm, ex: gm.forward)
        x = torch.randn(3)
        for _ in range(3):
            assert torch.equal(f(x), x * 2 + 1)
        assert torch.equal(f(x.t()), x * 2 + 1)
        print("ok")
    """).replace("CACHE_DIR", repr(str(tmp_path)))
    env = dict(os.environ, PATH=str(tmp_path))  # no c++ or g++ here
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("ember_capture.native")]
    assert len(lines) == 1 and "no C++ compiler" in lines[0], result.stderr


@pytest.mark.gpu
def test_cuda_tensors_device_and_index(checks):
    def f(x, w):
        return x @ w + 1

    fn = ember_capture.capture(f, Recorder())
    x, w = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    for _ in range(3):
        assert_same(fn(x, w), f(x, w))
    assert len(fn._ember_state.entries) == 1
    assert_same(fn(x.cpu(), w.cpu()), f(x.cpu(), w.cpu()))  # another device: the guard fails
    assert len(fn._ember_state.entries) == 2
    ext = native.extension()
    if ext is not None:
        spec = ext.make_spec([(x.dtype, x.device, (4, 4), (4, 1), False)])
        assert ext.check_tensors((torch.Tensor,), spec, (x,)) is True
        assert ext.check_tensors((torch.Tensor,), spec, (x.cpu(),)) is False


class _Block(nn.Module):
    SHIFT = 1.0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("offset", torch.zeros(4))

    def forward(self, x):
        return self.bn(self.lin(x)) + self.offset + type(self).SHIFT


def _model():
    torch.manual_seed(0)
    return nn.Sequential(_Block(), nn.ReLU(), _Block()).eval()


# Each change to what a read or check of Note [Native source reads] covers, and the program's
# answer: False (a check fails: a miss), None (undecided: the Python guards decide), or a hit.
PROGRAM_CHANGES = {
    "submodule_replaced": (lambda m: setattr(m[0], "lin", nn.Linear(4, 4)), False),
    "submodule_class": (lambda m: setattr(m[2], "lin", nn.Identity()), False),
    "instance_forward": (lambda m: setattr(m[2].lin, "forward", lambda x: x * 3), False),
    "class_attribute": (lambda m: setattr(_Block, "SHIFT", 2.0), False),  # pinned, compared by value
    "class_attribute_equal": (lambda m: setattr(_Block, "SHIFT", float("1.0")), "hit"),
    "class_method": (lambda m: setattr(_Block, "extra_repr", lambda self: "x"), "hit"),  # not read
    "parameter_replaced": (lambda m: setattr(m[0].lin, "weight", nn.Parameter(torch.randn(4, 4))), "hit"),
    "parameter_data_shape": (lambda m: setattr(m[0].lin.weight, "data", torch.randn(2, 4)), False),
    "parameter_data_dtype": (lambda m: setattr(m[2].bn.bias, "data", torch.randn(4).double()), False),
    "buffer_reassigned_shape": (lambda m: setattr(m[2], "offset", torch.zeros(1)), False),
    "buffer_shared": (lambda m: setattr(m[2], "offset", m[0].offset), False),  # two inputs, one tensor
    "training": (lambda m: m[2].train(), False),
    "sequential_grown": (lambda m: m.append(nn.ReLU()), False),
    "config_equal_object": (lambda m: setattr(m[0].bn, "eps", float("1e-5")), "hit"),
    "config_changed": (lambda m: setattr(m[0].bn, "eps", 0.5), False),
    "config_int_type": (lambda m: setattr(m[0].bn, "eps", 1), False),
    "config_tuple_equal": (lambda m: setattr(m[0].lin, "extra", 1), "hit"),  # not read
    "config_zero": (lambda m: setattr(m[0].bn, "momentum", 0.0), False),
    "module_deleted": (lambda m: m[2]._modules.pop("bn"), None),  # a KeyError: undecided
    "forward_hook": (lambda m: m[1].register_forward_hook(_double), "hit"),  # the hook batch's
}


@pytest.mark.parametrize("change", PROGRAM_CHANGES)
def test_native_program_answers_as_the_python_guards(change):
    """The program's verdict after each change, and the entry's (program then Python) against
    the same entry's Python guards alone."""
    if not native.wait():
        pytest.skip("the native guard checker could not be built on this machine")
    m, x = _model(), torch.randn(3, 4)
    fast = ember_capture.capture(m, Recorder())
    with native.python_checks():
        slow = ember_capture.capture(m, Recorder())
        slow(x)
    fast(x)
    fast(x)
    (entry,) = fast._ember_state.entries
    (py_entry,) = slow._ember_state.entries
    (program,) = [v for v in entry.__globals__.values() if isinstance(v, native.SourceProgram)]
    L = fast._ember_state.bind(x)
    assert isinstance(program.run(L), tuple)
    assert entry(L, (x,), {}) is not MISS and py_entry(L, (x,), {}) is not MISS
    change_fn, answer = PROGRAM_CHANGES[change]
    try:
        change_fn(m)
        got = program.run(L)
        assert (got if answer in (False, None) else "hit" if isinstance(got, tuple) else got) == answer, got
        assert (entry(L, (x,), {}) is MISS) == (py_entry(L, (x,), {}) is MISS)
    finally:
        _Block.SHIFT = 1.0
        _Block.__dict__.get("extra_repr") and delattr(_Block, "extra_repr")
        m[1]._forward_hooks.clear()


def test_guard_program_takes_only_checks_it_reproduces():
    """guard_program.Program: a check it has no exact op for (another form, or an int check
    against a float constant, which the op's exact type compare would answer differently) leaves
    the source to Python; what it takes answers as the Python checks do."""
    if not native.wait():
        pytest.skip("the native guard checker could not be built on this machine")
    from ember_capture.guard_program import Program
    from ember_capture.guards import Namespace

    ns = Namespace()
    obj = nn.Linear(2, 2)
    obj.scale = 2
    c_int, c_float, c_type = ns.ref(2), ns.ref(2.0), ns.ref(nn.Linear)
    prog = Program(ns)
    assert prog.add("_s0", "L[0]", [f"type(X) is {c_type}", f"id(X) == {id(obj)}", "'forward' not in X.__dict__"])
    assert not prog.add("_s1", "_s0.scale", [f"type(X) is int and X == {c_float}"])  # 2 == 2.0 in Python
    assert not prog.add("_s1", "_s0.scale", ["X > 1"])
    assert not prog.add("_s2", "_s1.real", [])  # read from a source left to Python
    assert prog.add("_s3", "_s0.scale", [f"type(X) is int and X == {c_int}"])
    assert prog.add("_s4", "_s0._parameters['weight']", ["X is not None"]) is False
    assert prog.add("_s4", "_s0._parameters['weight']", [])
    ext = native.extension()
    run = lambda L: ext.run_program(*prog.build(["_s0", "_s3", "_s4"], ext.make_spec), L)  # noqa: E731
    assert run((obj,)) == (obj, 2, obj.weight)
    obj.scale = 2.0
    assert run((obj,)) is False  # `type(X) is int` fails in Python too
    obj.scale = 2
    obj.forward = lambda x: x
    assert run((obj,)) is False
    del obj.forward
    assert run((nn.Linear(2, 2),)) is False  # another object
    del obj._parameters["weight"]
    assert run((obj,)) is None  # a KeyError: undecided, the Python guards decide


def _shadow_with_property(cls):
    cls.scale = property(lambda self: 3.0)  # a data descriptor: wins over the instance dict


def _shadow_with_getattribute(cls):
    def __getattribute__(self, name):
        return 5.0 if name == "scale" else nn.Module.__getattribute__(self, name)
    cls.__getattribute__ = __getattribute__


def _shadow_with_class_value(cls):
    cls.scale = 7.0  # not a descriptor: the instance dict's value still wins


@pytest.mark.parametrize("shadow", [_shadow_with_property, _shadow_with_getattribute, _shadow_with_class_value])
def test_instance_attribute_read_follows_its_class(shadow, checks):
    """Note [instance attribute fast path]: the program reads `self.scale` from the instance
    dict only while no class in the MRO defines `scale` and the class keeps object's
    `__getattribute__`; a property or a `__getattribute__` added to the class after the trace
    takes over the read, as in Python."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = 2.0

        def forward(self, x):
            return self.lin(x) * self.scale

    m, x = Scaled(), torch.randn(3, 4)
    fn = _compiled(m)
    for _ in range(2):
        _call(fn, m, x)
    shadow(Scaled)
    for _ in range(2):
        _call(fn, m, x)
    m.__dict__["scale"] = 11.0
    _call(fn, m, x)
