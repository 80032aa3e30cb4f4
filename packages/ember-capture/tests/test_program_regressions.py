"""Silently wrong results found by the differential harness (tests-integration/test_python_programs.py),
one test per bug class, at the capture level: each failed before its fix with a wrong answer
and no warning, or a crash where eager returns."""
from __future__ import annotations

import copy
import enum
import functools
import itertools
import math
import operator
import typing
import warnings

import torch

import ember_capture
from capture_helpers import Recorder, assert_same, check
from ember_capture import CaptureConfig


def _captured(fn):
    stats = ember_capture.CaptureStats()
    return ember_capture.capture(fn, Recorder(), stats=stats), stats


# -- Note [Plain attribute writes] ---------------------------------------------------------------
class _Positive:
    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, objtype=None):
        return self if obj is None else getattr(obj, self.name)

    def __set__(self, obj, value):
        setattr(obj, self.name, abs(value))


class _Holder:
    size = _Positive()

    def __init__(self, s):
        self.size = s


class _Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])
        object.__setattr__(self, "v", 1)

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value * 10)


def test_write_through_a_data_descriptor_is_read_back_through_it():
    def make(o):
        def f(x, k):
            o.size = o.size - k  # the descriptor stores abs(); the read sees that
            return x * o.size
        return f

    eager_obj, cap_obj = _Holder(-3), _Holder(-3)
    fn, _ = _captured(make(cap_obj))
    for k in (0, 3, 6, 9):
        x = torch.ones(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(x, k)
        assert_same(actual, make(eager_obj)(x, k))
        assert vars(cap_obj) == vars(eager_obj)


def test_write_through_a_class_setattr_is_read_back_through_it():
    def make(o):
        def f(x):
            o.v = o.v + 1
            return x * o.v
        return f

    eager_obj, cap_obj = _Logged(), _Logged()
    fn, _ = _captured(make(cap_obj))
    for _ in range(3):
        x = torch.ones(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(x)
        assert_same(actual, make(eager_obj)(x))
        assert vars(cap_obj) == vars(eager_obj)


# -- non-finite and signed-zero floats -----------------------------------------------------------
def test_non_finite_float_constants_in_results():
    def f(x, a):
        return x * 2, a, (a, -a), float("inf"), -float("inf")

    check(f, (torch.ones(2), 1.5), (torch.ones(2), float("inf")), (torch.ones(2), -float("inf")),
          (torch.ones(2), float("nan")))


def test_float_guard_tells_nan_and_signed_zero_apart():
    def f(x, a):
        return x + 1, -a, math.copysign(1.0, a), a != a

    fn, _ = _captured(f)
    for a in (float("nan"), -0.0, 2.0, 0.0, -0.0, float("nan")):
        x = torch.ones(2)
        expected = f(x, a)
        actual = fn(x, a)
        assert_same(actual[0], expected[0])
        assert repr(actual[1:]) == repr(expected[1:]), (a, actual, expected)


# -- yield from ------------------------------------------------------------------------------------
def test_yield_from_returns_the_subgenerators_value_and_runs_lazily():
    log = []

    def inner(x):
        for i in range(3):
            log.append(i)
            yield x + i
        return "ret", 7

    def outer(x):
        r = yield from inner(x)
        yield r

    def f(x, k):
        g = outer(x)
        return [next(g) for _ in range(k)]

    fn, _ = _captured(f)
    for k in (1, 2, 4, 1):
        log.clear()
        expected = f(torch.ones(1), k)
        eager_log = list(log)
        log.clear()
        assert_same(fn(torch.ones(1), k), expected)
        assert log == eager_log


# -- Note [Container module contents] --------------------------------------------------------------
class _Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(2)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2)})
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2))])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        for name in self.heads:
            x = self.heads[name](x)
        for p in self.ps:
            x = x + p
        return self.layers[-1](x) + self.ps[-1], len(self.layers), len(self.ps)


def test_container_modules_changed_in_place_recompile():
    torch.manual_seed(0)
    eager = _Stack()
    model = copy.deepcopy(eager)
    fn, stats = _captured(model)
    x = torch.randn(3, 2)
    changes = [lambda m: m.layers.append(torch.nn.Linear(2, 2)),
               lambda m: m.heads.update({"b": torch.nn.Linear(2, 2)}),
               lambda m: m.ps.append(torch.nn.Parameter(torch.randn(2))),
               lambda m: m.layers.__delitem__(0)]
    assert_same(fn(x), eager(x))
    for i, change in enumerate(changes):
        for m in (eager, model):
            torch.manual_seed(i)
            change(m)
        assert_same(fn(x), eager(x))
    assert stats.recompiles == len(changes)


# -- Note [Exceptions at a break], Note [Breaks in except blocks] ----------------------------------
def _check_log(fn, f, log, args_list):
    for args in args_list:
        log.clear()
        try:
            expected = ("ok", f(*args))
        except Exception as e:  # noqa: BLE001
            expected = ("raised", repr(e))
        eager_log = list(log)
        log.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                actual = ("ok", fn(*args))
            except Exception as e:  # noqa: BLE001
                actual = ("raised", repr(e))
        assert actual[0] == expected[0], (args, actual, expected)
        if actual[0] == "ok":
            assert_same(actual[1], expected[1])
        else:
            assert actual[1] == expected[1]
        assert log == eager_log, (args, log, eager_log)


@ember_capture.disable
def lib(k):
    """Run natively (a graph break); raises for odd k."""
    if k % 2:
        raise ValueError(f"odd {k}")
    return k


def test_exception_of_a_native_call_at_a_break_reaches_the_frames_handlers():
    log = []

    class Scope:
        def __enter__(self):
            log.append("enter")

        def __exit__(self, et, ev, tb):
            log.append(("exit", et and et.__name__))

    def f(x, k):
        y = x * 2
        with Scope():
            try:
                v = lib(k)  # a graph break; natively it raises for odd k
            except ValueError as e:
                log.append(e.args[0])
                v = -1
            finally:
                log.append("finally")
        for i in range(2):
            try:
                y = y + lib(k + i)
            except ValueError:
                continue
        return y + v

    fn, _ = _captured(f)
    _check_log(fn, f, log, [(torch.ones(2), k) for k in (0, 1, 2, 3, 1)])


def test_bare_raise_after_a_break_in_an_except_block():
    log = []

    def f(x, k):
        y = x * 2
        try:
            v = lib(k)
        except ValueError as e:
            log.append(lib(k - 1))  # a break inside the except block
            if k > 2:
                raise
            v = len(e.args)
        return y + v

    fn, _ = _captured(f)
    _check_log(fn, f, log, [(torch.ones(2), k) for k in (0, 1, 3, 2)])


def test_constant_arithmetic_errors_are_the_users_exceptions():
    def f(x, a, b):
        try:
            q = a / b
        except ZeroDivisionError:
            q = -1.0
        try:
            s = 1 << b - 2
        except ValueError:
            s = 0
        return x * q + s

    fn, stats = _captured(f)
    for a, b in ((1, 2), (1, 0), (3, 1), (2, 4)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no internal error, no fallback
            assert_same(fn(torch.ones(2), a, b), f(torch.ones(2), a, b))
    assert not stats.fallbacks


# -- min/max of a symbolic int and a float -------------------------------------------------------
def test_min_max_of_a_symbolic_int_and_a_float_return_the_argument():
    def f(x, n):
        return x[:n] * 2, min(n, 4.5), max(n, 4.5), min(n, 4), max(2.5, n, 3.5)

    fn, _ = _captured(f)
    for n in (3, 4, 5, 6, 2):  # the second call makes n symbolic
        x = torch.arange(8.0)
        expected, actual = f(x, n), fn(x, n)
        assert_same(actual[0], expected[0])
        assert [(type(v), v) for v in actual[1:]] == [(type(v), v) for v in expected[1:]], n


# -- class attributes through type(self); Note [User operators] -----------------------------------
def test_class_attribute_through_type_of_self_is_guarded():
    class Layer(torch.nn.Module):
        count = 0

        def forward(self, x):
            type(self).count += 1
            return x + type(self).count

    fn, _ = _captured(Layer())
    for expected_count in (1, 2, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(torch.zeros(1))
        assert Layer.count == expected_count
        assert_same(out, torch.full((1,), float(expected_count)))


class _Key:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v

    def __hash__(self):
        return hash(self.v)

    def __lt__(self, other):
        return self.v < other.v


def test_user_eq_hash_and_order_are_not_baked_in():
    k1, k2 = _Key(1), _Key(1)

    def f(x):
        return x + 1, k1 == k2, k1 < k2, k2 in {k1: 0}

    fn, _ = _captured(f)
    for v in (1, 0, 2, 1):
        k2.v = v
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.zeros(1))
        assert_same(actual, f(torch.zeros(1)))


def test_builtins_on_user_objects_are_not_baked_in():
    class V:
        def __init__(self, v):
            self.v = v

        def __lt__(self, other):
            return self.v < other.v

        def __str__(self):
            return f"V{self.v}"

    a, b = V(1), V(2)

    def f(x):
        return x * sorted([b, a])[0].v, max(a, b).v, str(b)

    fn, _ = _captured(f)
    for v in (2, 0, 3):
        b.v = v
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.ones(1))
        assert_same(actual, f(torch.ones(1)))


# -- found by CI's checked pass (EMBER_CHECK=1 EMBER_RAISE_INTERNAL=1) over the harnesses ----------
_STRICT = ember_capture.CaptureConfig(raise_internal=True)


def test_invert_and_index_of_a_symbolic_int():
    """`~n` of a dynamic int (torch's SymInt has no `__invert__`: capture raised an internal
    error) and a list indexed out of range by one (the user's IndexError, caught by their
    handler, was an internal error)."""
    def f(x, k):
        try:
            w = [1, 2][k]
        except IndexError:
            w = -1
        return x + w + ~k

    check(f, (torch.randn(2), 0), (torch.randn(2), 1), (torch.randn(2), 2), (torch.randn(2), 3),
          config=_STRICT, fallback_ok=False)


def test_shape_change_of_an_input_in_place_is_a_break():
    """Note [input metadata mutations] (graph.py): the trace changed the placeholder's fake in
    place, so the graph's example_value disagreed with its input (the backend then failed)."""
    def f(a, b):
        b.unsqueeze_(0)
        return a.expand(6, 3) + b

    check(f, (torch.randn(6, 1), torch.tensor(2.0)), (torch.randn(6, 1), torch.tensor(-1.0)),
          breaks=1, config=_STRICT)


# -- found by the second round of harness programs -----------------------------------------------
def test_true_division_of_symbolic_ints_rounds_as_eager():
    """`a / b` of a dynamic int by -3 returned -1/3 * a, printed as that product, which rounds
    differently from the quotient (7 / -3 gave -2.333333333333333)."""
    def f(x, a, b):
        return x + 1, a / b, (a + 1) / 3

    fn, _ = _captured(f)
    for a, b in [(-7, 2), (7, -3), (-8, 3), (11, -3), (13, 7)]:
        actual, expected = fn(torch.ones(2), a, b), f(torch.ones(2), a, b)
        assert_same(actual[0], expected[0])
        assert [(type(v), v) for v in actual[1:]] == [(type(v), v) for v in expected[1:]], (a, b)


def test_isinstance_and_method_lookup_see_bases_assigned_between_calls():
    """isinstance and attribute lookup were guarded on the class dicts along the old MRO only;
    `B.__bases__ = (C,)` changes both answers and the trace was reused."""
    class A:
        def scale(self):
            return 2.0

    class B(A):
        pass

    class C:
        def scale(self):
            return -1.0

    obj = B()

    def f(x):
        return x * obj.scale() + (10 if isinstance(obj, A) else 0) + (100 if issubclass(B, C) else 0)

    fn, _ = _captured(f)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.ones(2)), f(torch.ones(2)))
        B.__bases__ = (C,)


def test_lru_cached_helper_with_constant_arguments_runs_as_eager():
    """A call through functools.lru_cache inlined the wrapped function on every call: its side
    effects ran again on what eager answers from the cache, and a cached mutable result was a
    new object each call."""
    import functools
    calls = []

    @functools.lru_cache(maxsize=None)
    def coef(n):
        calls.append(n)
        return n * 1.5

    @functools.lru_cache(maxsize=None)
    def table(n):
        return [n]

    def f(x, n):
        table(n).append(0)
        return x * coef(n) + coef(n + 1), len(table(n))

    fn, _ = _captured(f)
    expected_calls = []
    for n in (0, 1, 1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.ones(2), n)
        expected_calls += [k for k in (n, n + 1) if k not in expected_calls]
        assert calls == expected_calls, (n, calls)
    assert actual[1] == 2 and table(2) == [2, 0]


def test_float_arithmetic_on_symbolic_ints_rounds_as_eager():
    """Note [symbolic floats]: `n / 3 + 0.5`, `n / 3 * 2`, `k / 0.7` were folded by sympy into
    one rational with decimal-printed constants (2.16666666666667 for 2.166666666666667)."""
    def f(x, k, s):
        n = x.shape[0]
        return x * (n / 3 * 2), n / 3 + 0.5, n / 3 * 2, k / s, n / 7 - n / 11, -(n / 3), math.sqrt(n) / 3

    fn, _ = _captured(f)
    for n, k, s in [(3, 1, 0.1), (5, 2, 0.7), (7, 3, 0.7), (10, 4, -1.3), (11, 5, 0.7)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.ones(n), k, s)
        expected = f(torch.ones(n), k, s)
        assert_same(actual[0], expected[0])
        assert [(type(v), v) for v in actual[1:]] == [(type(v), v) for v in expected[1:]], (n, k, s)


def test_three_argument_pow_of_a_symbolic_int():
    """pow(a, 2, 5) of a dynamic int called operator.pow with three arguments: a TypeError."""
    def f(x, a):
        return x + pow(a, 2, 5), pow(a, 2)

    check(f, (torch.randn(2), 3), (torch.randn(2), 4), (torch.randn(2), 7), config=_STRICT, fallback_ok=False)


def test_dict_and_set_comprehensions_with_a_break_inside():
    """After a break in a dict/set comprehension the dict being built is an input of the resume
    function; MAP_ADD changed its symbolic items without writing them back, and the function
    returned the empty real dict (SET_ADD likewise)."""
    def f(xs):
        d = {i: x.sum().item() for i, x in enumerate(xs)}
        s = {x.max().item() for x in xs}
        return d, s

    fn, _ = _captured(f)
    for n in (2, 3):
        xs = [torch.full((2,), float(i)) for i in range(n)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(xs)
        assert actual == f(xs)


def test_keyword_argument_given_twice_raises_the_users_type_error():
    """f(**a, **b) with a key in both: DICT_MERGE merged them silently, where CPython raises."""
    def g(**k):
        return k

    def f(x, kw):
        try:
            return x + 1, g(**kw, **{"a": 2})
        except TypeError as e:
            return x - 1, str(e)

    fn, _ = _captured(f)
    for kw in ({}, {"a": 1}, {"b": 3}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.zeros(1), kw)
        assert_same(actual, f(torch.zeros(1), kw))


def test_in_place_operators_on_lists_and_sets_change_the_object():
    """`lst *= 2` on an input list made a new list (the caller's was unchanged); `s |= t` on a
    set made a new set (another name for it kept the old items); `lst += range(2)` likewise;
    frozenset(...) was modelled as a set (its type, and `fs |= ...` changed it in place)."""
    def f(x, lst, s):
        lst *= 2
        lst += range(2)
        local = {1, 2}
        alias = local
        local |= {3}
        local -= {1}
        fs = frozenset([1])
        fs_alias = fs
        fs |= {2}
        try:
            s |= {9}
        except TypeError:
            pass
        return x + 1, alias, fs_alias, fs, type(fs)

    fn, _ = _captured(f)
    for n in (1, 2):
        args, expected_args = ([1] * n, {5}), ([1] * n, {5})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.zeros(1), *args)
        expected = f(torch.zeros(1), *expected_args)
        assert_same(actual[0], expected[0])
        assert actual[1:] == expected[1:] and args == expected_args


def test_symbolic_int_from_a_list_is_read_before_the_list_is_written_back():
    """`first = lst[0]; lst.reverse(); return first` with lst's items dynamic: the return value
    was rebuilt as `L['lst'][0]` after the entry had written the reversed list back."""
    def f(x, lst):
        first = lst[0]
        lst.reverse()
        return x * first, first

    fn, _ = _captured(f)
    for i in range(4):
        a, b = [i + 5, 1, 2], [i + 5, 1, 2]
        actual, expected = fn(torch.ones(1), a), f(torch.ones(1), b)
        assert_same(actual, expected)
        assert a == b


def test_vars_of_an_object_sees_attribute_writes_of_the_trace():
    """vars(o) after `o.a = 5` in the trace read the real __dict__, which lacked the write that
    the entry replays after the graph; and a write after vars(o) was read was not in the dict."""
    class O:
        pass

    def make(o):
        def f(x, k):
            o.b = k
            names = sorted(vars(o))
            d = vars(o)
            o.c = k + 1
            return x * len(names), names, sorted(d)
        return f

    eager_obj, cap_obj = O(), O()
    fn, _ = _captured(make(cap_obj))
    for k in (1, 2, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = fn(torch.ones(1), k)
        assert_same(actual, make(eager_obj)(torch.ones(1), k))
        assert vars(cap_obj) == vars(eager_obj)


def test_hooks_registered_after_the_trace_on_a_module_called_inside():
    """A module called inside the compiled function, with no hooks when traced, was guarded by
    identity only: a forward hook (or a backward hook) registered later was silently skipped."""
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x) + 1

    fn, _ = _captured(f)
    x = torch.ones(1, 2)
    assert_same(fn(x), f(x))
    handle = lin.register_forward_hook(lambda mod, args, kwargs, out: out * 2, with_kwargs=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(fn(x), f(x))
    handle.remove()
    grads = []
    lin.register_full_backward_hook(lambda mod, gi, go: grads.append(1))
    xr = torch.ones(1, 2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(xr).sum().backward()
    assert grads == [1]


def test_modulo_of_a_symbolic_int_by_zero_is_pythons_error():
    """`a % b` with a dynamic and b == 0 raised sympy's ZeroDivisionError('Modulo by zero'),
    where Python says 'integer modulo by zero' (the user's except clause saw another message)."""
    def f(x, a, b):
        try:
            m = a % b
        except ZeroDivisionError as e:
            m = str(e)
        return x + 1, m

    fn, _ = _captured(f)
    for a, b in [(5, 0), (-5, 2), (7, 0), (11, -3)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.zeros(1), a, b), f(torch.zeros(1), a, b))


def test_one_tensor_passed_as_two_arguments_after_a_trace_with_two():
    """`a is b` was decided for two distinct tensors and the entry was reused when one tensor
    was passed as both (no guard that the arguments stay distinct)."""
    def f(a, b):
        a.add_(1)
        return b * 2, a is b

    fn, _ = _captured(f)
    assert_same(fn(torch.zeros(2), torch.zeros(2)), f(torch.zeros(2), torch.zeros(2)))
    x, y = torch.zeros(2), torch.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = fn(x, x)
    assert_same(actual, f(y, y))


def test_any_and_all_of_a_generator_stop_at_the_deciding_item():
    """any()/all() unpacked the whole generator first: its later items' side effects ran, where
    Python stops at the first item that decides the answer."""
    log = []

    def check(v, tag):
        log.append(tag)
        return v

    def f(x, a, b):
        r1 = any(check(v > 0, i) for i, v in enumerate([a, b, 1]))
        r2 = all(check(v > 0, -i) for i, v in enumerate([a, b, 1]))
        return x * int(r1) + int(r2)

    fn, _ = _captured(f)
    for a, b in [(0, 1), (1, 0), (2, 3)]:
        log.clear()
        expected, expected_log = f(torch.ones(1), a, b), list(log)
        log.clear()
        assert_same(fn(torch.ones(1), a, b), expected)
        assert log == expected_log, (a, b)


def test_raise_from_and_raise_in_except_set_cause_and_context():
    """`raise E from e` dropped the cause (e2.__cause__ was None) and a raise inside an except
    block had no __context__."""
    class AppError(Exception):
        pass

    def f(x, k):
        try:
            try:
                if k:
                    raise KeyError(k)
            except KeyError as e:
                if k > 1:
                    raise AppError("plain")
                raise AppError("wrapped") from e
        except AppError as e2:
            cause, context = e2.__cause__, e2.__context__
            return x - 1, str(e2), repr(cause), repr(context), e2.__suppress_context__
        return x + 1, None, None, None, None

    fn, _ = _captured(f)
    for k in (0, 1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.zeros(1), k), f(torch.zeros(1), k))


def test_isinstance_of_an_abc_sees_classes_registered_between_calls():
    """isinstance(o, SomeABC) was answered at trace time and reused after SomeABC.register(...)
    changed it."""
    import abc

    class Base(abc.ABC):
        pass

    class Other:
        pass

    obj = Other()

    def f(x):
        return x * (2 if isinstance(obj, Base) else -1)

    fn, _ = _captured(f)
    assert_same(fn(torch.ones(1)), f(torch.ones(1)))
    Base.register(Other)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(fn(torch.ones(1)), f(torch.ones(1)))


def test_exception_made_with_a_list_argument_keeps_it():
    """ValueError("bad", lst) with a list argument became the bare class ValueError: str(e) and
    e.args were empty."""
    def f(x, lst):
        try:
            raise ValueError("bad", lst, x.shape[0])
        except ValueError as e:
            return x + 1, str(e), len(e.args)

    fn, _ = _captured(f)
    for n in (2, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.ones(n), [n, 1]), f(torch.ones(n), [n, 1]))


def test_raising_an_exception_object_from_the_arguments():
    """`raise err` of an argument baked the first call's exception object into the trace: the
    handler's str(e) said the first call's message on every later call."""
    def f(x, err):
        try:
            raise err
        except ValueError as e:
            return x + 1, str(e), e is err

    fn, _ = _captured(f)
    for i in range(3):
        err = ValueError(f"m{i}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.ones(1), err), f(torch.ones(1), err))


# -- third round ---------------------------------------------------------------------------------
class _Mode(enum.Enum):
    A = "a"
    B = "b"


_MISSING = object()


def test_identity_of_real_objects_is_guarded():
    """Note [Identity of real objects]: `m is Mode.A`, `m == Mode.A` (object.__eq__), `m in (...)`
    and a dict lookup keyed by an enum argument, and `d is _MISSING` for a sentinel default,
    were decided on the first call's object with only its type guarded: Mode.B took Mode.A's
    branch."""
    def f(x, m, d=_MISSING):
        return x * 2, [m is _Mode.A, m == _Mode.A, m in (_Mode.A,), {_Mode.A: 1, _Mode.B: 2}[m], d is _MISSING]

    check(f, (torch.ones(2), _Mode.A), (torch.ones(2), _Mode.B), (torch.ones(2), _Mode.B, object()),
          (torch.ones(2), _Mode.A))


def test_lru_cache_helper_runs_again_after_cache_clear():
    """Note [lru_cache]: the cached result was baked into the entry, so after `cache_clear()`
    the helper's side effects (and a new result) never happened again as they do in eager."""
    def make():
        calls = []

        @functools.lru_cache(maxsize=None)
        def table(n):
            calls.append(n)
            return [v * len(calls) for v in range(n)]

        def f(x, n):
            return x * sum(table(n)), table.cache_info().currsize
        return f, table, calls

    (fe, te, ce), (fc, tc, cc) = make(), make()
    fn, _ = _captured(fc)
    for i, n in enumerate((3, 3, 3, 4, 3)):
        if i in (2, 4):
            te.cache_clear()
            tc.cache_clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(torch.ones(2), n), fe(torch.ones(2), n))
        assert cc == ce


def test_symbolic_sizes_rounded_formatted_and_reduced_as_python_does():
    """With dynamic sizes: `round(n, -2)` came back as n (torch's SymInt.__round__ ignores
    ndigits); `"%s" % (n, m)` printed the symbol's name `s1`; and `(2**(10*n) + m) % 1000` was
    rebuilt from sympy's simplification, which dropped the power (Note [untrusted size
    expressions])."""
    def f(x):
        n = x.shape[0]
        huge = (n << 70) // 3 + 2 ** (n * 10)
        return x * 2, round(n * 100 + 50, -2), "%d-%s" % (n, x.shape[1]), huge % 1000, huge

    check(f, torch.ones(2, 3), torch.ones(7, 5), torch.ones(9, 4), config=CaptureConfig(dynamic=True))


def test_size_compared_with_a_float_is_guarded_exactly():
    """`n * 0.1 < 0.3000000000000001` was guarded as sympy solved and printed it, to 15 digits
    (`s0 >= 3.0`): n = 3 (0.30000000000000004, below the bound) passed the guard of n = 4 and
    took its branch. Such a condition is guarded by the sizes' values."""
    def f(x):
        n = x.shape[0]
        if n * 0.1 < 0.3000000000000001:
            return x + 1, n * 0.1 <= 0.30000000000000004
        return x - 1, n * 0.1 <= 0.30000000000000004

    check(f, torch.ones(4), torch.ones(3), torch.ones(5), torch.ones(3), config=CaptureConfig(dynamic=True))


G_VIA_GLOBALS = 0


def test_frame_introspection_answers_for_the_users_frame():
    """Note [Frame introspection]: `globals()` (and `locals()`, `vars()`, `dir()`) ran natively at a
    graph break, in ember's entry function: the write went into ember's namespace and the next
    line's global read raised NameError; `locals()` listed the entry's variables."""
    def f(x, k):
        g = globals()
        g["G_VIA_GLOBALS"] = g.get("G_VIA_GLOBALS", 0) + k
        return x * G_VIA_GLOBALS, "G_VIA_GLOBALS" in g

    def h(x, k):
        a = k * 2
        loc = locals()
        v = vars()
        b = a + 1
        return x * len(loc), sorted(loc), dir(), list(v), b

    global G_VIA_GLOBALS
    for fn in (f, h):
        captured, _ = _captured(fn)
        for k in (1, 2, 3):
            G_VIA_GLOBALS = 0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                actual = captured(torch.ones(2), k)
            G_VIA_GLOBALS = 0
            assert_same(actual, fn(torch.ones(2), k))


def test_python_attribute_of_an_input_tensor_is_read_and_guarded():
    """`getattr(x, "tag", None)` on an input tensor was answered by its fake tensor (no such
    attribute, unguarded): a later tensor carrying `tag` took the first call's branch."""
    def f(x):
        tag = getattr(x, "tag", None)
        return (x if tag is None else x * tag), hasattr(x, "tag")

    fn, _ = _captured(f)
    for tag in (None, 5, 7, None):
        x = torch.ones(2)
        if tag is not None:
            x.tag = tag
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(fn(x), f(x))


def test_module_class_assigned_between_calls():
    """A module is guarded by identity, which `m.__class__ = Other` keeps: the trace of the old
    class's forward was reused."""
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) * 3

    class Other(Head):
        def forward(self, x):
            return -super().forward(x)

    m = Head()
    fn, _ = _captured(m)
    assert_same(fn(torch.ones(2)), m(torch.ones(2)))
    m.__class__ = Other
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(fn(torch.ones(2)), m(torch.ones(2)))


def test_requires_grad_inside_the_function_is_not_a_graph_op():
    """`w.detach().clone().requires_grad_()` was recorded as a graph op: a graph cannot make an
    autograd leaf, and an AOT backend (which decides from the inputs which outputs need grad)
    returned an output without grad, or sent the gradient to `w`. It is a graph break now, as
    `t.requires_grad = True` is; one that changes nothing is no op at all."""
    def f(x, w):
        w2 = w.detach().clone().requires_grad_()
        x.requires_grad_(False)
        y = (x * w2).sum()
        y.backward()
        return y.detach(), w2.grad, w.grad

    rec, stats = check(f, (torch.ones(3), torch.randn(3)), (torch.ones(3), torch.randn(3).requires_grad_()))
    for gm in rec.graphs:
        assert all(n.target != "requires_grad_" for n in gm.graph.nodes), gm.code
    assert any("requires_grad_()" in r.reason for r in stats.breaks)


# -- fourth round: global torch state set by the caller -------------------------------------------
def test_autocast_dtype_entered_by_the_caller_is_guarded():
    """A trace made under the caller's `autocast(dtype=bfloat16)` was reused under
    `autocast(dtype=float16)`: only "any autocast on" was guarded, not the devices and dtypes."""
    def f(x, w):
        y = torch.mm(x, w)
        return y, y.dtype, y.float() * 2

    fn, _ = _captured(f)
    x, w = torch.randn(2, 2), torch.randn(2, 2)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            out, expected = fn(x, w), f(x, w)
        assert out[0].dtype == expected[0].dtype == dtype
        assert_same(out, expected)


# -- Note [Side effects of a user __getattribute__] -----------------------------------------------
class _CountingReads:
    def __init__(self):
        object.__setattr__(self, "reads", 0)
        object.__setattr__(self, "k", 2)

    def __getattribute__(self, name):
        if name == "k":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)


def test_getattribute_that_writes_the_object_runs_once_per_read():
    """A user `__getattribute__` that counts its reads was run at trace time and then by the
    guards, never by the compiled code: the count was 5 after one call (eager: 2). Such a read
    is undone at trace time and is a graph break, run natively once per read."""
    def f(x, o):
        a = o.k
        b = o.k
        return x * a + b, object.__getattribute__(o, "reads")

    fn, stats = _captured(f)
    mine, theirs = _CountingReads(), _CountingReads()
    for _ in range(3):
        assert_same(fn(torch.ones(2), mine), f(torch.ones(2), theirs))
        assert object.__getattribute__(mine, "reads") == object.__getattribute__(theirs, "reads")
    assert any("__getattribute__ changed the object" in r.reason for r in stats.breaks)


class _Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


def test_next_with_a_default_on_a_user_iterator():
    """`next(it, None)` on a user class's iterator returned the default without calling
    `__next__` (only capture's own iterators were modelled): the default is only for an iterator
    known to be exhausted; a user `__next__` is traced (without a default) or a graph break."""
    def f(x, it):
        first = next(it, None)
        second = next(it)
        return x * (first or 0), first, second, it.n

    fn, _ = _captured(f)
    for n in (3, 5, 2):
        assert_same(fn(torch.ones(2), _Countdown(n)), f(torch.ones(2), _Countdown(n)))
    try:
        f(torch.ones(2), _Countdown(1))
    except StopIteration:
        pass
    else:
        raise AssertionError("eager raises")
    try:
        fn(torch.ones(2), _Countdown(1))
    except StopIteration:
        pass
    else:
        raise AssertionError("compiled raises too")


# -- Note [Tensor state outside the guards] --------------------------------------------------------
def test_tensor_state_outside_the_guards_is_read_and_guarded():
    """`x.storage_offset()`, `x.is_conj()`, `x.is_neg()`, `x.is_inference()`, `x.is_shared()`
    and `x.is_leaf` of an input were answered by the first call's fake and reused for a tensor
    equal in every guarded property (dtype, sizes, strides, requires_grad) but not in this."""
    base = torch.randn(8)
    c = torch.randn(3, dtype=torch.complex64)
    with torch.inference_mode():
        inf = torch.ones(2)
    leaf = torch.ones(2, requires_grad=True)
    cases = [
        (lambda x: (x + 1, x.storage_offset(), x[1:].storage_offset()), [base[:4], base[2:6], base[4:]]),
        (lambda x: (x * 2, x.is_conj(), x.is_neg(), torch.is_conj(x), x[1:].is_conj()),
         [c, c.conj(), c._neg_view()]),
        (lambda x: (x + 1, x.is_inference(), torch.is_inference(x)), [torch.ones(2), inf]),
        (lambda x: (x + 1, x.is_shared()), [torch.ones(2), torch.ones(2).share_memory_()]),
        (lambda x: (x * 1, x.is_leaf), [leaf, leaf * 1]),
    ]
    for f, inputs in cases:
        fn, _ = _captured(f)
        for x in inputs + inputs[::-1]:
            assert_same(fn(x), f(x))

    def made_non_leaf(x):  # in the trace: the fake answers, the input's entry state is guarded
        a = x.is_leaf
        x.mul_(leaf)
        return a, x.is_leaf, x.detach()

    fn, _ = _captured(made_non_leaf)
    for _ in range(2):
        assert_same(fn(torch.ones(2)), made_non_leaf(torch.ones(2)))


def test_inference_mode_is_global_state():
    """A trace made under inference mode was reused under no_grad (grad mode off in both), where
    the tensors it makes are not inference tensors."""
    def f(x):
        y = x * 2
        return y, y.is_inference()

    fn, _ = _captured(f)
    for ctx in (torch.inference_mode, torch.no_grad, torch.inference_mode):
        with ctx():
            assert_same(fn(torch.ones(2)), f(torch.ones(2)))


# -- item_equals: `in`, index() and count() match items by equality ------------------------------
class _ByValue:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _ByValue) and self.v == other.v

    __hash__ = object.__hash__


class _Plain:
    pass


def test_membership_index_count_use_the_items_equality():
    """`a in [b]`, `(b, c).count(a)` and `lst.index(a)` with user objects whose `__eq__` compares
    values were decided by identity (`a in [b]` was False for two equal objects), or by the
    trace-time objects' values, unguarded."""
    def f(x, a, b, c):
        lst = [b, c]
        r = [a in lst, a in (b,), lst.count(a), (b, c).count(a), [1, 2, 1].index(1, 1)]
        try:
            r.append(lst.index(a))
        except ValueError:
            r.append("not found")
        return x + 1, r

    fn, _ = _captured(f)
    for i in range(4):
        args = (torch.ones(2), _ByValue(i % 2), _ByValue(1), _ByValue(i % 3))
        assert_same(fn(*args), f(*args))
    p, q = _Plain(), _Plain()
    for args in [(p, p, q), (q, p, q), (p, q, p)]:
        assert_same(fn(torch.ones(2), *args), f(torch.ones(2), *args))


def test_view_and_storage_identity_queries_of_inputs():
    """`x._is_view()` of an input was the fake's (never a view) and `x.is_set_to(y)` compared two
    fakes (never one storage): a view input, or one tensor's alias, read False."""
    base = torch.randn(8)
    cases = [
        (lambda x: (x + 1, x._is_view(), x[1:]._is_view()), [(base,), (base[:8],), (base.clone(),)]),
        (lambda x, y: (x + 1, x.is_set_to(y)), [(base, base.clone()), (base, base[:]), (base, base.clone())]),
    ]
    for f, inputs in cases:
        fn, _ = _captured(f)
        for args in inputs:
            assert_same(fn(*args), f(*args))


# -- Note [User iterators] -------------------------------------------------------------------------
class _Steps:
    """An iterator whose `__iter__` returns self and whose `__next__` logs each step."""

    def __init__(self, n, log):
        self.n, self.i, self.log = n, 0, log

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        self.log.append(("next", self.i))
        return self.i


class _StepsBox:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return _Steps(self.n, [])


def test_user_iterator_returning_self_is_traced_item_by_item():
    """`list(it)` of a user class whose `__iter__` returns self recursed until Python's limit
    (`unpack` of `__iter__`'s result asked `__iter__` again), and the frame ran eagerly with the
    reason "recursion too deep". `__next__` is now traced until StopIteration, lazily: a loop's
    body and `__next__` interleave their side effects, and a `break` leaves the object as eager
    does."""
    def listed(x, it):
        return x + sum(list(it)), it.i, tuple(_StepsBox(2)), [v * 2 for v in _StepsBox(3)]

    def loop(x, it):
        out = []
        for v in it:
            it.log.append(("body", v))
            out.append(x * v)
            if v == 2:
                break
        j = iter(it)
        return out, it.i, next(it), j is it, list(it)

    def unpacked(x, n):
        log = []
        a, b, c = _Steps(n, log)
        return x * a + b * c, log

    for f, inputs in ((listed, lambda n: (torch.ones(2), _Steps(n, []))),
                      (loop, lambda n: (torch.ones(2), _Steps(n, []))),
                      (unpacked, lambda n: (torch.ones(2), 3))):
        fn, stats = _captured(f)
        for n in (3, 4, 3):
            args, expected_args = inputs(n), inputs(n)
            assert_same(fn(*args), f(*expected_args))
            assert_same(args, expected_args)
        assert not stats.breaks, stats.breaks


def test_user_iterator_raising_midway():
    """An exception from a user `__next__` is the user's, caught by the traced `except`."""
    class Bad(_Steps):
        def __next__(self):
            if self.i == 1:
                raise ValueError("bad step")
            return super().__next__()

    def f(x, it):
        try:
            return x + sum(it)
        except ValueError as e:
            return x - 1, str(e), it.i

    fn, stats = _captured(f)
    assert_same(fn(torch.ones(2), Bad(3, [])), f(torch.ones(2), Bad(3, [])))
    assert not stats.breaks, stats.breaks


# -- Note [lazy iterators]: consumers that stop early ----------------------------------------------
def _counted(n, log):
    for i in range(n):
        log.append(i)
        yield i


def test_consumers_that_stop_early_take_only_what_they_use():
    """`itertools.islice(gen, k)`, `v in gen` and `zip(...)` over a user iterator drained the
    whole iterator at trace time: the generator's side effects ran for every item, and a later
    `next(gen, default)` found it exhausted. They now take items one at a time as Python does
    (islice as CPython's islice_next; `in` stops at the first match; zip stops at the first
    exhausted argument, after asking the ones before it)."""
    def f(x, n):
        log = []
        a = list(itertools.islice(_counted(n, log), 2))
        b = list(itertools.islice(_counted(n, log), 1, 6, 2))
        c = 2 in _counted(n, log)
        g = _counted(n, log)
        d = list(itertools.islice(g, 3))
        e = next(g, "end")
        pairs = list(zip(_Steps(n, log), _Steps(1, log)))
        first = any(v > 0 for v in _Steps(n, log))
        return x + len(a), a, b, c, d, e, pairs, first, log

    fn, stats = _captured(f)
    for n in (0, 3, 4, 8):
        assert_same(fn(torch.ones(1), n), f(torch.ones(1), n))
    assert not stats.breaks, stats.breaks


def test_in_calls_a_user_contains_of_an_input():
    """`k in s` with `s` a user object from the inputs iterated over `__iter__` and never called
    its `__contains__` (the rule for objects read from the inputs went straight to iteration)."""
    class Evens:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __contains__(self, k):
            return k % 2 == 0

    def f(x, s, k):
        return x + (k in s), k in s, k not in s

    fn, _ = _captured(f)
    for k in (4, 100, 3):
        assert_same(fn(torch.ones(1), Evens(6), k), f(torch.ones(1), Evens(6), k))


def test_out_argument_result_is_the_out_tensor():
    """`r = torch.add(a, b, out=buf)` returned a new tensor in the trace: `r is buf` was False
    (the identity of an in-place result was kept for the first argument only). A result that is
    one of the arguments (`out=`, an `out=(a, b)` tuple) keeps that argument's identity."""
    def f(x, y, buf, a, b):
        r = torch.add(x, y, out=buf)
        m = torch.max(x.view(1, -1), 1, out=(a, b))
        return r is buf, m[0] is a, m.indices is b, id(r) == id(buf), buf * 1, a * 1, b * 1

    fn, _ = _captured(f)

    def inputs():
        return torch.randn(3), torch.randn(3), torch.zeros(3), torch.zeros(1), torch.zeros(1, dtype=torch.long)
    torch.manual_seed(0)
    actual = fn(*inputs())
    torch.manual_seed(0)
    assert_same(actual, f(*inputs()))


class _Trail:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __reversed__(self):
        return iter(["rev"] + self.items[::-1])

    def __len__(self):
        return len(self.items)


class _Tens:
    """A sequence by __len__ and __getitem__, whose __iter__ says something else."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10

    def __iter__(self):
        return iter(["x"])


class _Table:
    """A mapping by keys() and __getitem__ (not a dict), whose __iter__ says something else."""

    def __init__(self, n):
        self.n = n

    def keys(self):
        return [f"k{i}" for i in range(self.n)]

    def __getitem__(self, k):
        return int(k[1:]) * 10

    def __iter__(self):
        return iter(["not", "these"])


def test_reversed_and_dict_use_the_protocols_python_uses():
    """`reversed(obj)` iterated `obj.__iter__` and reversed it: a user `__reversed__`, or the
    sequence protocol (`__len__`, `__getitem__`) that Python's reversed() uses, was ignored.
    `dict(obj)` of an object with `keys()` unpacked its iteration as pairs (an internal error).
    Both now ask what Python asks."""
    def f(x, trail, seq, table):
        return (x + 1, list(reversed(trail)), list(reversed(seq)), dict(table), list(reversed(_Tens(2))),
                dict(_Table(2)))

    fn, stats = _captured(f)
    for n in (2, 3, 0):
        assert_same(fn(torch.ones(1), _Trail(list(range(n))), _Tens(n), _Table(n)),
                    f(torch.ones(1), _Trail(list(range(n))), _Tens(n), _Table(n)))
    assert not stats.breaks, stats.breaks


def test_itertools_over_generators_make_items_when_asked():
    """`itertools.chain`, `chain.from_iterable`, `starmap`, `pairwise`, `zip_longest` and
    `accumulate` drained their input generators when made: `next(chain(g1, g2))` ran every
    item's side effects of both. Over a generator or user iterator they now make one item per
    `next()`, as their C implementations do."""
    def f(x, n):
        log = []

        def gen(tag):
            for i in range(n):
                log.append((tag, i))
                yield i
        c = itertools.chain(gen("c1"), gen("c2"))
        out = [next(c, None), next(itertools.chain.from_iterable([gen("f1"), gen("f2")]), None),
               next(itertools.starmap(lambda a, b: a + b, zip(gen("s1"), gen("s2"))), None),
               next(itertools.pairwise(gen("pw")), None), next(itertools.zip_longest(gen("zl"), [1]), None),
               next(itertools.accumulate(gen("ac")), None), list(itertools.zip_longest(gen("z2"), _Steps(1, log)))]
        return x + 1, out, log

    fn, stats = _captured(f)
    for n in (0, 1, 3):
        assert_same(fn(torch.ones(1), n), f(torch.ones(1), n))
    assert not stats.breaks, stats.breaks


# -- sixth round ----------------------------------------------------------------------------------
def test_staticmethod_and_classmethod_read_from_a_class_are_guarded():
    """`Ops.act(x)` with `act` a staticmethod (or a classmethod) of a class read from a global
    was bound at trace time with no guard: `Ops.act = staticmethod(...)` between calls reused
    the old function. The class dicts that decided the lookup are guarded now."""
    class Ops:
        @staticmethod
        def act(x):
            return x + 1

        @classmethod
        def scale(cls, x):
            return x * 2

    def f(x):
        return Ops.act(x), Ops.scale(x)

    fn, _ = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    Ops.act = staticmethod(lambda x: x * 0)
    assert_same(fn(x), f(x))
    Ops.scale = classmethod(lambda cls, x: x - 5)
    assert_same(fn(x), f(x))


def test_operator_getters_read_their_argument_on_every_call():
    """`operator.attrgetter("inner.v")(o)` ran at trace time (a function of a pure module) and
    its answer was a constant with no guard: after `o.inner.v = 5` the first call's value came
    back. attrgetter, itemgetter and methodcaller are modelled as the reads they make (Note
    [operator getters]); made in the trace with constant arguments they are no graph break."""
    class Inner:
        v = 2

    class Outer:
        def __init__(self):
            self.inner = Inner()

    o, table = Outer(), {"k": 1, "j": 2}
    get = operator.attrgetter("inner.v")

    def f(x):
        pair = operator.itemgetter("k", "j")(table)
        return x * get(o), pair, operator.methodcaller("get", "j", 0)(table), operator.attrgetter("inner")(o).v

    fn, stats = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    o.inner.v = 5
    table["j"] = 7
    assert_same(fn(x), f(x))
    o.inner = Inner()
    assert_same(fn(x), f(x))
    assert not stats.breaks, stats.breaks


def test_pure_module_functions_refuse_user_objects():
    """A function of a pure module (`operator`, `math`, `typing`) without a model was computed at
    trace time on its arguments' values: on a user object it may read state no guard checks. Such
    a call is a graph break now, which runs it on each call."""
    class Hint:
        n = 3

        def __length_hint__(self):
            return self.n

    h = Hint()

    def f(x):
        return x * operator.length_hint(h, 1)

    fn, _ = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    h.n = 8
    assert_same(fn(x), f(x))


def test_break_inside_a_loop_over_a_user_iterator_keeps_the_graphs():
    """A graph break inside `for v in it:` over a user iterator (a Python `__next__`) ran the
    whole frame eagerly: the iterator could not be rebuilt at the break. It is the object
    itself, in the state the trace left it (Note [User iterators]): the graph before the loop
    and the loop body's graphs are kept, `__next__` runs once per item as in eager."""
    def f(x, it, n):
        x = x * 2
        for v in it:
            x = x + v
            if x.sum() > 3:  # data-dependent: a break inside the loop
                x = x - 1
        for w in _Steps(n, it.log):  # made in the frame
            x = x * w
            print("w", w)
        return x.cos(), it.i, list(it.log)

    stats = ember_capture.CaptureStats()
    fn = ember_capture.capture(f, Recorder(), stats=stats)
    for v, n in [(0.5, 3), (3.0, 2), (-2.0, 4), (1.0, 0)]:
        assert_same(fn(torch.full((2,), v), _Steps(n, []), n), f(torch.full((2,), v), _Steps(n, []), n))
    assert not stats.fallbacks, stats.fallbacks
    assert stats.graphs and not any("cannot resume" in str(b) for b in stats.breaks), stats.breaks


def test_takewhile_dropwhile_compress_tee_consume_as_eager():
    """`itertools.takewhile`, `dropwhile`, `compress` and `tee` over a generator were graph
    breaks. They make one item per `next()` over a generator, a user iterator or with a Python
    predicate, so the input's and the predicate's side effects happen as eager's do."""
    def f(x, n):
        log = []

        def gen(tag):
            for i in range(n):
                log.append((tag, i))
                yield i

        def small(v):
            log.append(("p", v))
            return v < 2
        tw = itertools.takewhile(small, gen("t"))
        first = next(tw, None)
        dropped = list(itertools.dropwhile(lambda v: v < 1, gen("d")))
        picked = next(itertools.compress(gen("c"), _Steps(n, log)), None)
        t1, t2 = itertools.tee(gen("e"))
        teed = [next(t1, None), next(t1, None), next(t2, None), list(t2)]
        on_list = next(itertools.takewhile(small, [0, 1, 2]))
        return x + 1, first, dropped, picked, teed, on_list, list(tw), log

    fn, stats = _captured(f)
    for n in (0, 1, 3, 4):
        assert_same(fn(torch.ones(1), n), f(torch.ones(1), n))
    assert not stats.breaks, stats.breaks


def test_break_inside_loops_over_enumerate_zip_map_filter_of_user_iterators():
    """`for k, v in enumerate(it)` (zip, map, filter) over a user iterator, with a graph break in
    the body, ran the frame eagerly: the lazy builtin could not be rebuilt. It is the same
    builtin again over the rebuilt inputs (enumerate from its next count), which only
    `next()` advances: no second `__iter__`, each `__next__` once, as eager."""
    def f(x, n):
        log = []
        y = x.sin()
        for k, v in enumerate(_Steps(n, log), 5):
            y = y + k * v
            print("kv", k, v)
        for a, b in zip(_Steps(n, log), [10, 20, 30]):
            y = y + a * b
            print("ab", a, b)
        for m in map(lambda q: q * 3, _Steps(n, log)):
            y = y - m
            print("m", m)
        for m in filter(lambda q: q % 2, _Steps(n, log)):
            y = y - m
            print("f", m)
        return y, log

    stats = ember_capture.CaptureStats()
    fn = ember_capture.capture(f, Recorder(), stats=stats)
    for n in (3, 0, 4):
        assert_same(fn(torch.ones(2), n), f(torch.ones(2), n))
    assert not stats.fallbacks, stats.fallbacks
    assert not any("cannot resume" in str(b) for b in stats.breaks), stats.breaks


def test_callable_is_guarded_on_the_class_call():
    """`callable(obj)` of a real object was answered at trace time with no guard: a class given
    (or losing) `__call__` between calls reused the old branch. An object made in the trace
    was never callable. Both now look `__call__` up along the class's MRO, guarded."""
    class Obj:
        pass

    class Fn:
        def __call__(self, x):
            return x * 3

    obj = Obj()

    def f(x):
        made = Fn()
        return (obj(x) if callable(obj) else x - 1), callable(made)

    fn, _ = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    Obj.__call__ = lambda self, x: x * 4
    assert_same(fn(x), f(x))
    del Obj.__call__
    assert_same(fn(x), f(x))


def test_isinstance_against_a_runtime_checkable_protocol_reads_the_object():
    """`isinstance(obj, Proto)` for a runtime-checkable Protocol was answered from the type only
    and baked in: an attribute added to the object between calls was not seen. A metaclass whose
    `__instancecheck__` reads the object makes the check a graph break (run natively)."""
    @typing.runtime_checkable
    class HasScale(typing.Protocol):
        def scale(self):
            ...

    class Obj:
        pass

    obj = Obj()

    def f(x):
        return x * obj.scale() if isinstance(obj, HasScale) else x

    fn, _ = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    obj.scale = lambda: 3
    assert_same(fn(x), f(x))
    del obj.scale
    assert_same(fn(x), f(x))


def test_inlined_function_guarded_on_its_code_and_defaults():
    """An inlined function was guarded by identity only: `helper.__code__ = other.__code__`
    (or a `__defaults__` tuple of another length) between calls changes the same object in
    place, and the old body ran. Its code object and the shape of its defaults are guarded."""
    def helper(x):
        return x + 1

    def other(x, k=3):
        return x * k

    def f(x):
        return helper(x)

    fn, _ = _captured(f)
    x = torch.ones(2)
    assert_same(fn(x), f(x))
    helper.__code__ = other.__code__
    helper.__defaults__ = (3,)
    assert_same(fn(x), f(x))
    helper.__defaults__ = (5,)
    assert_same(fn(x), f(x))
