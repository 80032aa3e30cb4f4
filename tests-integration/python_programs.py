"""Small ordinary Python programs for the differential harness (test_python_programs.py).

This module is loaded twice per program, as two fresh module objects: one world runs eagerly,
the other through `ember.compile`, so globals, classes and closures never leak between them.
Each `p_*` function builds a program and returns a `P`: the function, the inputs of call `i`,
an optional `mutate(i)` run between calls (the external state changes that guards must see)
and an optional `state()` snapshot compared after every call.
"""
from __future__ import annotations

import abc
import bisect
import collections
import contextlib
import dataclasses
import enum
import functools
import heapq
import itertools
import math
import operator
import random
import time
import types
import typing
import weakref

import torch


@dataclasses.dataclass
class P:
    fn: typing.Callable
    inputs: typing.Callable[[int], tuple]
    mutate: typing.Callable[[int], None] | None = None
    state: typing.Callable[[], object] | None = None
    calls: int = 4
    aot: bool = False  # also run with backend="aot_eager"
    dynamic: bool = False  # also run with dynamic=True (every int and size symbolic from the first call)
    around: typing.Callable[[int], typing.ContextManager] | None = None  # the caller's state around call i


class KW(dict):
    """Keyword arguments, given as the last item of an input tuple."""


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


# -- closures, nonlocal, globals ----------------------------------------------------------------
G_SCALE = 2
G_LIST = [1, 2, 3]
G_COUNT = 0
G_FLAG = True


def p_global_read():
    def f(x):
        return x * G_SCALE + len(G_LIST)

    def mutate(i):
        global G_SCALE
        G_SCALE = [3, 3.5, -1, 0][i]
        G_LIST.append(i)
    return P(f, lambda i: (t(3),), mutate, aot=True)


def p_global_write():
    def f(x):
        global G_COUNT
        G_COUNT += 1
        if G_FLAG:
            return x + G_COUNT
        return x - G_COUNT

    def mutate(i):
        global G_FLAG
        G_FLAG = not G_FLAG
    return P(f, lambda i: (t(3),), mutate, lambda: (G_COUNT, G_FLAG))


def p_closure_cells():
    scale = 1.0
    hist = []

    def f(x):
        nonlocal scale
        scale = scale * 2
        hist.append(scale)
        return x * scale

    def mutate(i):
        nonlocal scale
        scale = [0.5, 3, -1, 7][i]
    return P(f, lambda i: (t(2),), mutate, lambda: (scale, list(hist)), aot=True)


def p_closure_counter_factory():
    def make():
        n = 0

        def inc(k):
            nonlocal n
            n += k
            return n
        return inc

    def f(x, k):
        inc = make()
        a = inc(k)
        b = inc(k)
        return x + a * b, a, b
    return P(f, lambda i: (t(2), i - 1))


def p_closure_rebind_captured_function():
    ops = {"fn": torch.sin}

    def f(x):
        g = ops["fn"]
        return g(x)

    def mutate(i):
        ops["fn"] = [torch.cos, torch.tanh, torch.sin, torch.exp][i]
    return P(f, lambda i: (t(3),), mutate)


# -- generators ---------------------------------------------------------------------------------
def p_generators():
    log = []

    def gen(x, n):
        for i in range(n):
            log.append(i)
            yield x * i

    def outer(x, n):
        yield x
        yield from gen(x, n)
        return "done"

    def f(x, n):
        return sum(outer(x, n)), list(gen(x, 2))[1]
    return P(f, lambda i: (t(2), i + 1), state=lambda: list(log))


def p_generator_partial_consumption():
    log = []

    def gen(x):
        for i in range(5):
            log.append(i)
            yield x + i

    def f(x, k):
        g = gen(x)
        out = [next(g) for _ in range(k)]
        return out
    return P(f, lambda i: (t(2), i % 3 + 1), state=lambda: list(log))


def p_yield_from_return_value():
    def inner(x):
        yield x
        return x.sum().shape, 7

    def outer(x):
        r = yield from inner(x)
        yield r

    def f(x):
        return list(outer(x))
    return P(f, lambda i: (t(2),))


# -- comprehensions -----------------------------------------------------------------------------
def p_comprehensions(aot=True):
    def f(xs, k):
        a = [x * k for x in xs if x.shape[0] > 1]
        b = {f"k{i}": x.sum() for i, x in enumerate(xs)}
        c = {len(x.shape) + k for x in xs}
        d = sum(x.mean() for x in xs)
        e = [[i * j for j in range(k)] for i in range(3)]
        return a, b, sorted(c), d, e
    return P(f, lambda i: ([t(2), t(1), t(3)][: i + 1], i + 1), aot=True)


def p_comprehension_closure_late_binding():
    def f(x, n):
        fns = [lambda y: y * i for i in range(n)]
        return [g(x) for g in fns]
    return P(f, lambda i: (t(2), i + 1))


# -- exceptions ---------------------------------------------------------------------------------
class MyError(Exception):
    pass


def p_try_except_finally_else():
    log = []

    def risky(x, k):
        if k % 2:
            raise MyError(f"odd {k}")
        return x * k

    def f(x, k):
        try:
            y = risky(x, k)
        except MyError as e:
            log.append(str(e))
            y = x - 1
        else:
            log.append("else")
            y = y + 1
        finally:
            log.append("finally")
        return y
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_try_finally_return_override():
    def f(x, k):
        try:
            if k:
                return x + 1
            x = x * 2
        finally:
            if k > 1:
                return x - 100
        return x
    return P(f, lambda i: (t(2), i % 3))


def p_exception_builtin_raised():
    def f(x, d, k):
        try:
            v = d[k]
        except KeyError:
            v = -1
        try:
            w = [1, 2][k]
        except IndexError as e:
            w = len(str(e))
        try:
            z = 1 / (k - 1)
        except ZeroDivisionError:
            z = 0.0
        return x + v + w + z
    return P(f, lambda i: (t(2), {0: 5, 2: 7}, i))


def p_exception_escapes():
    def f(x, k):
        y = x * 2
        if k > 1:
            raise ValueError(f"bad {k}")
        return y
    return P(f, lambda i: (t(2), i))


def p_nested_try_reraise():
    log = []

    def f(x, k):
        try:
            try:
                if k == 1:
                    raise KeyError("a")
                if k == 2:
                    raise TypeError("b")
                x = x + 1
            except KeyError:
                log.append("inner")
                raise
            finally:
                log.append("fin")
        except (KeyError, TypeError) as e:
            log.append(type(e).__name__)
            return x * 0
        return x
    return P(f, lambda i: (t(2), i % 3), state=lambda: list(log))


# -- with statements ----------------------------------------------------------------------------
class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", et.__name__ if et else None))
        return et is KeyError  # swallow KeyError


def p_with_custom_cm():
    rec = Recorder()

    def f(x, k):
        with rec as r:
            r.log.append("body")
            if k == 2:
                raise KeyError(k)
            x = x + k
        return x
    return P(f, lambda i: (t(2), i), state=lambda: list(rec.log))


def p_with_contextlib():
    log = []

    @contextlib.contextmanager
    def scope(name):
        log.append(("in", name))
        try:
            yield name.upper()
        finally:
            log.append(("out", name))

    def f(x, name):
        with scope(name) as n:
            y = x * len(n)
        with contextlib.suppress(ZeroDivisionError):
            y = y + 1 / (len(name) - 2)
        return y
    return P(f, lambda i: (t(2), ["ab", "abc", "x", "abcd"][i]), state=lambda: list(log))


def p_no_grad_blocks():
    def f(x, w):
        with torch.no_grad():
            a = x * w
            with torch.enable_grad():
                b = x * w
        c = x * w
        return a, b, c, a.requires_grad, b.requires_grad, torch.is_grad_enabled()
    return P(f, lambda i: (t(3), t(3).requires_grad_(i % 2 == 0)))


# -- arguments ----------------------------------------------------------------------------------
def p_args_kwargs_forwarding():
    def inner(a, b=2, *rest, c, d=4, **kw):
        return a * b + sum(rest) + c * d + sum(kw.values()), sorted(kw)

    def f(x, *args, **kwargs):
        return inner(x, *args, c=1, **kwargs)
    inputs = [
        lambda: (t(2), 3, KW(d=5)),
        lambda: (t(2), KW(e=1, f=2)),
        lambda: (t(2), 1, 2, 3, KW(g=10)),
        lambda: (t(2), 3, KW(d=5)),
    ]
    return P(f, lambda i: inputs[i]())


def p_mutable_default():
    def f(x, acc=[]):  # noqa: B006
        acc.append(x.shape[0])
        return x * len(acc), list(acc)
    return P(f, lambda i: (t(i + 1),), state=lambda: list(f.__defaults__[0]))


def p_kwonly_defaults_changed():
    def g(x, *, scale=2, shift=0.5):
        return x * scale + shift

    def f(x):
        return g(x), g(x, shift=1)

    def mutate(i):
        g.__kwdefaults__ = {"scale": i + 3, "shift": -i}
    return P(f, lambda i: (t(2),), mutate)


def p_default_changed():
    def g(x, k=1):
        return x * k

    def f(x):
        return g(x)

    def mutate(i):
        g.__defaults__ = (i + 10,)
    return P(f, lambda i: (t(2),), mutate)


def p_python_scalars_args(aot=True):
    def f(x, n, r, b, s):
        y = x * n + r
        if b:
            y = y - 1
        if s == "double":
            y = y * 2
        return y, n * 2, r / 2, not b, s + "!"
    vals = [(2, 0.5, True, "double"), (3, 1.5, False, "x"), (2, 0.5, False, "double"),
            (-1, float("inf"), True, "")]
    return P(f, lambda i: (t(2),) + vals[i], aot=True)


def p_tensor_meta_changes(aot=True):
    def f(x):
        return x * 2 + x.shape[-1], x.dim(), x.numel(), str(x.dtype), x.is_contiguous()
    inputs = [lambda: (t(2, 3),), lambda: (t(3, 2).t(),), lambda: (t(4, dtype=torch.float64),),
              lambda: (t(2, 3).requires_grad_(),)]
    return P(f, lambda i: inputs[i](), aot=True)


# -- classes ------------------------------------------------------------------------------------
class Temp:
    unit = "c"

    def __init__(self, v):
        self._v = v

    @property
    def v(self):
        return self._v * (1 if self.unit == "c" else 2)

    @v.setter
    def v(self, val):
        self._v = val

    @classmethod
    def make(cls, v):
        return cls(v + 1)

    @staticmethod
    def twice(x):
        return x * 2


def p_class_property_classmethod():
    obj = Temp(3)

    def f(x):
        o = Temp.make(2)
        o.v = o.v + 1
        return x * obj.v + Temp.twice(o.v)

    def mutate(i):
        if i == 0:
            obj.v = 5
        elif i == 1:
            Temp.unit = "f"
        else:
            obj._v = -1
    return P(f, lambda i: (t(2),), mutate, lambda: (obj._v, Temp.unit))


class Positive:
    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.name)

    def __set__(self, obj, value):
        setattr(obj, self.name, abs(value))


class WithDescr:
    size = Positive()

    def __init__(self, s):
        self.size = s


def p_descriptor():
    o = WithDescr(-3)

    def f(x, k):
        o.size = o.size - k
        return x * o.size

    return P(f, lambda i: (t(2), i * 3), state=lambda: o.__dict__.copy())


class Lazy:
    # A pure __getattr__: guards ask hasattr() again on each call, so an impure one would run
    # more often than in eager (as under torch.compile).
    def __getattr__(self, name):
        if name.startswith("w"):
            return len(name)
        raise AttributeError(name)


def p_getattr_hook():
    o = Lazy()

    def f(x):
        y = x * o.www + getattr(o, "nope", 0.5)
        return y, hasattr(o, "zz"), hasattr(o, "w")

    def mutate(i):
        o.www = i  # an instance attribute now shadows __getattr__
    return P(f, lambda i: (t(2),), mutate, lambda: vars(o).copy())


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


def p_slots():
    s = Slotted(2)

    def f(x):
        if hasattr(s, "b"):
            r = x * s.a + s.b
        else:
            r = x * s.a
        s.a += 1
        return r

    def mutate(i):
        if i == 1:
            s.b = 10
        if i == 2:
            del s.b
    return P(f, lambda i: (t(2),), mutate, lambda: (s.a, getattr(s, "b", None)))


class Base:
    scale = 1

    def f(self, x):
        return x * self.scale

    def g(self, x):
        return self.f(x) + 1


class Child(Base):
    scale = 3

    def f(self, x):
        return super().f(x) - 1


def p_inheritance_super():
    c = Child()

    def f(x):
        return c.g(x), Base.g(c, x)

    def mutate(i):
        if i == 0:
            Child.scale = 5
        if i == 1:
            c.scale = -2
        if i == 2:
            Base.f = lambda self, x: x * 100
    return P(f, lambda i: (t(2),), mutate)


@dataclasses.dataclass
class Cfg:
    n: int = 2
    scale: float = 1.5
    tags: list = dataclasses.field(default_factory=list)


class Pt(typing.NamedTuple):
    x: int
    y: int = 0


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def p_dataclass_namedtuple_enum():
    cfg = Cfg()

    def f(x, p, c):
        y = x * cfg.n * cfg.scale
        cfg.tags.append(p.x)
        q = p._replace(y=p.y + 1)
        d = dataclasses.replace(cfg, n=cfg.n + 1)
        if c is Color.RED:
            y = y + 1
        elif c == Color.GREEN:
            y = y - 1
        return y, q, d.n, c.name, c.value, Pt(*q) == q, dataclasses.asdict(d)["n"]

    def mutate(i):
        cfg.n = i
        cfg.scale = -cfg.scale
    return P(f, lambda i: (t(2), Pt(i, i * 2), [Color.RED, Color.GREEN][i % 2]), mutate,
             lambda: dataclasses.asdict(cfg))


def p_match_statement():
    def f(x, cmd):
        match cmd:
            case ("scale", k):
                return x * k
            case {"shift": s}:
                return x + s
            case [a, b, *rest]:
                return x * a + b + len(rest)
            case Pt(x=0):
                return x * 0
            case int(n) if n > 3:
                return x - n
            case _:
                return x
    cmds = [("scale", 3), {"shift": 2.0}, [1, 2, 3, 4], Pt(0, 1), 5, 2]
    return P(f, lambda i: (t(2), cmds[i]), calls=6)


def p_walrus_chained():
    def f(x, n):
        if (m := n * 2) > 3:
            x = x + m
        ok = 0 < n <= 2 < m
        ys = [y for v in range(n) if (y := v * v) % 2 == 0]
        return x, ok, ys, m
    return P(f, lambda i: (t(2), i))


def p_is_identity():
    sentinel = object()
    cache = {}

    def f(x, key=sentinel):
        if key is sentinel:
            return x * 2
        if key is None:
            return x - 1
        if cache.get(key) is not None:
            return x + cache[key]
        cache[key] = len(cache)
        return x

    inputs = [lambda: (t(2),), lambda: (t(2), None), lambda: (t(2), "a"), lambda: (t(2), "a"),
              lambda: (t(2), "b")]
    return P(f, lambda i: inputs[i](), state=lambda: dict(cache), calls=5)


# -- numbers ------------------------------------------------------------------------------------
def p_int_arith_edges():
    def f(x, a, b):
        r = (a // b, a % b, divmod(a, b), a ** 2, 2 ** -b if b else 0, a / b, round(a / b),
             round(2.5), round(-0.5), round(a / b, 1), abs(a), -a // 3, -a % 3, True + True,
             a * True, 2 ** 100 + a, (2 ** 64) * a, int(-7 / 2), math.floor(-3.5), a << 65,
             a.bit_length(), (-a) >> 1, a ^ b, ~a)
        return x + r[0], r
    vals = [(7, 2), (-7, 2), (7, -3), (-8, -3), (3, 5)]
    return P(f, lambda i: (t(2),) + vals[i], calls=5)


def p_float_edges():
    def f(x, a):
        inf = float("inf")
        nan = float("nan")
        r = (a < inf, a > -inf, nan == nan, nan != nan, a == a, math.isnan(a * 0),
             max(a, 1.5), min(a, -inf), a // 0.5 if a == a else 0.0, math.copysign(1.0, a),
             float(int(a)) if math.isfinite(a) else -1.0, 0.1 + 0.2 == 0.3, a % -2.0)
        return x * (1 if r[0] else 2), r
    return P(f, lambda i: (t(2), [1.25, -3.75, float("inf"), -0.0][i]))


def p_int_float_scalar_tensor_mix(aot=True):
    def f(x, n):
        y = x * (n // 2) + (n % 3) / 2 + n ** -1 + 2 ** n
        z = y / n if n else y
        return z, n // 2, -n // 2
    return P(f, lambda i: (t(3), [4, 5, -3, 4][i]), aot=True)


# -- strings ------------------------------------------------------------------------------------
def p_strings_fstring_keys():
    def f(x, names, k):
        d = {}
        for i, n in enumerate(names):
            d[f"{n}_{i}"] = x * i
        key = f"{names[0]}_{k}"
        s = "-".join(sorted(d)).upper().replace("_", ":")
        return d.get(key, x), s, f"{k:03d}|{1/3:.2f}|{names!r}", "ab" * k, key in d
    return P(f, lambda i: (t(2), [["a", "b"], ["b"], ["z", "y", "x"], ["a", "b"]][i], i))


# -- builtins -----------------------------------------------------------------------------------
def p_sorted_min_max_key():
    def f(xs, rev):
        s = sorted(xs, key=lambda v: v.shape[0], reverse=rev)
        m = max(xs, key=lambda v: v.numel())
        n = min(range(len(xs)), key=lambda i: -i)
        words = sorted(["bb", "a", "ccc", "dd"], key=len)
        return [v.shape[0] for v in s], m * 2, n, words, sorted([3, 1, 2], reverse=rev)
    return P(f, lambda i: ([t(3), t(1), t(2), t(4)][: i + 2], bool(i % 2)))


def p_iter_builtins():
    def f(xs, k):
        a = list(zip(xs, range(k)))
        b = [i * v for i, v in enumerate(xs, start=k)]
        c = list(reversed(xs))
        d = list(map(lambda v, w: v + w, xs, c))
        e = list(filter(lambda v: v.shape[0] > 1, xs))
        f_ = list(zip(*[(1, 2), (3, 4)]))
        g = any(v.shape[0] > 2 for v in xs), all(v.dim() == 1 for v in xs)
        return len(a), b, c, d, len(e), f_, g, sum(range(k), 10)
    return P(f, lambda i: ([t(2), t(3), t(1)][: i % 3 + 1], i))


def p_itertools_functools():
    def f(x, n):
        a = list(itertools.accumulate(range(n)))
        b = list(itertools.product([1, 2], repeat=2))
        c = list(itertools.chain([x], [x * 2]))
        d = list(itertools.islice(itertools.count(5), n))
        e = functools.reduce(operator.add, [x, x, x], x)
        g = functools.partial(torch.add, alpha=n)
        h = list(itertools.combinations(range(n), 2))
        pairs = list(itertools.pairwise(range(n)))
        grp = [(k, len(list(v))) for k, v in itertools.groupby("aabccc")]
        return a, b, c, d, e, g(x, x), h, pairs, grp
    return P(f, lambda i: (t(2), i + 1))


def p_recursion():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def tree(x, depth):
        if depth == 0:
            return x
        return tree(x * 2, depth - 1) + tree(x, depth - 1)

    def f(x, n):
        return tree(x, n % 3), fact(n)
    return P(f, lambda i: (t(2), i + 2))


def p_loops_control():
    def f(x, items, limit):
        total = 0
        for v in items:
            if v < 0:
                continue
            if v > limit:
                break
            total += v
        else:
            total += 1000
        i = 0
        while True:
            i += 1
            if i % 2:
                continue
            if i > limit:
                break
        for j in range(10):
            if j == limit:
                return x + total, i, "early"
        return x - total, i, "late"
    return P(f, lambda i: (t(2), [[1, -2, 3], [5, 1], [1, 2], [9]][i], [2, 12, 4, 3][i]))


def p_del_statements():
    class O:
        pass
    o = O()
    o.a = 1
    d = {"a": 1, "b": 2}

    def f(x, lst):
        y = x * 2
        del x
        del lst[0]
        del lst[-1:]
        if "a" in d:
            del d["a"]
        else:
            d["a"] = 3
        if hasattr(o, "a"):
            del o.a
        else:
            o.a = 4
        try:
            return x  # noqa: F821
        except UnboundLocalError:
            return y, lst
    return P(f, lambda i: (t(2), list(range(i + 3))), state=lambda: (dict(d), vars(o).copy()))


def p_list_methods_inplace():
    def f(x, lst):
        lst.append(x.shape[0])
        lst.extend([5, 6])
        lst.insert(0, -1)
        a = lst.pop()
        b = lst.pop(0)
        lst.remove(5)
        lst.sort(reverse=True)
        lst.reverse()
        lst[1:2] = [7, 7, 7]
        lst += [len(lst)]
        lst *= 1
        return x * a + b, lst.index(7), lst.count(7), list(lst)
    return P(f, lambda i: (t(i + 1), [3, 1, 2][: i + 1]))


def p_dict_methods_inplace():
    def f(x, d, key):
        d.setdefault(key, 0)
        d[key] += 1
        d.update({"z": 9}, w=1)
        v = d.pop("w")
        r = d.pop("missing", -1)
        items = sorted(d.items())
        d2 = {**d, "new": 1} | {"z": 0}
        return x * v + r, items, d2, list(d.keys())
    return P(f, lambda i: (t(2), {"a": i} if i % 2 else {}, ["a", "b", "a", "c"][i]))


def p_set_ops():
    s = {1, 2}

    def f(x, other):
        s.add(len(other))
        u = s | set(other)
        inter = s & set(other)
        s.discard(99)
        return x * len(u), sorted(u), sorted(inter), 3 in s, frozenset(other) <= u

    def mutate(i):
        s.add(i + 10)
    return P(f, lambda i: (t(2), [i, i + 1]), mutate, lambda: sorted(s))


def p_unpacking_slicing():
    def f(x, seq):
        a, *mid, b = seq
        (c, d), e = (seq[0], seq[-1]), seq[::-1]
        first, *_ = seq[::-2]
        return x * a + b, mid, e, seq[-1:0:-1], seq[1::2], first, c + d, x[::-1] if False else x.flip(0)
    return P(f, lambda i: (t(3), list(range(i + 2, 2 * i + 5))))


# -- tensors and Python values ------------------------------------------------------------------
def p_tensor_python_values():
    def f(x):
        n = x.sum().item()
        lst = x.tolist()
        s = x.shape
        if n > 0:
            y = x + 1
        else:
            y = x - 1
        return y, lst, tuple(s), s[0], x.dim(), x.dtype, x.device.type, x.is_contiguous(), len(x)
    inputs = [lambda: (t(3),), lambda: (-t(3).abs(),), lambda: (t(2, 2).t(),), lambda: (t(3).abs(),)]
    return P(f, lambda i: inputs[i]())


def p_inplace_views_inputs(aot=True):
    def f(x, y):
        v = x[1:]
        v.mul_(2)
        y.add_(1)
        x.t_() if x.dim() == 2 else None
        z = y.view(-1)
        z[0] = 100.0
        return x.clone(), y.sum()
    inputs = [lambda: (t(3), t(2, 2)), lambda: (t(3, 3), t(4)), lambda: (t(4), t(2, 2))]
    return P(f, lambda i: inputs[i % 3](), aot=True)


def p_iterate_tensor():
    def f(x):
        acc = []
        for row in x:
            acc.append(row.sum() * len(acc))
        return torch.stack(acc), [r.shape for r in x]
    return P(f, lambda i: (t(i + 1, 2),))


def p_python_random_math():
    def f(x, n):
        r = random.random()
        k = random.randint(0, n)
        return x * r + k, math.sqrt(n) + math.log(n + 1) + math.pi, math.gcd(n, 6), math.factorial(n)
    return P(f, lambda i: (t(2), i + 1))


def p_id_and_isinstance():
    class MyT(torch.Tensor):
        pass

    m = torch.nn.Linear(2, 2)
    ids = {}

    def f(x, obj):
        ids.setdefault(id(obj), len(ids))
        kind = (isinstance(x, MyT), isinstance(obj, torch.nn.Module), isinstance(obj, torch.nn.Linear),
                type(x) is torch.Tensor, isinstance(x, torch.Tensor))
        return x * 2, kind, ids[id(obj)]
    inputs = [lambda: (t(2), m), lambda: (t(2).as_subclass(MyT), 3), lambda: (t(2), m), lambda: (t(2), [1])]
    return P(f, lambda i: inputs[i](), state=lambda: sorted(ids.values()))


class Key:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __hash__(self):
        return hash(self.a)

    def __eq__(self, other):
        return isinstance(other, Key) and self.a == other.a and self.b == other.b


def p_custom_hash_eq_keys():
    table = {Key(1, 1): 10, Key(1, 2): 20, Key(2, 2): 30}

    def f(x, a, b):
        k = Key(a, b)
        v = table.get(k, 0)
        table[k] = v + 1
        return x * v, k in table, Key(a, b) == Key(a, b)
    return P(f, lambda i: (t(2), [1, 1, 2, 3][i], [1, 2, 2, 1][i]), state=lambda: sorted(table.values()))


# -- modules ------------------------------------------------------------------------------------
class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.counter = 0
        self.use_bias = True
        self.history = []

    def forward(self, x):
        self.counter += 1
        self.history.append(x.shape[0])
        y = self.lin(x)
        if self.training:
            y = y * 2
        if self.use_bias:
            y = y + self.counter
        return y


def p_module_state():
    m = Counter()

    def mutate(i):
        if i == 0:
            m.eval()
        if i == 1:
            m.use_bias = False
        if i == 2:
            m.train()
            with torch.no_grad():
                m.lin.weight.mul_(2)
    return P(m, lambda i: (t(i + 1, 3),), mutate, lambda: (m.counter, list(m.history), m.training),
             aot=True)


class Containers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 1), "b": torch.nn.Linear(2, 2)})
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2)) for _ in range(2)])
        self.skip = 1

    def forward(self, x, head):
        for i, layer in enumerate(self.layers):
            if i == self.skip:
                continue
            x = layer(x) + self.ps[i % len(self.ps)]
        x = self.layers[-1](x) * self.ps[-1]
        out = {k: h(x) for k, h in self.heads.items()}
        return self.heads[head](x), out, len(self.layers)


def p_module_containers():
    m = Containers()

    def mutate(i):
        m.skip = i
        if i == 1:
            m.layers.append(torch.nn.Linear(2, 2))
    return P(m, lambda i: (t(2, 2), "ab"[i % 2]), mutate, aot=True)


def p_print_output():
    def f(x, n):
        print("n is", n, f"{n * 2}")
        y = x * n
        print(y.shape, sep="|")
        return y
    return P(f, lambda i: (t(2), i))


# -- second batch: exceptions at breaks, more state that guards must see --------------------------
def p_exception_at_break_in_try():
    log = []

    def lib(k):  # run natively: a graph break at the call
        if k % 2:
            raise ValueError(f"odd {k}")
        return k

    def f(x, k):
        y = x * 2
        try:
            print("trying", k)
            v = lib(k)
        except ValueError as e:
            log.append(e.args[0])
            v = -1
        finally:
            log.append("finally")
        return y + v
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_break_in_except_then_reraise():
    log = []

    def f(x, k):
        try:
            if k % 2:
                raise KeyError(k)
            y = x + 1
        except KeyError:
            print("handling", k)
            if k > 2:
                raise
            y = x - 1
        return y
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_global_rebound_function_and_module_attr():
    def f(x):
        return helper_fn(x) + math.pi * G_SCALE

    def mutate(i):
        global helper_fn, G_SCALE
        helper_fn = [torch.cos, lambda v: v * 3, torch.sin, torch.exp][i]
        G_SCALE = G_SCALE + 1
    return P(f, lambda i: (t(2),), mutate)


helper_fn = torch.sin


def p_list_length_and_items_changed():
    widths = [1.0, 2.0]

    def f(x):
        out = x
        for w in widths:
            out = out * w
        return out, len(widths), widths[-1]

    def mutate(i):
        if i == 0:
            widths.append(3.0)
        elif i == 1:
            widths[0] = -1.0
        else:
            widths.pop()
    return P(f, lambda i: (t(2),), mutate)


def p_dict_key_changed():
    table = {"a": 1, "b": 2}

    def f(x):
        s = x
        for k, v in table.items():
            s = s + v * len(k)
        return s, "c" in table, list(table)

    def mutate(i):
        if i == 0:
            table["c"] = 10
        elif i == 1:
            del table["a"]
        else:
            table["a"] = 5
    return P(f, lambda i: (t(2),), mutate)


def p_object_flag_on_self():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.mode = "add"
            self.scale = 1

        def forward(self, x):
            y = self.lin(x)
            if self.mode == "add":
                return y + self.scale
            return y * self.scale

    m = Net()

    def mutate(i):
        if i == 0:
            m.mode = "mul"
        elif i == 1:
            m.scale = 2.5
        else:
            m.lin = torch.nn.Linear(2, 2)
    return P(m, lambda i: (t(3, 2),), mutate, aot=True)


def p_requires_grad_and_backward():
    def f(x, w):
        y = (x * w).sum()
        return y, y.requires_grad, w.grad is None
    return P(f, lambda i: (t(3), t(3).requires_grad_(i % 2 == 0)), aot=True)


def p_tensor_dtype_switch():
    def f(x):
        if x.dtype == torch.float64:
            return x * 2
        if x.is_floating_point():
            return x + 1
        return x // 2
    inputs = [lambda: (t(2),), lambda: (t(2, dtype=torch.float64),), lambda: (torch.arange(4),),
              lambda: (t(2, dtype=torch.float16),)]
    return P(f, lambda i: inputs[i](), aot=True)


def p_closure_cell_list_mutated():
    hist = [1]

    def f(x):
        hist.append(len(hist))
        return x * sum(hist)

    def mutate(i):
        hist.clear() if i == 1 else hist.append(5)
    return P(f, lambda i: (t(2),), mutate, lambda: list(hist))


def p_class_attr_changed():
    class Cfg:
        dim = 2

    def f(x):
        return x.reshape(-1, Cfg.dim).sum(-1)

    def mutate(i):
        Cfg.dim = [4, 1, 2][i]
    return P(f, lambda i: (t(8),), mutate)


def p_partial_args_changed():
    p = functools.partial(torch.add, alpha=2)

    def f(x):
        return p(x, x)

    def mutate(i):
        nonlocal p
        p = functools.partial(torch.add, alpha=i + 3)
    return P(f, lambda i: (t(2),), mutate)


def p_str_methods():
    def f(x, s):
        parts = s.split(",")
        key = parts[0].strip().lower()
        n = int(parts[1]) if len(parts) > 1 and parts[1].strip().isdigit() else 0
        return x * n, key, s.startswith("A"), s.find("b"), s.count(","), s[::-1], s.zfill(8), "%s-%d" % (key, n)
    return P(f, lambda i: (t(2), ["A,3", "b, 4", "xyz", "A,12,c"][i]))


def p_inplace_on_input_view_returned():
    def f(x):
        v = x[0]
        v.add_(1)
        w = x.view(-1)
        w.mul_(2)
        return v, w.sum()
    return P(f, lambda i: (t(2, 3),), aot=True)


def p_no_grad_mutation_param():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        with torch.no_grad():
            lin.weight.add_(0.1)
        return lin(x)
    return P(f, lambda i: (t(2, 2),), state=lambda: lin.weight.detach().clone())


def p_bool_int_conversions():
    def f(x, n):
        flags = [bool(n), int(True) + n, float(n) / 3, str(n), n == 0, not n, -n, +n, abs(-n)]
        return x * int(bool(n)), flags, hash(n) == hash(float(n)), n.__class__.__name__
    return P(f, lambda i: (t(2), [0, 1, -5, 2 ** 70][i]))


def p_sum_over_generators_and_min_default():
    def f(xs):
        total = sum((v.sum() for v in xs), torch.tensor(0.0))
        best = min((v.shape[0] for v in xs), default=-1)
        return total, best, max([], default=None)
    return P(f, lambda i: ([t(2), t(3)][:i % 3],))


def p_nested_functions_defaults_capture():
    def f(x, n):
        def g(v, k=n):
            return v * k
        n = n + 1
        h = lambda v: v + n  # noqa: E731
        return g(x), h(x), g(x, 2)
    return P(f, lambda i: (t(2), i))


def p_enumerate_dict_mutation_during_loop():
    def f(x, d):
        out = x
        for k in list(d):
            if d[k] < 0:
                del d[k]
            else:
                d[k] = d[k] * 2
                out = out + d[k]
        return out, d
    return P(f, lambda i: (t(2), {"a": 1, "b": -1, "c": i}))


def p_module_training_flag_dropout():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(2))

    def mutate(i):
        m.train(i % 2 == 1)
    return P(m, lambda i: (t(4, 2),), mutate, aot=True)


def p_sequential_append():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))

    def mutate(i):
        m.append(torch.nn.ReLU() if i % 2 else torch.nn.Linear(2, 2))
    return P(m, lambda i: (t(3, 2),), mutate)


def p_int_arg_as_size():
    def f(x, n):
        return x.new_zeros(n) + n, torch.arange(n) * 2, [0] * n, x.expand(n, 2).sum()
    return P(f, lambda i: (t(1, 2), [2, 3, 5, 3][i]), aot=True)


def p_symbolic_int_python_arith():
    def f(x, n):
        r = (2 ** n, n // -2, -n % 3, round(n / 3), float(n), n.bit_length(), max(n, 3), min(n, 4.5),
             n in (1, 2, 3), f"{n}", n / 2, n ** -1, divmod(n, -4), -n // 4, n * 1.5, int(n * 0.5),
             [1, 2, 3, 4, 5, 6][n - 2], (n - 5) % 4, n >> 1)
        return x[n - 2] * n, r
    return P(f, lambda i: (torch.arange(10.0), [3, 4, 5, 2, 6][i]), calls=5)


def p_closure_written_by_native_callee():
    cnt = 0

    def bump():
        nonlocal cnt
        cnt += 1
        print("bump")  # a graph break inside the callee
        return cnt

    def f(x):
        a = bump()
        b = cnt
        return x * a + b
    return P(f, lambda i: (t(2),), state=lambda: cnt)


class Box:
    pass


def p_augmented_attribute_and_items():
    o = Box()
    o.v = [1]
    o.n = 1

    def f(x):
        o.n += 1
        o.v += [o.n]
        o.v[0] *= 2
        return x * o.n, list(o.v)
    return P(f, lambda i: (t(2),), state=lambda: (o.n, list(o.v)))


def p_mutable_default_dict():
    def f(x, cache={}):  # noqa: B006
        cache[len(cache)] = x.shape[0]
        return x * len(cache), dict(cache)
    return P(f, lambda i: (t(i % 2 + 1),), state=lambda: dict(f.__defaults__[0]))


def p_input_list_mutated_around_a_break():
    def f(x, lst):
        lst.append(1)
        print("between")
        lst.append(len(lst))
        return x + sum(lst), lst
    return P(f, lambda i: (t(2), list(range(i))))


def p_global_written_from_item():
    def f(x):
        global G_COUNT
        G_COUNT = x.sum().item()
        return x * G_COUNT
    return P(f, lambda i: (t(2),), state=lambda: G_COUNT)


def p_user_iterator_and_callable():
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n <= 0:
                raise StopIteration
            self.n -= 1
            return self.n

    class Scaler:
        def __init__(self, k):
            self.k = k
            self.calls = 0

        def __call__(self, v):
            self.calls += 1
            return v * self.k

    sc = Scaler(2)

    def f(x, n):
        out = x
        for i in Countdown(n):
            out = sc(out) + i
        return out

    def mutate(i):
        sc.k = i + 3
    return P(f, lambda i: (t(2), i + 1), mutate, lambda: sc.calls)


def p_class_counter_and_type_attr():
    class Layer(torch.nn.Module):
        count = 0

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        @property
        def double_w(self):
            return self.w * 2

        def forward(self, x):
            type(self).count += 1
            return x * self.double_w + type(self).count

    m = Layer()
    return P(m, lambda i: (t(2),), state=lambda: type(m).count)


def p_shape_queries():
    def f(x):
        r = (x.shape == (2, 3), x.size() == torch.Size([2, 3]), x.ndim, len(x.shape), list(x.shape),
             x.size(-1), x.stride(), x.shape[1:], [d * 2 for d in x.shape], x.numel() // x.shape[0],
             x.element_size(), x.is_floating_point(), x.T.shape)
        return x.sum(0), r
    inputs = [lambda: (t(2, 3),), lambda: (t(3, 2),), lambda: (t(2, 3, dtype=torch.float64),), lambda: (t(4, 1),)]
    return P(f, lambda i: inputs[i]())


def _counted(fn):
    """A decorator with state: the wrapper counts its calls in `wrapper.calls`."""
    @functools.wraps(fn)
    def wrapper(*a, **k):
        wrapper.calls += 1
        return fn(*a, **k)
    wrapper.calls = 0
    return wrapper


def p_decorated_inner_functions():
    @_counted
    def g(v, scale=1.0):
        return v * scale

    @torch.no_grad()
    def h(v):
        return v * 3

    def f(x):
        return g(x, scale=2.0), h(x), g.calls, g.__name__
    return P(f, lambda i: (t(2).requires_grad_(i % 2 == 0),), state=lambda: g.calls)


def p_hook_added_after_compile():
    m = torch.nn.Linear(2, 2)
    seen = []

    def mutate(i):
        if i == 0:
            m.register_forward_hook(lambda mod, inp, out: seen.append(out.shape[0]))
    return P(m, lambda i: (t(i + 1, 2),), mutate, lambda: list(seen))


def p_instance_method_replaced():
    class A:
        def f(self, v):
            return v + 1

    a = A()

    def f(x):
        return a.f(x)

    def mutate(i):
        if i == 0:
            a.f = lambda v: v * 10
        elif i == 1:
            del a.f
        else:
            A.f = lambda self, v: v - 5
    return P(f, lambda i: (t(2),), mutate)


def p_class_eq_hash_changed():
    class K:
        def __init__(self, v):
            self.v = v

        def __eq__(self, o):
            return self.v == o.v

        def __hash__(self):
            return hash(self.v)

    k1, k2 = K(1), K(1)

    def f(x):
        d = {k1: 1}
        return x + (k2 in d), k1 == k2

    def mutate(i):
        k2.v = i
    return P(f, lambda i: (t(2),), mutate)


def p_random_module_seeded_inside():
    def f(x, s):
        random.seed(s)
        a = random.random()
        b = random.choice([1, 2, 3])
        torch.manual_seed(s)
        return x * a + b + torch.rand(2)
    return P(f, lambda i: (t(2), i % 2))


def p_tensor_attribute_on_input():
    def f(x):
        x.tag = getattr(x, "tag", 0) + 1
        return x * 2, x.tag
    return P(f, lambda i: (t(2),))


def p_user_operators_on_changed_objects():
    class V:
        def __init__(self, v):
            self.v = v

        def __eq__(self, o):
            return self.v == o.v

        def __hash__(self):
            return hash(self.v)

        def __add__(self, o):
            return V(self.v + o.v)

        def __lt__(self, o):
            return self.v < o.v

    a, b = V(1), V(1)

    def f(x):
        return x * (a + b).v, a == b, a < b, b in {a: 0}, sorted([b, a])[0].v

    def mutate(i):
        b.v = [0, 3, 1][i]
    return P(f, lambda i: (t(2),), mutate)


def p_builtins_on_user_objects():
    class V:
        def __init__(self, v):
            self.v = v

        def __lt__(self, o):
            return self.v < o.v

        def __repr__(self):
            return f"V({self.v})"

    a, b = V(1), V(2)

    def f(x):
        return x * sorted([b, a])[0].v, max(a, b).v, repr(b), min([a, b]).v

    def mutate(i):
        b.v = [0, 3, 1][i]
    return P(f, lambda i: (t(2),), mutate)


# == round 2 (capture's second differential pass): areas the first round did not cover ==========
# -- lru_cache, class hierarchies, dataclasses, aliasing, grad modes, RNG state ------------------
def p_lru_cache_helper():
    calls = []
    @functools.lru_cache(maxsize=None)
    def coef(n):
        calls.append(n)
        return n * 1.5
    def f(x, n):
        return x * coef(n) + coef(n + 1)
    return P(f, lambda i: (t(3), i % 2), state=lambda: list(calls), dynamic=True)


def p_dataclass_replace_frozen():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        scale: float = 1.0
        shift: int = 0
        tags: tuple = ()
    cfg = [Cfg()]
    def f(x):
        c = cfg[0]
        c2 = dataclasses.replace(c, shift=c.shift + 1)
        try:
            c2.scale = 5
        except dataclasses.FrozenInstanceError as e:
            err = str(e)
        return x * c2.scale + c2.shift + len(c2.tags), err, c2
    def mutate(i):
        cfg[0] = Cfg(scale=[2.0, -1.0, 0.5][i], shift=i, tags=tuple(range(i)))
    return P(f, lambda i: (t(3),), mutate)


def p_namedtuple_fields():
    Pt = collections.namedtuple("Pt", "a b c", defaults=(3,))
    state = {"p": Pt(1, 2)}
    def f(x):
        p = state["p"]
        q = p._replace(b=p.b * 2)
        a, b, c = q
        d = q._asdict()
        return x * a + b - c, q, d, p.count(2), p.index(p[0])
    def mutate(i):
        state["p"] = Pt(i, i + 2, -i)
    return P(f, lambda i: (t(3),), mutate)


def p_list_alias_two_names():
    data = [1, 2, 3]
    def f(x, lst):
        alias = lst
        alias.append(x.shape[0])
        lst += [7]
        alias[0] = alias[-1] * 2
        del alias[1]
        return x * len(lst), lst is alias
    return P(f, lambda i: (t(i + 2), list(range(i))), state=lambda: list(data))


def p_dict_iteration_keys_change():
    d = {"a": 1.0, "b": 2.0}
    def f(x):
        out = x
        for k, v in d.items():
            out = out * v if k < "c" else out + v
        keys = list(reversed(d))
        return out, keys, sorted(d.values())
    def mutate(i):
        if i == 0: d["c"] = 3.0
        elif i == 1: del d["a"]
        elif i == 2: d["a"] = -1.0
    return P(f, lambda i: (t(2),), mutate)


def p_enumerate_zip_reversed_sizes():
    def f(x, y):
        acc = []
        for i, (a, b) in enumerate(zip(x, y)):
            acc.append(a * i + b)
        for j in reversed(range(x.shape[0])):
            acc.append(x[j] - j)
        for j in range(0, x.size(0), 2):
            acc.append(x[j] * 2)
        return torch.stack(acc), len(acc)
    return P(f, lambda i: (t(i + 2, 3), t(i + 3, 3)), dynamic=True)


def p_fstring_shapes():
    def f(x, n):
        s = f"{x.shape[0]}x{x.shape[1]}:{n:+d}:{n/3:.2f}:{x.dtype}"
        s2 = "{}-{!r}-{:>5}".format(x.size(), n, str(n))
        s3 = "%d/%s" % (x.numel(), tuple(x.shape))
        return x.sum() + len(s) + len(s2), s, s2, s3, str(x.shape), repr(x.size(1))
    return P(f, lambda i: (t(i + 1, 2 + i % 2), i - 2), dynamic=True)


def p_isinstance_class_hierarchy_changes():
    class A: pass
    class B(A): pass
    class C: pass
    objs = [B()]
    def f(x):
        o = objs[0]
        r = []
        if isinstance(o, A):
            x = x + 1
            r.append("A")
        if isinstance(o, (C, int)):
            x = x * 2
            r.append("C")
        if issubclass(type(o), A):
            r.append("sub")
        return x, r, type(o).__name__
    def mutate(i):
        if i == 0: objs[0] = C()
        elif i == 1: objs[0] = A()
        elif i == 2:
            B.__bases__ = (C,)
            objs[0] = B()
    return P(f, lambda i: (t(2),), mutate)


def p_module_property_getattr():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.k = 2
        @property
        def scale(self):
            return self.k * 0.5
        def forward(self, x):
            y = self.lin(x) * self.scale
            if hasattr(self, "extra"):
                y = y + self.extra
            return y + getattr(self, "bias2", 0.0)
    m = M()
    def mutate(i):
        if i == 0: m.k = 5
        elif i == 1: m.extra = torch.ones(3)
        elif i == 2: m.register_buffer("bias2", torch.full((3,), 2.0))
    return P(m, lambda i: (t(2, 3),), mutate)


def p_module_hooks_added_removed():
    m = torch.nn.Linear(3, 3)
    log = []
    handles = []
    def f(x):
        return m(x) * 2
    def mutate(i):
        if i == 0:
            handles.append(m.register_forward_pre_hook(lambda mod, a: (a[0] * 10,)))
        elif i == 1:
            handles.append(m.register_forward_hook(lambda mod, a, o: log.append(o.shape[0]) or o + 1))
        elif i == 2:
            handles.pop(0).remove()
        elif i == 3:
            handles.pop(0).remove()
    return P(f, lambda i: (t(i + 1, 3),), mutate, state=lambda: list(log), calls=5)


def p_grad_mode_nesting():
    def f(x, w):
        with torch.no_grad():
            a = x * w
            with torch.enable_grad():
                b = x * w
            with torch.set_grad_enabled(False):
                c = b * 2
        d = a + b + c
        return d, a.requires_grad, b.requires_grad, c.requires_grad, torch.is_grad_enabled()
    return P(f, lambda i: (t(3), t(3).requires_grad_(i % 2 == 0)))


def p_grad_mode_decorators():
    @torch.no_grad()
    def helper(x):
        return x * 2
    @torch.enable_grad()
    def helper2(x):
        return x * 3
    def f(x):
        a = helper(x)
        with torch.no_grad():
            b = helper2(x)
        with torch.inference_mode():
            c = x + 1
        return a.requires_grad, b.requires_grad, a + b, c.is_inference(), torch.is_inference_mode_enabled()
    return P(f, lambda i: (t(3).requires_grad_(),))


def p_requires_grad_toggle():
    w = torch.randn(3)
    def f(x):
        y = x * w
        z = y.requires_grad
        if w.requires_grad:
            y = y * 2
        return y, z, y.is_leaf, w.is_leaf
    def mutate(i):
        w.requires_grad_(not w.requires_grad)
    return P(f, lambda i: (t(3),), mutate)


def p_data_grad_attrs():
    w = torch.randn(3, requires_grad=True)
    def f(x):
        (w * x).sum().backward()
        g = w.grad.clone()
        w.data.mul_(0.5)
        d = w.data
        return g, d.requires_grad, w.grad is None, w.detach() * 2
    def mutate(i):
        if i == 1: w.grad = None
    return P(f, lambda i: (t(3),), mutate, state=lambda: (w.detach().clone(), None if w.grad is None else w.grad.clone()))


def p_item_tolist_branches():
    def f(x):
        v = x.sum().item()
        lst = x.tolist()
        if v > 0:
            y = x * 2
        else:
            y = x - 1
        m = max(lst)
        return y + m, int(v > 0), [round(a, 3) for a in lst], lst.index(m)
    return P(f, lambda i: (t(4),))


def p_inplace_view_slices_of_list():
    def f(xs, y):
        xs[0][1:].add_(1)
        v = xs[1].view(-1)
        v.mul_(2)
        xs[2].t_() if False else None
        y[:, 0] = xs[0].sum()
        return xs[0] + xs[1].sum(), y
    return P(f, lambda i: ([t(3), t(2, 2), t(2)], t(2, 2)))


def p_try_finally_returns():
    log = []
    def g(x, k):
        try:
            if k > 1:
                return x * 2
            return x - 1
        finally:
            log.append(k)
            if k == 3:
                return x * 10
    def f(x, k):
        for i in range(2):
            try:
                if i == k: break
                x = x + 1
            finally:
                log.append(("i", i))
        return g(x, k)
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_user_cm_mutating_state():
    st = {"depth": 0, "log": []}
    class CM:
        def __init__(self, name): self.name = name
        def __enter__(self):
            st["depth"] += 1
            st["log"].append(("in", self.name, st["depth"]))
            return self
        def __exit__(self, et, ev, tb):
            st["log"].append(("out", self.name, et.__name__ if et else None))
            st["depth"] -= 1
            return et is KeyError
    def f(x, k):
        with CM("a") as a:
            x = x + st["depth"]
            with CM("b"):
                if k == 1:
                    raise KeyError("k")
                x = x * st["depth"]
        return x, a.name
    return P(f, lambda i: (t(2), i % 3), state=lambda: (st["depth"], list(st["log"])))


def p_rng_state_after():
    def f(x):
        a = torch.rand(3)
        b = torch.randn_like(x)
        torch.manual_seed(7) if x.shape[0] > 3 else None
        c = torch.randint(0, 10, (2,))
        r = random.random()
        return x + a.sum() + b, c, r
    return P(f, lambda i: (t(2 + i),), state=lambda: (torch.get_rng_state(), random.getstate()))


def p_int_ops_negative():
    def f(x, a, b):
        r = (a // b, a % b, -a // b, a / b, divmod(a, b), a ** 2, abs(a), -(-a // b), a << 2, a >> 1, a & 3, a | 4, a ^ b)
        n = x.shape[0]
        s = (n // -3, n % -3, -n // 2, n / 4, (n - 7) % 3, (n - 7) // 3, round(n / 3), n ** 2 // 5)
        return x * r[0] + s[0], r, s
    return P(f, lambda i: (t(i + 1), [-7, 7, -8, 5][i], [2, -3, 3, -2][i]), dynamic=True)


def p_bool_none_guards():
    def f(x, flag=None, mode=None):
        if flag is None:
            x = x + 1
        elif flag:
            x = x * 2
        if not mode:
            x = x - 3
        if mode == "":
            x = x / 2
        return x, flag, mode
    return P(f, lambda i: (t(2), KW(flag=[None, True, False, 0][i], mode=[None, "", "a", 0][i])))


def p_class_level_mutable():
    class Reg:
        items = []
        count = 0
        def __init__(self):
            Reg.count += 1
            self.items.append(Reg.count)
    def f(x):
        r = Reg()
        return x * len(Reg.items) + r.count, list(r.items)
    return P(f, lambda i: (t(2),), state=lambda: None)


def p_call_objects_and_bound_methods():
    class Scaler:
        def __init__(self, s): self.s = s
        def __call__(self, x): return x * self.s
        def add(self, x, k=1): return x + k * self.s
    objs = [Scaler(2.0)]
    def f(x):
        s = objs[0]
        m = s.add
        u = Scaler.add
        return s(x), m(x), u(s, x, k=3), getattr(s, "missing", 5), getattr(s, "s", 0)
    def mutate(i):
        if i == 0: objs[0].s = -1.0
        elif i == 1: objs[0] = Scaler(4.0)
        elif i == 2: Scaler.add = lambda self, x, k=1: x - k
    return P(f, lambda i: (t(2),), mutate)


def p_super_chain():
    class A(torch.nn.Module):
        def forward(self, x): return x + 1
    class B(A):
        def forward(self, x): return super().forward(x) * 2
    class C(B):
        def forward(self, x): return super(B, self).forward(x) - super().forward(x)
    m = C()
    return P(m, lambda i: (t(2),))


def p_recursion_depth_changes():
    def fact(n): return 1 if n <= 1 else n * fact(n - 1)
    def tree(x, d):
        if d == 0: return x
        return tree(x * 0.5, d - 1) + tree(x + 1, d - 1)
    def f(x, d):
        return tree(x, d) * fact(d + 1)
    return P(f, lambda i: (t(2), i))


# -- config modules, defaults, generators, comprehension scopes, enums, identity -----------------
CONFIG = types.SimpleNamespace(use_bias=True, eps=1e-3, mode="a")


def p_other_module_config_flag():
    def f(x):
        if CONFIG.use_bias:
            x = x + 1
        if CONFIG.mode == "a":
            x = x * 2
        return x / (1 + CONFIG.eps)
    def mutate(i):
        if i == 0: CONFIG.use_bias = False
        elif i == 1: CONFIG.mode = "b"
        elif i == 2: CONFIG.eps = 0.5
    return P(f, lambda i: (t(3),), mutate)


def p_math_module_attr_rebound():
    mod = types.ModuleType("m")
    mod.act = torch.relu
    mod.K = 3
    def f(x):
        return mod.act(x) * mod.K
    def mutate(i):
        if i == 0: mod.act = torch.tanh
        elif i == 1: mod.K = 5
        elif i == 2: del mod.K; mod.K = 1.5
    return P(f, lambda i: (t(3),), mutate)


def p_mutable_default_list_accum():
    def g(x, acc=[]):
        acc.append(x.shape[0])
        return acc
    def f(x):
        a = g(x)
        b = g(x, [])
        return x * len(a), list(a), b
    return P(f, lambda i: (t(i + 1),), calls=4)


def p_generator_send_throw():
    def gen():
        total = 0
        while True:
            try:
                v = yield total
            except ValueError:
                total = -1
                continue
            if v is None:
                return
            total += v
    def f(x, ks):
        g = gen()
        next(g)
        for k in ks:
            s = g.send(k)
        s2 = g.throw(ValueError)
        return x * s + s2
    return P(f, lambda i: (t(2), list(range(i + 1))))


def p_comprehension_scopes_shadow():
    x_outer = 5
    def f(x, n):
        ys = [x * i for i in range(n)]
        i = 100
        d = {i: i * 2 for i in range(n)}
        s = {k % 2 for k in range(n)}
        g = sum(v for v in range(n))
        nested = [[a * b for b in range(a)] for a in range(n)]
        return torch.stack(ys).sum(0) + i, d, s, g, nested, x_outer
    return P(f, lambda i: (t(2), i + 1))


def p_dict_order_after_mutation_inside():
    def f(x, d):
        d.pop("a", None)
        d["a"] = x.sum()
        d.setdefault("z", 0)
        d.update(b=1, c=2)
        del d["b"]
        d["b"] = 3
        return list(d), x * len(d)
    return P(f, lambda i: (t(2), {"b": 0, "a": 1, "q": 2} if i % 2 else {"z": 5}))


def p_set_iteration_order_ints_strs():
    def f(x, items):
        s = set(items)
        s.add(7)
        s.discard(items[0] if items else 0)
        out = x
        for v in sorted(s):
            out = out + v
        return out, sorted(s), len(s), 7 in s
    return P(f, lambda i: (t(2), [i, i + 1, 3, 3]))


def p_item_float_int_values():
    def f(x):
        n = int(x.argmax())
        v = float(x.max())
        b = bool((x > 0).any())
        lst = x.int().tolist()
        return x[n] * v, n, v, b, lst, x.sum().item() > 0
    return P(f, lambda i: (t(5) * 3,))


def p_inplace_on_input_views():
    def f(x):
        v = x[1:3]
        v.mul_(2)
        x.t_() if False else None
        w = x.view(2, -1)
        w[0].zero_()
        x.unsqueeze(0).add_(1)
        return x.sum(), v.sum()
    return P(f, lambda i: (t(4 * (i + 1)),))


def p_list_of_tensors_inplace_slices():
    def f(ts):
        for t_ in ts[1:]:
            t_.add_(1)
        ts[0][:] = ts[-1]
        ts.reverse()
        return ts[0] * 2, len(ts)
    return P(f, lambda i: ([t(2) for _ in range(i + 2)],))


def p_hasattr_module_later_attr():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))
        def forward(self, x):
            y = x * self.w
            if hasattr(self, "gate"):
                y = self.gate(y)
            if getattr(self, "scale", None) is not None:
                y = y * self.scale
            return y
    m = M()
    def mutate(i):
        if i == 0: m.gate = torch.nn.ReLU()
        elif i == 1: m.scale = 3.0
        elif i == 2: del m.gate
        elif i == 3: m.scale = None
    return P(m, lambda i: (t(2, 3),), mutate, calls=5)


def p_getattr_module_dunder():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.extra = {}
        def __getattr__(self, name):
            if name.startswith("alias_"):
                return getattr(self, name[6:])
            return super().__getattr__(name)
        def forward(self, x):
            return self.alias_lin(x) + len(self.extra)
    m = M()
    def mutate(i):
        m.extra[i] = i
    return P(m, lambda i: (t(2, 2),), mutate)


def p_nonlocal_mutated_between():
    def outer():
        count = 0
        factor = [1.0]
        def f(x):
            nonlocal count
            count += 1
            return x * factor[0] + count
        def bump(i):
            nonlocal count
            count = count * 10
            factor[0] = -factor[0]
            factor.append(i)
        return f, bump, lambda: (count, list(factor))
    f, bump, st = outer()
    return P(f, lambda i: (t(2),), bump, st)


def p_global_function_rebound_in_helper():
    def f(x):
        return _helper_global(x)
    def mutate(i):
        global _helper_global
        _helper_global = [lambda x: x * 2, lambda x: x - 1, torch.neg][i]
    return P(f, lambda i: (t(2),), mutate)


def _helper_global(x):
    return x + 100


def p_partial_kw_override():
    def base(x, a=1, *, b=2, c=3):
        return x * a + b - c
    parts = [functools.partial(base, a=2)]
    def f(x):
        p = parts[0]
        return p(x), p(x, b=10), p(x, a=5, c=0), p.keywords.get("a")
    def mutate(i):
        parts[0] = [functools.partial(base, b=0), functools.partial(parts[0], c=-1), functools.partial(base, 3)][i]
    return P(f, lambda i: (t(2),), mutate)


def p_enum_flag_and_members():
    class Mode(enum.Enum):
        A = 1
        B = 2
    class F(enum.IntFlag):
        X = 1
        Y = 2
    cur = [Mode.A, F.X]
    def f(x):
        m, fl = cur
        if m is Mode.A:
            x = x + 1
        if fl & F.Y:
            x = x * 2
        return x, m.name, int(fl), m.value, str(fl) if False else None, Mode(2).name
    def mutate(i):
        cur[0] = [Mode.B, Mode.A, Mode.B][i]
        cur[1] = [F.X | F.Y, F.Y, F(0)][i]
    return P(f, lambda i: (t(2),), mutate)


def p_sym_int_division_dynamic():
    def f(x):
        n = x.shape[0]
        a = n / 3
        b = n // -2
        c = -n % 4
        d = (n - 10) // 3
        e = int(n / 2)
        g = round(n / 4)
        h = n * 1.5
        k = math.floor(n / 3)
        m = math.sqrt(n)
        return x * a + b, a, b, c, d, e, g, h, k, m, n ** 0.5, 2 ** n, n / 0.25
    return P(f, lambda i: (t([3, 5, 7, 10, 11][i]),), calls=5, dynamic=True)


def p_str_of_scalars_shapes():
    def f(x):
        n = x.shape[0]
        return x, str(n), repr(x.shape), "%s" % (x.size(),), f"{n/3}", f"{n!r:>4}", str(n * 0.1), format(n, "b"), hex(n)
    return P(f, lambda i: (t([3, 5, 7, 10][i]),), dynamic=True)


def p_try_finally_in_loop_with_continue():
    log = []
    def f(x, k):
        for i in range(4):
            try:
                if i == k:
                    continue
                if i == 3:
                    return x * i
                x = x + i
            finally:
                log.append(i)
        return x
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_rng_fork_and_state():
    def f(x):
        st = torch.get_rng_state()
        a = torch.rand(2)
        torch.set_rng_state(st)
        b = torch.rand(2)
        with torch.random.fork_rng():
            torch.manual_seed(3)
            c = torch.rand(2)
        d = torch.rand(2)
        g = torch.Generator().manual_seed(5)
        e = torch.rand(2, generator=g)
        return x + a, b, c, d, e
    return P(f, lambda i: (t(2),), state=lambda: torch.get_rng_state())


def p_random_module_state():
    def f(x):
        random.seed(x.shape[0])
        a = random.randint(0, 100)
        b = random.choice([1, 2, 3])
        l = [1, 2, 3, 4]
        random.shuffle(l)
        return x * a, b, l
    return P(f, lambda i: (t(i + 1),), state=lambda: random.getstate())


def p_is_comparisons():
    sentinel = object()
    cache = {}
    def f(x, key=None):
        v = cache.get(key, sentinel)
        if v is sentinel:
            cache[key] = x.sum()
            return x, True
        return x + v, v is cache[key]
    return P(f, lambda i: (t(2), KW(key=[1, 1, 2, None][i])), state=lambda: dict(cache))


# -- floats computed from symbolic ints ----------------------------------------------------------
def p_sym_float_exprs():
    def f(x):
        n = x.shape[0]
        a = n / 3 + 0.5
        b = n / 3 * 2
        c = 1 / math.sqrt(n)
        d = n ** 0.5 / 3
        e = (n + 0.1) * 3
        g = n * 0.1 + n * 0.2
        h = n / 7 - n / 11
        k = float(n) / 3
        return x * c, a, b, c, d, e, g, h, k
    return P(f, lambda i: (t([3, 5, 7, 10, 11][i]),), calls=5, dynamic=True)


def p_sym_float_into_tensor_and_compare():
    def f(x):
        n = x.shape[0]
        scale = n / 3
        if scale > 2.0:
            x = x * 2
        return x * scale, scale == n / 3, int(scale), math.ceil(scale), round(scale, 2)
    return P(f, lambda i: (t([3, 5, 7, 9, 12][i]),), calls=5, dynamic=True)


def p_int_args_dynamic_arith():
    def f(x, a, b):
        return x * (a / b), a / b, a // b, a % b, -a / b, (a * 3) / (b + 1), a / b / 2, divmod(a, b), pow(a, 2, 5)
    return P(f, lambda i: (t(2), [7, -9, 13, 22, -5][i], [3, 4, -5, 7, 3][i]), calls=5, dynamic=True)


def p_float_args_changing():
    def f(x, s, k):
        return x * s + k, s * 2, s / 3, k / s, s ** 2, -s, abs(s), round(s, 1), math.floor(s), s // 1
    return P(f, lambda i: (t(2), [0.1, 0.7, -1.3, 2.5, 3.0][i], [1, 2, 3, 4, 5][i]), calls=5, dynamic=True)


# -- global tensors, aliased inputs, parameters, exceptions, tensor branches ---------------------
G_T = torch.ones(3)


G_IDX = [0, 2]


G_VALS = [1.0, 2.0, 3.0]


def p_global_tensor_mutated_and_rebound():
    def f(x):
        return x + G_T, G_T.shape[0]
    def mutate(i):
        global G_T
        if i == 0: G_T.add_(1)
        elif i == 1: G_T = torch.zeros(3)
        elif i == 2: G_T = torch.full((1,), 5.0)
    return P(f, lambda i: (t(3),), mutate)


def p_python_list_to_tensor_mutated():
    def f(x):
        w = torch.tensor(G_VALS)
        idx = x[G_IDX]
        return x * w, idx, x.new_tensor(G_IDX)
    def mutate(i):
        G_VALS[i] = -G_VALS[i]
        G_IDX.append(1) if i == 0 else G_IDX.pop(0)
    return P(f, lambda i: (t(3),), mutate)


def p_aliased_inputs():
    def f(a, b):
        a.add_(1)
        return b * 2, a is b
    def inputs(i):
        x = t(3)
        return [(x, x), (x, x[0]), (x, t(3)), (x, x.view(3))][i]
    return P(f, inputs)


def p_param_replaced_and_data_assign():
    m = torch.nn.Linear(2, 2)
    def f(x):
        return m(x), m.weight.shape, m.weight.requires_grad
    def mutate(i):
        if i == 0: m.weight = torch.nn.Parameter(torch.ones(2, 2))
        elif i == 1:
            with torch.no_grad(): m.weight.data = torch.full((2, 2), 3.0)
        elif i == 2: m.weight.requires_grad_(False)
    return P(f, lambda i: (t(1, 2),), mutate)


def p_batchnorm_train_eval_toggle():
    m = torch.nn.BatchNorm1d(3)
    def f(x):
        return m(x), m.num_batches_tracked.item() if False else None
    def mutate(i):
        m.train(i % 2 == 1)
    return P(m, lambda i: (t(4, 3),), mutate, state=lambda: (m.running_mean.clone(), m.running_var.clone(), int(m.num_batches_tracked)), calls=5)


def p_custom_exception_attrs():
    class MyErr(Exception):
        def __init__(self, code, msg):
            super().__init__(msg)
            self.code = code
    def g(x, k):
        if k > 1:
            raise MyErr(k, f"bad {k}")
        return x + k
    def f(x, k):
        try:
            return g(x, k), None
        except MyErr as e:
            return x - e.code, str(e)
    return P(f, lambda i: (t(2), i))


def p_zip_strict_and_shape_compare():
    def f(x, y):
        out = []
        for a, b in zip(x.shape, y.shape):
            out.append(a == b)
        same = x.shape == y.shape
        tup = tuple(x.shape) == (2, 3)
        try:
            list(zip(x, y, strict=True))
            ok = True
        except ValueError as e:
            ok = str(e)
        return x.sum() + y.sum(), out, same, tup, ok, len(x), x.size(0) * y.size(-1)
    return P(f, lambda i: (t(2 + i % 2, 3), t(2, 3 + i // 2)))


def p_zero_and_one_sized():
    def f(x):
        n = x.numel()
        if n == 0:
            return x.sum(), "empty"
        if x.shape[0] == 1:
            return x.squeeze(0) * 2, "one"
        return x.mean(0), f"{n}"
    return P(f, lambda i: (t([0, 1, 3, 1, 0][i], 2),), calls=5, dynamic=True)


def p_tensor_bool_branches():
    def f(x):
        if x.any():
            y = x * 2
        else:
            y = x - 1
        if (x > 0).all():
            y = y + 10
        while y.sum() > 5:
            y = y / 2
        return y
    return P(f, lambda i: ([torch.zeros(3), torch.ones(3), -torch.ones(3), torch.full((3,), 8.0)][i],))


def p_int_tensor_overflow_vs_python():
    def f(x, n):
        big = n * 2 ** 62
        t_ = torch.tensor([2 ** 62], dtype=torch.int64) * 2 if False else x.to(torch.int64) * 3
        return t_, big, big // 7, -big % 9, (x.int() + 2 ** 31 - 1).dtype, n ** 20
    return P(f, lambda i: (torch.tensor([1, 2]), i + 1))


def p_tensor_from_symbolic_int():
    def f(x):
        n = x.shape[0]
        a = torch.tensor([n, n * 2])
        b = torch.full((2,), n / 4)
        c = torch.arange(n) * (n // 2)
        d = x.new_full((n,), n % 3)
        return a, b, c, d, torch.tensor(n / 3).dtype
    return P(f, lambda i: (t([2, 3, 5, 8][i]),), dynamic=True)


def p_method_with_self_state():
    class Acc:
        def __init__(self):
            self.total = 0
            self.hist = []
        def __call__(self, x):
            self.total += x.shape[0]
            self.hist.append(self.total)
            return x * self.total
    acc = Acc()
    def f(x):
        return acc(x) + acc(x)
    def mutate(i):
        acc.total = -acc.total
    return P(f, lambda i: (t(i + 1),), mutate, state=lambda: (acc.total, list(acc.hist)))


def p_generator_with_break_inside():
    def gen(x, n):
        for i in range(n):
            y = x * i
            if i == 1:
                print("mid", i)
            yield y
    def f(x, n):
        return sum(gen(x, n)), [g.shape for g in gen(x, 2)]
    return P(f, lambda i: (t(2), i + 1))


def p_sorted_key_closure_changed():
    order = {"key": lambda p: p[1]}
    def f(x, pairs):
        s = sorted(pairs, key=order["key"])
        return x * s[0][0], s, max(pairs, key=lambda p: -p[0]), min(pairs, default=None)
    def mutate(i):
        order["key"] = [lambda p: -p[1], lambda p: p[0] * p[1], operator.itemgetter(0)][i]
    return P(f, lambda i: (t(2), [(1, 3), (2, 1), (3, 2), (-1, 0)][: i + 2]), mutate)


def p_dict_default_and_counter():
    counts = collections.Counter()
    groups = collections.defaultdict(list)
    def f(x, words):
        for w in words:
            counts[w] += 1
            groups[len(w)].append(w)
        top = counts.most_common(1)
        return x * len(counts), top, dict(groups)
    return P(f, lambda i: (t(2), ["a", "bb", "a", "c"][: i + 1]), state=lambda: (dict(counts), {k: list(v) for k, v in groups.items()}))


def p_module_dict_iteration_order():
    md = torch.nn.ModuleDict({"b": torch.nn.Linear(2, 2), "a": torch.nn.Linear(2, 2)})
    def f(x):
        names = []
        for k, m in md.items():
            x = m(x)
            names.append(k)
        return x, names, "c" in md, len(md)
    def mutate(i):
        if i == 0: md["c"] = torch.nn.Identity()
        elif i == 1: del md["b"]
        elif i == 2: md["b"] = torch.nn.Tanh()
    return P(f, lambda i: (t(1, 2),), mutate)


def p_set_grad_enabled_arg():
    flags = [True]
    def f(x):
        with torch.set_grad_enabled(flags[0]):
            y = x * 2
        torch.set_grad_enabled(True)
        return y, y.requires_grad
    def mutate(i):
        flags[0] = not flags[0]
    return P(f, lambda i: (t(2).requires_grad_(),), mutate)


def p_grad_mode_leak_after_break():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        print("inside")
        z = y + x
        torch.set_grad_enabled(True)
        return z, z.requires_grad, torch.is_grad_enabled()
    return P(f, lambda i: (t(2).requires_grad_(),))


# -- escaping closures, module attributes, dataclasses, slots, context stacks --------------------
def p_closure_escapes():
    def f(x, k):
        def scale(y):
            return y * k + x.sum()
        g = lambda y, kk=k: y - kk
        return scale(x), scale, g
    def inputs(i):
        return (t(2), i)
    # the returned closures are compared by calling them in state? use wrapper
    def wrapper(x, k):
        a, s, g = f(x, k)
        return a, s(torch.ones(2)), g(torch.ones(2)), s.__name__, g.__defaults__
    return P(wrapper, inputs)


def p_closure_returned_called_later():
    store = []
    def f(x, k):
        def scale(y):
            return y * k
        store.append(scale)
        return x + 1
    return P(f, lambda i: (t(2), i), state=lambda: [s(torch.ones(1)) for s in store])


def p_module_attr_assign_in_forward():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.calls = 0
        def forward(self, x):
            self.calls += 1
            self.cache = x.detach() * 2
            if self.calls > 2:
                self.extra = torch.nn.Parameter(torch.ones(2))
            if hasattr(self, "extra"):
                x = x + self.extra
            return self.lin(x)
    m = M()
    return P(m, lambda i: (t(1, 2),), state=lambda: (m.calls, m.cache, sorted(n for n, _ in m.named_parameters())))


def p_register_buffer_in_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            if not hasattr(self, "count"):
                self.register_buffer("count", torch.zeros(()))
            self.count += 1
            return x * self.count
    m = M()
    return P(m, lambda i: (t(2),), state=lambda: m.count.clone())


def p_dataclass_default_factory_post_init():
    @dataclasses.dataclass
    class Acc:
        name: str
        items: list = dataclasses.field(default_factory=list)
        total: float = 0.0
        def __post_init__(self):
            self.name = self.name.upper()
        def add(self, v):
            self.items.append(v)
            self.total += v
    def f(x, vals):
        a = Acc("acc")
        for v in vals:
            a.add(v)
        b = dataclasses.replace(a, name="b")
        return x * a.total, a, b.items is a.items, dataclasses.asdict(a), dataclasses.astuple(b)
    return P(f, lambda i: (t(2), [1.0 * j for j in range(i + 1)]))


def p_namedtuple_subclass_methods():
    class Pt(typing.NamedTuple):
        x: float
        y: float = 0.0
        def norm(self):
            return math.hypot(self.x, self.y)
        def scaled(self, k):
            return Pt(self.x * k, self.y * k)
    pts = [Pt(3.0, 4.0)]
    def f(t_):
        p = pts[0]
        q = p.scaled(2)
        return t_ * p.norm() + q.x, q, q._fields, isinstance(q, tuple), q == (q.x, q.y)
    def mutate(i):
        pts[0] = Pt(float(i), -1.0) if i else Pt(1.0)
    return P(f, lambda i: (t(2),), mutate)


def p_slots_property_setter():
    class V:
        __slots__ = ("_v", "hist")
        def __init__(self, v):
            self._v = v
            self.hist = []
        @property
        def v(self):
            return self._v
        @v.setter
        def v(self, val):
            self.hist.append(val)
            self._v = max(val, 0)
    obj = V(1)
    def f(x, k):
        obj.v = obj.v + k
        return x * obj.v
    return P(f, lambda i: (t(2), [2, -5, 3, 1][i]), state=lambda: (obj._v, list(obj.hist)))


def p_static_class_methods():
    class K:
        base = 2
        @staticmethod
        def s(x): return x + 1
        @classmethod
        def c(cls, x): return x * cls.base
    class K2(K):
        base = 5
    objs = [K()]
    def f(x):
        o = objs[0]
        return o.s(x), o.c(x), type(o).c(x), K.c(x)
    def mutate(i):
        if i == 0: objs[0] = K2()
        elif i == 1: K2.base = -1
        elif i == 2: K.c = classmethod(lambda cls, x: x - cls.base)
    return P(f, lambda i: (t(2),), mutate)


def p_exitstack_and_suppress():
    log = []
    @contextlib.contextmanager
    def tag(n):
        log.append(("enter", n))
        try:
            yield n
        finally:
            log.append(("exit", n))
    def f(x, k):
        with contextlib.ExitStack() as st:
            for j in range(k):
                st.enter_context(tag(j))
            x = x * (k + 1)
        with contextlib.suppress(ZeroDivisionError):
            x = x + 1 / (k - 1)
        return x
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_assert_statements():
    def f(x, n):
        assert n >= 0, f"negative {n}"
        assert x.shape[0] == 2, "shape"
        return x * n
    return P(f, lambda i: (t(2 if i != 2 else 3), [1, 0, 2, -1][i]))


def p_global_written_by_nested_helper():
    def bump(v):
        global _G_TOTAL
        _G_TOTAL = _G_TOTAL + v
        return _G_TOTAL
    def f(x, v):
        a = bump(v)
        b = bump(v)
        return x * a + b
    def mutate(i):
        global _G_TOTAL
        _G_TOTAL = [10, -3, 0][i]
    return P(f, lambda i: (t(2), i + 1), mutate, state=lambda: _G_TOTAL)


_G_TOTAL = 0


def p_varargs_kwargs_shapes_change():
    def g(*args, **kw):
        out = sum(args)
        for k in sorted(kw):
            out = out * kw[k]
        return out, list(kw), len(args)
    def f(x, *rest, **kw):
        return g(x, *rest, **kw)
    def inputs(i):
        return [(t(2),), (t(2), t(2)), (t(2), KW(b=2, a=3)), (t(2), t(2), t(2), KW(a=1))][i]
    return P(f, inputs)


def p_intenum_and_bool_args():
    class Lvl(enum.IntEnum):
        LOW = 1
        HIGH = 3
    def f(x, lvl, flag):
        y = x * lvl
        if flag:
            y = y + 1
        return y, lvl + 1, type(lvl).__name__, flag + 1, lvl == 3
    return P(f, lambda i: (t(2), [Lvl.LOW, 1, Lvl.HIGH, 3][i], [True, 1, False, 0][i]))


def p_reduce_accumulate_map():
    def f(x, ws):
        a = functools.reduce(lambda acc, w: acc * w + 1, ws, x)
        b = list(itertools.accumulate(ws, operator.mul))
        c = list(map(lambda w: x * w, ws))
        d = list(filter(lambda w: w > 1, ws))
        return a, b, torch.stack(c).sum(0), d, list(itertools.chain(ws, [0])), list(itertools.product(ws[:2], repeat=1))
    return P(f, lambda i: (t(2), [1.0 + j for j in range(i + 1)]))


def p_param_data_inplace_no_grad():
    m = torch.nn.Linear(2, 2)
    def f(x):
        out = m(x).sum()
        with torch.no_grad():
            m.weight.data.mul_(0.5)
            m.bias.add_(1.0)
            m.weight[0, 0] = 7.0
        return out, m.weight.sum()
    return P(f, lambda i: (t(1, 2),), state=lambda: m.state_dict())


def p_user_container_protocol():
    class Bag:
        def __init__(self, items): self.items = list(items)
        def __len__(self): return len(self.items)
        def __getitem__(self, i): return self.items[i]
        def __iter__(self): return iter(self.items)
        def __contains__(self, v): return v in self.items
        def __bool__(self): return bool(self.items)
    bags = [Bag([1, 2])]
    def f(x):
        b = bags[0]
        out = x
        for v in b:
            out = out + v
        return out, len(b), 2 in b, (b[0] if b else None), bool(b), list(b)
    def mutate(i):
        bags[0].items.append(i) if i != 1 else bags.__setitem__(0, Bag([]))
    return P(f, lambda i: (t(2),), mutate)


# -- graph breaks inside context managers, closures, comprehensions and loops --------------------
def p_break_inside_user_cm():
    st = {"log": [], "depth": 0}
    class CM:
        def __enter__(self):
            st["depth"] += 1
            st["log"].append("in")
            return st["depth"]
        def __exit__(self, *a):
            st["log"].append(("out", a[0] is not None))
            st["depth"] -= 1
            return False
    def f(x):
        with CM() as d:
            x = x * d
            print("mid", d)
            x = x + st["depth"]
        return x, st["depth"]
    return P(f, lambda i: (t(2),), state=lambda: (list(st["log"]), st["depth"]))


def p_break_inside_nested_closure():
    def f(x, k):
        acc = []
        total = 0
        def step(y):
            nonlocal total
            total += 1
            acc.append(y.sum().item())
            return y * total
        for _ in range(k):
            x = step(x)
        return x, acc, total
    return P(f, lambda i: (t(2), i + 1))


def p_break_in_loop_mutating_list_and_dict():
    def f(x, lst, d):
        for i in range(3):
            lst.append(i)
            d[i] = x.shape[0] + i
            if i == 1:
                v = int(x.sum() > 0)
                lst.append(v)
            x = x + 1
        return x, len(lst)
    return P(f, lambda i: (t(2), [9] * i, {"k": i}))


def p_item_in_comprehension():
    def f(xs):
        vals = [x.max().item() for x in xs]
        d = {i: x.sum().item() for i, x in enumerate(xs)}
        return sum(vals), d, [x * v for x, v in zip(xs, vals)]
    return P(f, lambda i: ([t(3) for _ in range(i + 1)],))


def p_break_then_exception_caught():
    log = []
    def f(x, k):
        try:
            log.append("a")
            y = x.tolist()
            log.append(len(y))
            if k % 2:
                raise ValueError(k)
            z = x * 2
        except ValueError as e:
            log.append(("caught", e.args))
            z = x - 1
        finally:
            log.append("fin")
        return z
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_break_in_generator_consumer():
    def gen(xs):
        for x in xs:
            if x.sum() > 0:
                yield x * 2
            else:
                yield x
    def f(xs):
        out = []
        for y in gen(xs):
            out.append(y + 1)
        return torch.stack(out)
    return P(f, lambda i: ([t(2) for _ in range(3)],))


def p_break_inside_dict_iteration():
    def f(x, d):
        out = x
        for k, v in d.items():
            if v.sum() > 0:
                out = out + v
            else:
                out = out - v
            d[k] = v * 2
        return out
    return P(f, lambda i: (t(2), {"a": t(2), "b": t(2), "c": t(2)}))


def p_break_in_while_with_counter():
    def f(x):
        n = 0
        while x.abs().max() > 1 and n < 10:
            x = x / 2
            n += 1
        return x, n
    return P(f, lambda i: (t(3) * (i + 1) * 4,))


def p_grad_mode_break_inside_no_grad():
    def f(x):
        with torch.no_grad():
            y = x * 2
            if y.sum() > 0:
                y = y + 1
            z = y * x
        return z, z.requires_grad, (x * 3).requires_grad
    return P(f, lambda i: (t(2).requires_grad_(),))


def p_break_in_method_of_module_with_attr_write():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.lin = torch.nn.Linear(2, 2)
        def forward(self, x):
            self.steps += 1
            h = self.lin(x)
            if h.mean() > 0:
                self.steps += 10
                h = h.relu()
            self.last = self.steps
            return h * self.steps
    m = M()
    return P(m, lambda i: (t(3, 2),), state=lambda: (m.steps, m.last))


def p_break_return_in_finally_stack():
    log = []
    def f(x):
        for i in range(3):
            try:
                try:
                    if x[i] > 0:
                        return x * i
                finally:
                    log.append(("inner", i))
            finally:
                log.append(("outer", i))
        return x
    return P(f, lambda i: (t(3),), state=lambda: list(log))


def p_inplace_after_break_on_input():
    def f(x, y):
        x.mul_(2)
        s = float(x.sum())
        y.add_(s)
        x.add_(y)
        return s
    return P(f, lambda i: (t(2), t(2)))


def p_list_of_tensors_aliasing_after_break():
    def f(xs):
        a = xs[0]
        xs[0] = xs[1]
        n = a.sum().item()
        xs[1] = a * n
        a.add_(1)
        return xs[0] is xs[1], n
    return P(f, lambda i: ([t(2), t(2)],))


# -- in-place operators on containers, views of dicts, copies, attributes by name ----------------
def p_inplace_operators_on_input_containers():
    def f(x, lst, d, s, tup):
        lst *= 2
        lst[1:3] = [x.shape[0], 7, 8]
        del lst[::3]
        d |= {"z": 1}
        s |= {5}
        s -= {1}
        tup += (3,)
        alias = lst
        alias += [0]
        return x * len(lst), tup, len(s)
    return P(f, lambda i: (t(2), list(range(i + 2)), {"a": i}, {1, 2, i}, (i,)), dynamic=True)


def p_tensor_augassign_inputs():
    def f(x, y, z):
        a = x
        x += 1
        y *= 2
        z = z + 1
        w = y
        w -= 3
        return a is x, x, y, z
    return P(f, lambda i: (t(2), t(2), t(2)))


def p_list_sort_reverse_keys():
    def f(x, lst, key_sign):
        lst.sort(key=lambda v: key_sign * v)
        first = lst[0]
        lst.reverse()
        lst.insert(1, -1)
        lst.remove(lst[-1])
        return x * first, lst.index(-1), lst.count(-1)
    return P(f, lambda i: (t(2), [3, 1, 2, i], [1, -1][i % 2]), dynamic=True)


def p_dict_views_live():
    def f(x, d):
        ks = d.keys()
        vs = d.values()
        d["new"] = x.shape[0]
        n = len(ks)
        lst = list(vs)
        items = sorted(d.items())
        return x * n, lst, items, "new" in ks
    return P(f, lambda i: (t(2), {"a": i, "b": 2}))


def p_string_accumulate():
    def f(x, words):
        s = ""
        for w in words:
            s += w.upper()
        s2 = "-".join(words) * 2
        parts = s2.split("-")
        return x * len(s), s, parts, s2.count("a"), s.lower().startswith("a")
    return P(f, lambda i: (t(2), ["a", "bc", "d"][: i + 1]))


def p_copy_semantics():
    import copy
    proto = {"w": [1, 2], "n": 3}
    def f(x):
        a = copy.copy(proto)
        b = copy.deepcopy(proto)
        a["w"].append(x.shape[0])
        b["w"].append(-1)
        a["n"] += 1
        c = dict(proto)
        c["n"] = 100
        l2 = proto["w"][:]
        l2.append(9)
        return x * len(proto["w"]), a, b, proto["n"]
    return P(f, lambda i: (t(i + 1),), state=lambda: {"w": list(proto["w"]), "n": proto["n"]})


def p_object_attr_del_and_dict():
    class O: pass
    o = O()
    o.a = 1
    def f(x):
        o.b = x.shape[0]
        if hasattr(o, "a"):
            del o.a
            r = 1
        else:
            o.a = 5
            r = 2
        vars(o)["c"] = 3
        return x * r, sorted(vars(o)), o.__dict__.get("a")
    return P(f, lambda i: (t(i + 1),), state=lambda: dict(vars(o)))


def p_setattr_getattr_dynamic_names():
    class O: pass
    o = O()
    names = ["p", "q"]
    def f(x):
        for j, n in enumerate(names):
            setattr(o, n, x * j)
        total = sum(getattr(o, n) for n in names)
        delattr(o, names[0])
        return total, hasattr(o, names[0]), getattr(o, "zz", None)
    def mutate(i):
        names.append(f"r{i}")
    return P(f, lambda i: (t(2),), mutate, state=lambda: sorted(vars(o)))


def p_nested_list_mutation_alias():
    grid = [[0] * 3 for _ in range(2)]
    row = grid[0]
    def f(x):
        row[1] += x.shape[0]
        grid[1] = row
        grid[0][0] = -1
        return x * sum(map(sum, grid)), grid[0] is grid[1]
    return P(f, lambda i: (t(i + 1),), state=lambda: [list(r) for r in grid])


def p_global_list_cleared_and_rebound():
    def f(x):
        G_ACC.append(x.shape[0])
        if len(G_ACC) > 2:
            G_ACC.clear()
        return x * len(G_ACC)
    def mutate(i):
        global G_ACC
        if i == 1:
            G_ACC = [100]
    return P(f, lambda i: (t(i + 1),), mutate, state=lambda: list(G_ACC))


G_ACC = []


def p_tensor_list_inplace_via_loop_var():
    def f(ts, ws):
        for a, b in zip(ts, ws):
            a.mul_(b)
        for i in range(len(ts)):
            ts[i] = ts[i] + 1
        return sum(ts), ws
    return P(f, lambda i: ([t(2) for _ in range(i + 1)], [float(j) for j in range(i + 1)]))


# -- RNG around graph breaks and seeds -----------------------------------------------------------
def p_rng_around_breaks():
    def f(x):
        a = torch.rand(2)
        print("b")
        b = torch.randn(2) + x
        s = torch.manual_seed(3) if x.sum() > 100 else None
        c = torch.randperm(5)
        d = torch.nn.functional.dropout(x, 0.5, training=True)
        e = torch.bernoulli(torch.full((3,), 0.5))
        return a, b, c, d, e, x.normal_() if False else torch.empty(2).uniform_()
    return P(f, lambda i: (t(2),), state=lambda: (torch.get_rng_state(), random.getstate()))


def p_manual_seed_inside():
    def f(x, seed):
        torch.manual_seed(seed)
        a = torch.rand(2)
        random.seed(seed)
        r = random.random()
        return x + a, r, torch.rand(1)
    return P(f, lambda i: (t(2), [1, 2, 1, 3][i]), state=lambda: (torch.get_rng_state(), random.getstate()))


def p_dropout_module_train_eval():
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.3))
    def mutate(i):
        m.train(i % 2 == 0)
    return P(m, lambda i: (t(4, 3),), mutate, state=lambda: torch.get_rng_state(), calls=5)


def p_fork_rng_and_state_restore():
    def f(x):
        st = torch.random.get_rng_state()
        a = torch.rand(3)
        torch.random.set_rng_state(st)
        b = torch.rand(3)
        return x + a - b, torch.equal(a, b)
    return P(f, lambda i: (t(3),), state=lambda: torch.get_rng_state())


def p_random_in_loop_choice():
    def f(x, n):
        out = x
        picks = []
        for _ in range(n):
            k = random.randint(0, 3)
            picks.append(k)
            out = out * k
        random.shuffle(picks)
        return out, picks, random.uniform(0, 1)
    return P(f, lambda i: (t(2), i + 1), state=lambda: random.getstate())


# -- modules: dynamic names, dtype changes, hooks, forward replaced, shared layers ---------------
def p_module_dynamic_names_and_swap():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = 2
            for i in range(3):
                setattr(self, f"layer{i}", torch.nn.Linear(2, 2))
        def forward(self, x):
            for i in range(self.n):
                x = getattr(self, f"layer{i}")(x)
            return x, sum(p.numel() for p in self.parameters()), [n for n, _ in self.named_children()]
    m = M()
    def mutate(i):
        if i == 0: m.n = 3
        elif i == 1: m.layer0 = torch.nn.Tanh()
        elif i == 2: m.layer1 = m.layer2
    return P(m, lambda i: (t(1, 2),), mutate)


def p_module_to_dtype_between_calls():
    m = torch.nn.Linear(2, 2)
    def f(x):
        return m(x.to(m.weight.dtype)), m.weight.dtype
    def mutate(i):
        m.to([torch.float64, torch.float32, torch.bfloat16][i])
    return P(f, lambda i: (t(1, 2),), mutate)


def p_forward_hook_with_kwargs_and_state():
    m = torch.nn.Linear(2, 2)
    seen = []
    hs = []
    def f(x):
        return m(x) + 1
    def mutate(i):
        if i == 0:
            hs.append(m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(len(args)) or out * 2, with_kwargs=True))
        elif i == 1:
            hs.append(m.register_forward_pre_hook(lambda mod, args: None))
        elif i == 2:
            for h in hs: h.remove()
    return P(f, lambda i: (t(1, 2),), mutate, state=lambda: list(seen))


def p_instance_forward_replaced():
    m = torch.nn.Linear(2, 2)
    orig = m.forward
    def f(x):
        return m(x)
    def mutate(i):
        if i == 0: m.forward = lambda x: orig(x) * 3
        elif i == 1: del m.forward
        elif i == 2: m.forward = types.MethodType(lambda self, x: x - 1, m)
    return P(f, lambda i: (t(1, 2),), mutate)


def p_shared_module_and_param_requires_grad():
    lin = torch.nn.Linear(2, 2)
    seq = torch.nn.Sequential(lin, torch.nn.ReLU(), lin)
    def f(x):
        y = seq(x).sum()
        y.backward()
        g = lin.weight.grad.clone() if lin.weight.grad is not None else None
        lin.zero_grad()
        return y.detach(), g
    def mutate(i):
        lin.weight.requires_grad_(i % 2 == 1)
    return P(f, lambda i: (t(1, 2),), mutate)


def p_modulelist_index_slice():
    ml = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(4)])
    def f(x, k):
        for m in ml[k:]:
            x = m(x)
        x = ml[-1](x)
        return x, len(ml[:k])
    def mutate(i):
        if i == 1: ml.append(torch.nn.Identity())
        if i == 2: del ml[0]
    return P(f, lambda i: (t(1, 2), i % 3), mutate)


def p_module_apply_and_buffers_iter():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.ones(2))
            self.register_buffer("b", torch.zeros(2), persistent=False)
        def forward(self, x):
            for name, buf in self.named_buffers():
                x = x + buf
            return x, [n for n, _ in self.named_buffers()]
    m = M()
    def mutate(i):
        if i == 0: m.a.mul_(3)
        elif i == 1: m.b = None
        elif i == 2: m.register_buffer("c", torch.full((2,), 5.0))
    return P(m, lambda i: (t(2),), mutate)


# -- Python ints, floats and strings: protocols, errors, formatting ------------------------------
def p_symint_python_protocols():
    def f(x):
        n = x.shape[0]
        a = [0] * n
        s = "ab" * n
        tup = (10, 20, 30, 40, 50, 60)
        r = list(range(n))
        return (x * len(a), s, tup[n], tup[-n], tup[:n], r[n // 2:], n in {2, 3}, bool(n - 2), hash(n) == hash(int(n)),
                n.bit_length(), bin(n), max(n, 3), min(n - 5, 0), abs(n - 4), divmod(n, 3), n.__index__(), [1, 2, 3, 4, 5][n - 2],
                "%d-%s" % (n, n), f"{n:03d}", n == 1, int(str(n)) + 1, n & 1, n | 8, n ^ 3, n << 1, n >> 1, ~n)
    return P(f, lambda i: (t([2, 3, 4, 5, 2][i]),), calls=5, dynamic=True)


def p_int_args_python_protocols():
    def f(x, n):
        return (x * n, [0] * n, (1, 2, 3, 4, 5, 6)[n], n.bit_length(), n & 1, n << 2, n >> 1, ~n, -n // 4, n % -3,
                divmod(n, -4), float(n) / 7, n ** 3, math.gcd(n, 12), math.factorial(n) if n < 8 else 0, math.comb(n, 2), round(n / 4), math.isqrt(n))
    return P(f, lambda i: (t(2), [2, 3, 4, 5, 1][i]), calls=5, dynamic=True)


def p_float_python_edge():
    def f(x, v):
        return (x * v, round(v), round(v, 1), math.floor(v), math.ceil(v), int(v), v // 0.5, v % 0.75, divmod(v, -1.5),
                math.fsum([v, 1e16, -1e16]), sum([v, 1e16, -1e16]), float(str(v)), v.is_integer(), v.hex(), math.isclose(v, 2.5),
                math.copysign(1, v), math.fmod(v, 2), f"{v:.3e}", "%.2f" % v, repr(v), str(v * 1e20))
    return P(f, lambda i: (t(2), [2.5, -0.5, 1.5, -2.675, 0.0][i]), calls=5)


def p_zero_division_and_overflow_ints():
    def f(x, a, b):
        try:
            q = a // b
        except ZeroDivisionError as e:
            q = str(e)
        try:
            r = a / b
        except ZeroDivisionError as e:
            r = str(e)
        try:
            m = a % b
        except ZeroDivisionError as e:
            m = str(e)
        try:
            p = 2.0 ** (a * 100)
        except OverflowError as e:
            p = str(e)
        return x + 1, q, r, m, p
    return P(f, lambda i: (t(2), [5, -5, 7, 11, 0][i], [0, 2, 0, -3, 0][i]), calls=5, dynamic=True)


def p_chained_comparisons_and_bool_ops():
    def f(x, a, b, c):
        r1 = a < b <= c
        r2 = a == b or c
        r3 = a and b and c
        r4 = not a or (b and not c)
        r5 = (a if a > b else b) if c else None
        r6 = a is None or a < 0
        y = x * (1 if r1 else 2)
        return y, r1, r2, r3, r4, r5, r6
    return P(f, lambda i: (t(2), [0, 1, 2, -1, 3][i], [1, 1, 0, 2, 3][i], [2, 0, 1, 5, 3][i]), calls=5)


def p_sort_stability_and_ties():
    def f(x, items):
        s = sorted(items, key=lambda p: p[0])
        s2 = sorted(items, key=lambda p: p[0], reverse=True)
        mx = max(items, key=lambda p: p[0])
        mn = min(items, key=lambda p: p[0])
        return x * len(s), s, s2, mx, mn
    return P(f, lambda i: (t(2), [(1, "a"), (0, "b"), (1, "c"), (0, "d")][: i + 2]))


def p_string_formatting_forms():
    def f(x, name, n):
        d = {"name": name, "n": n}
        a = "%(name)s=%(n)d" % d
        b = "{name}:{n:>4}".format(**d)
        c = "{0}{1}{0}".format(name, n)
        e = "{name!r} {n:x}".format_map(d)
        g = f"{name=} {n=:+} {x.shape[0]=}"
        h = "{:,}".format(n * 1000)
        return x * n, a, b, c, e, g, h, name.center(7, "*"), name.zfill(5), name.title(), name.split("_")
    return P(f, lambda i: (t(2), ["ab_c", "x", "hello_world", "q_q"][i], [1, 22, 333, -4][i]))


# -- identity, gradients, hooks on tensors, weakrefs, iterators ----------------------------------
def p_id_keyed_cache():
    cache = {}
    def f(x, w):
        k = id(w)
        if k not in cache:
            cache[k] = w.sum()
        return x * cache[k], len(cache)
    ws = [torch.ones(2), torch.full((2,), 2.0)]
    def inputs(i):
        return (t(2), ws[i % 2])
    return P(f, inputs, state=lambda: len(cache))


def p_tensor_identity_after_inplace():
    def f(x, y):
        a = x.add_(1)
        b = x.view(-1)
        c = x.detach()
        d = x.data
        return a is x, b is x, c is x, d is x, x is y, (a + b + c + d)
    def inputs(i):
        x = t(2)
        return (x, x if i % 2 else t(2))
    return P(f, inputs)


def p_grad_accumulation_across_calls():
    w = torch.ones(3, requires_grad=True)
    def f(x):
        y = (w * x).sum()
        y.backward()
        return w.grad.clone(), w.is_leaf, y.is_leaf, y.requires_grad
    def mutate(i):
        if i == 1: w.grad.zero_()
        if i == 2: w.grad = None
    return P(f, lambda i: (t(3),), mutate)


def p_tensor_register_hook_and_retain_grad():
    def f(x):
        y = x * 2
        y.retain_grad()
        seen = []
        y.register_hook(lambda g: seen.append(g.sum().item()) or g * 3)
        z = (y ** 2).sum()
        z.backward()
        return x.grad, y.grad, seen
    return P(f, lambda i: (t(3).requires_grad_(),))


def p_weakref_and_finalize():
    class Node: pass
    keep = [Node()]
    def f(x):
        r = weakref.ref(keep[0])
        alive = r() is not None
        return x + 1, alive, r() is keep[0]
    return P(f, lambda i: (t(2),))


def p_getattr_raising_attributeerror():
    class Lazy:
        def __init__(self):
            self.vals = {"a": 1}
        def __getattr__(self, name):
            if name in self.vals:
                return self.vals[name]
            raise AttributeError(name)
    obj = Lazy()
    def f(x):
        return x * getattr(obj, "a", 0) + getattr(obj, "b", 10), hasattr(obj, "b")
    def mutate(i):
        obj.vals["b"] = i
    return P(f, lambda i: (t(2),), mutate)


def p_eq_returning_tensor_in_containers():
    def f(x, xs):
        found = any(t_ is x for t_ in xs)
        idx = [i for i, t_ in enumerate(xs) if t_ is x]
        try:
            k = xs.index(x)
        except RuntimeError as e:
            k = "ambiguous"
        return found, idx, k, x * 2
    def inputs(i):
        x = t(1)
        return (x, [t(1), x] if i % 2 else [x])
    return P(f, inputs)


def p_closure_over_loop_variable():
    def f(x, n):
        fns = [lambda y: y * i for i in range(n)]
        fns2 = [(lambda y, i=i: y * i) for i in range(n)]
        return [g(x) for g in fns], [g(x) for g in fns2]
    return P(f, lambda i: (t(2), i + 1))


def p_iterator_protocol_partial():
    def f(x, lst):
        it = iter(lst)
        first = next(it)
        rest = list(it)
        again = list(it)
        g = (v * 2 for v in lst)
        a = next(g)
        b = next(g, None)
        z = zip(lst, lst[1:])
        pairs = list(z)
        return x * first, rest, again, a, b, pairs, next(iter([]), "empty")
    return P(f, lambda i: (t(2), list(range(1, i + 3))))


def p_class_property_on_module_setter():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self._scale = 1.0
            self.lin = torch.nn.Linear(2, 2)
        @property
        def scale(self):
            return self._scale
        @scale.setter
        def scale(self, v):
            self._scale = float(v) * 2
        def forward(self, x):
            self.scale = self.scale + 1
            return self.lin(x) * self.scale
    m = M()
    return P(m, lambda i: (t(1, 2),), state=lambda: m._scale)


# -- short-circuit evaluation, decorators with state, exception chaining, stdlib helpers ---------
def p_short_circuit_side_effects():
    log = []
    def check(v, tag):
        log.append(tag)
        return v
    def f(x, a, b):
        r1 = any(check(v > 0, i) for i, v in enumerate([a, b, 1]))
        r2 = all(check(v > 0, -i) for i, v in enumerate([a, b]))
        r3 = check(a, "a") and check(b, "b")
        r4 = check(a, "a2") or check(b, "b2")
        return x * int(r1) + int(r2), r3, r4
    return P(f, lambda i: (t(2), [0, 1, -1, 2][i], [1, 0, 2, -2][i]), state=lambda: list(log))


def p_counting_decorator():
    @_counted
    def helper(x, k=1):
        return x * k
    def f(x):
        return helper(x, k=helper.calls), helper.__name__, helper.calls
    return P(f, lambda i: (t(2),), state=lambda: helper.calls)


def p_exception_chaining():
    class AppError(Exception): pass
    def inner(k):
        if k % 2:
            raise KeyError(k)
        return k
    def f(x, k):
        try:
            try:
                v = inner(k)
            except KeyError as e:
                raise AppError(f"wrapped {k}") from e
        except AppError as e2:
            return x - 1, str(e2), type(e2.__cause__).__name__, e2.__cause__.args
        return x * v, None, None, None
    return P(f, lambda i: (t(2), i))


def p_operator_getters_and_deque():
    def f(x, recs):
        ig = operator.itemgetter(1, 0)
        ag = operator.attrgetter("real")
        mc = operator.methodcaller("upper")
        dq = collections.deque(maxlen=3)
        for r in recs:
            dq.append(r[0])
        dq.appendleft(-1)
        dq.rotate(1)
        od = collections.OrderedDict.fromkeys("abc", 0)
        od.move_to_end("a")
        return x * len(dq), [ig(r) for r in recs], ag(3), mc("ab"), list(dq), list(od), dq.maxlen
    return P(f, lambda i: (t(2), [(j, str(j)) for j in range(i + 2)]))


def p_heapq_bisect():
    def f(x, vals):
        h = []
        for v in vals:
            heapq.heappush(h, v)
        smallest = heapq.heappop(h)
        srt = sorted(vals)
        pos = bisect.bisect_left(srt, 2)
        bisect.insort(srt, 2)
        return x * smallest, h, pos, srt, heapq.nlargest(2, vals)
    return P(f, lambda i: (t(2), [5, 1, 3, 2, 4][: i + 2]))


def p_shape_arith_and_unpack_errors():
    def f(x):
        s = x.shape
        a = s + (1,)
        b = s[1:]
        v = x.view(*s[:-1], -1, 1)
        try:
            r, c = x.shape
            err = None
        except ValueError as e:
            r = c = 0
            err = str(e)
        return v, a, b, torch.Size([2, 3]) == s, r, c, err, x.dim(), x.ndim, len(s), s.numel()
    return P(f, lambda i: (t(*[[2, 3], [2, 3, 4], [4], [2, 3]][i]),))


def p_dtype_device_queries():
    def f(x):
        eps = torch.finfo(x.dtype).eps if x.dtype.is_floating_point else torch.iinfo(x.dtype).max
        y = x.float() if not torch.is_floating_point(x) else x
        c = x.t().is_contiguous() if x.dim() == 2 else x.is_contiguous()
        return y * 2, eps, x.device.type == "cpu", str(x.dtype), c, x.stride(), x.element_size(), x.is_complex()
    return P(f, lambda i: ([t(2, 3), torch.arange(6).view(2, 3), t(3, dtype=torch.float64), torch.ones(2, 2, dtype=torch.int32)][i],))


def p_with_multiple_items_and_else_return():
    log = []
    @contextlib.contextmanager
    def cm(n):
        log.append(("in", n))
        yield n * 2
        log.append(("out", n))
    def f(x, k):
        with cm(1) as a, cm(2) as b:
            try:
                if k == 2:
                    raise ValueError("v")
            except ValueError:
                return x - a, "except"
            else:
                if k == 1:
                    return x + b, "else"
            finally:
                log.append("finally")
        return x * a * b, "end"
    return P(f, lambda i: (t(2), i), state=lambda: list(log))


def p_global_list_rebound_inside():
    def f(x):
        global G_REB
        old = G_REB
        G_REB = G_REB + [x.shape[0]]
        old.append(-1)
        return x * len(G_REB), old is G_REB
    return P(f, lambda i: (t(i + 1),), state=lambda: list(G_REB))


G_REB = [0]


def p_class_attr_via_instance_and_class():
    class C:
        count = 0
        items = []
        def bump(self):
            self.count += 1
            self.items.append(self.count)
            type(self).total = getattr(type(self), "total", 0) + 1
            return self.count
    objs = [C(), C()]
    def f(x):
        a = objs[0].bump()
        b = objs[1].bump()
        return x * (a + b), C.count, list(C.items), C.total, objs[0].count
    def mutate(i):
        C.count = 10 * (i + 1)
    return P(f, lambda i: (t(2),), mutate)


# -- cached_property, ABC registration, symbolic ints held by objects, descriptors, registries ---
def p_cached_property():
    class C:
        def __init__(self, k):
            self.k = k
            self.computed = 0
        @functools.cached_property
        def scale(self):
            self.computed += 1
            return self.k * 2
    objs = [C(1)]
    def f(x):
        c = objs[0]
        return x * c.scale + c.scale, c.computed
    def mutate(i):
        if i == 0: objs[0].k = 5
        elif i == 1: del objs[0].scale
        elif i == 2: objs[0] = C(7)
    return P(f, lambda i: (t(2),), mutate, state=lambda: (objs[0].computed, vars(objs[0]).get("scale")))


def p_abc_register_changes():
    class Base(abc.ABC):
        @abc.abstractmethod
        def go(self): ...
    class Impl(Base):
        def go(self): return 2
    class Other:
        def go(self): return 3
    objs = [Impl()]
    def f(x):
        o = objs[0]
        k = o.go() if isinstance(o, Base) else -1
        return x * k, issubclass(type(o), Base)
    def mutate(i):
        if i == 0: objs[0] = Other()
        elif i == 1: Base.register(Other)
    return P(f, lambda i: (t(2),), mutate)


def p_symint_in_exception_and_objects():
    class Info:
        def __init__(self, n):
            self.n = n
            self.tag = f"n={n}"
    def f(x):
        n = x.shape[0]
        info = Info(n)
        out = {"n": n, "half": n // 2, "items": [n, n + 1]}
        try:
            if n > 3:
                raise ValueError(n, f"too big {n}")
        except ValueError as e:
            out["err"] = e.args
        return x * n, info.n, info.tag, out, range(n)[-1], slice(0, n).stop, tuple(range(n))
    return P(f, lambda i: (t([2, 3, 5, 7][i]),), dynamic=True)


def p_generator_method_and_iter_class():
    class Seq:
        def __init__(self, n): self.n = n
        def __iter__(self):
            for i in range(self.n):
                yield i * 2
        def pairs(self):
            yield from zip(self, list(self)[1:])
    seqs = [Seq(3)]
    def f(x):
        s = seqs[0]
        return x * sum(s), list(s.pairs()), max(s, default=-1)
    def mutate(i):
        seqs[0].n = [0, 5, 2][i]
    return P(f, lambda i: (t(2),), mutate)


def p_set_name_and_class_getitem():
    class Field:
        def __set_name__(self, owner, name):
            self.name = name
        def __get__(self, obj, objtype=None):
            return self if obj is None else obj.__dict__.get(self.name, 0) + 100
    class Rec:
        a = Field()
        b = Field()
    r = Rec()
    def f(x):
        return x * r.a + r.b, Rec.a.name, list[int] == list[int]
    def mutate(i):
        r.__dict__["a"] = i
    return P(f, lambda i: (t(2),), mutate)


def p_staticmethod_registry_dict():
    REG = {}
    def register(name):
        def deco(fn):
            REG[name] = fn
            return fn
        return deco
    @register("double")
    def _d(x): return x * 2
    @register("neg")
    def _n(x): return -x
    mode = ["double"]
    def f(x):
        fn = REG[mode[0]]
        return fn(x), sorted(REG)
    def mutate(i):
        mode[0] = ["neg", "sq", "double"][i]
        if i == 0:
            register("sq")(lambda x: x * x)
    return P(f, lambda i: (t(2),), mutate)


# -- symbolic ints read, then their container, attribute or global rewritten ---------------------
def p_list_items_symbolic_then_mutated_and_returned():
    def f(x, lst, d):
        a = lst[0]
        lst[0] = lst[-1]
        lst[-1] = a
        b = d["k"]
        d["k"] = b + 1
        del lst[1]
        return x * a, a, b, lst, d
    return P(f, lambda i: (t(2), [i + 5, i + 1, i + 2], {"k": i + 3}), calls=5, dynamic=True)


def p_attr_symbolic_swap():
    class S: pass
    s = S()
    s.a, s.b = 3, 4
    def f(x):
        s.a, s.b = s.b, s.a + x.shape[0]
        return x * s.a, s.a, s.b
    return P(f, lambda i: (t(i + 1),), state=lambda: (s.a, s.b), calls=5)


def p_global_int_symbolic_read_then_written():
    def f(x):
        global G_N
        old = G_N
        G_N = old + x.shape[0]
        return x * old, old, G_N
    return P(f, lambda i: (t(i + 2),), state=lambda: G_N, calls=5)


G_N = 1


def p_closure_int_symbolic_read_then_written():
    n = 1
    def f(x):
        nonlocal n
        old = n
        n = old * 2 + x.shape[0]
        return x * old, old, n
    return P(f, lambda i: (t(i + 2),), state=lambda: n, calls=5)


def p_list_of_ints_grows_in_place_dynamic():
    hist = [1]
    def f(x):
        last = hist[-1]
        hist.append(last + x.shape[0])
        hist.insert(0, -last)
        return x * last, last, len(hist)
    return P(f, lambda i: (t(i + 1),), state=lambda: list(hist), calls=5)


# -- exceptions holding lists, symbolic ints and custom attributes; sum() starts; mixed scalars ---
def p_exception_args_non_constant():
    def f(x, lst):
        try:
            raise ValueError("bad", lst, x.shape[0])
        except ValueError as e:
            a = e.args
        try:
            raise KeyError({"k": lst[0]})
        except KeyError as e:
            b = str(e)
        return x + 1, a[0], a[1] == lst, a[2], b
    return P(f, lambda i: (t(i + 2), [i, 2]))


def p_exception_custom_init_attrs_dynamic():
    class E(Exception):
        def __init__(self, n, where):
            super().__init__(f"{where}:{n}")
            self.n = n
            self.where = where
    def f(x, k):
        try:
            if k >= 0:
                raise E(k * 2, "f")
        except E as e:
            return x * e.n, str(e), e.where, e.args
        return x, None, None, None
    return P(f, lambda i: (t(2), [3, 4, -1, 5, 6][i]), calls=5)


def p_sum_with_start_and_floats():
    def f(x, vals):
        s = sum(vals, 0.5)
        s2 = sum([[v] for v in vals], [])
        s3 = sum((v / 3 for v in vals), start=0.1)
        return x * s, s, s2, s3, math.prod(vals), math.fsum(v / 3 for v in vals)
    return P(f, lambda i: (t(2), [1, 2, 3, 4][: i + 1]))


def p_int_float_scalar_mixing_dynamic():
    def f(x, a, b):
        return x * (a + b), a + b, a * b, a / b, (a + 0.5) * 2, b ** 2, a - b, (a * 1.0) / 3
    return P(f, lambda i: (t(2), [1, 2, 3, 4][i], [0.5, 1.5, -2.0, 3.25][i]), dynamic=True)


def p_raise_exception_argument():
    def f(x, err):
        try:
            raise err
        except ValueError as e:
            return x + 1, str(e), e is err

    return P(f, lambda i: (t(2), ValueError(f"m{i}")))


def p_breaks_in_nested_comprehensions():
    def f(xs, d):
        nested = [[x.sum().item() * j for j in range(2)] for x in xs]
        by_key = {k: v.max().item() for k, v in d.items()}
        gen = list(x.min().item() for x in xs)
        merged = {**by_key, **{f"n{i}": v for i, v in enumerate(gen)}}
        return nested, by_key, gen, merged, {round(v) for v in gen}
    return P(f, lambda i: ([t(2) for _ in range(i + 1)], {"a": t(2), "b": t(3)}))


def p_dict_comprehension_into_input_after_break():
    def f(x, d):
        s = x.sum().item()
        d.update({k: v * s for k, v in d.items()})
        d |= {"s": s}
        return x * s
    return P(f, lambda i: (t(2), {"a": i, "b": 2}))


def p_no_grad_method_decorator_and_inference_mode_nesting():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
        @torch.no_grad()
        def stats(self, x):
            return self.lin(x).mean()
        @torch.inference_mode()
        def frozen(self, x):
            return x * 2
        def forward(self, x):
            s = self.stats(x)
            with torch.inference_mode(False):
                y = self.lin(x) * s
            with torch.enable_grad():
                z = y.sum()
            return y, s.requires_grad, z.requires_grad, torch.is_grad_enabled()
    m = M()
    return P(m, lambda i: (t(1, 2),))


def p_autocast_branches():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            enabled = torch.is_autocast_enabled("cpu") if hasattr(torch, "is_autocast_enabled") else None
        z = x @ w
        return y.dtype, z.dtype, y.float(), z
    return P(f, lambda i: (t(2, 2), t(2, 2)))


# == third round: clocks and RNG objects, cells and defaults, attribute protocol, enums, stdlib ==
# -- helpers, itertools, formatting, exceptions and generators, numbers, torch.Size, modules -----
def p_time_not_frozen():
    last = [0.0, 0.0]
    def f(x):
        now, perf = time.monotonic(), time.perf_counter()
        later = now >= last[0] and perf > last[1]
        last[0], last[1] = now, perf
        return x + 1, later, time.time() > 1e9
    return P(f, lambda i: (t(2),))


def p_random_instance_in_closure():
    rng = random.Random(0)
    def f(x, n):
        a = rng.random()
        b = rng.randint(0, n)
        items = list(range(n))
        rng.shuffle(items)
        return x * a + b, a, b, items, rng.choice("abc")
    return P(f, lambda i: (t(2), i + 2), state=lambda: rng.getstate())


def p_random_module_more_draws():
    def f(x, n):
        g = random.gauss(0, 1)
        u = random.uniform(-1, 1)
        s = random.sample(range(10), n)
        c = random.choices("abcd", k=n)
        bits = random.getrandbits(70)
        return x * g + u, g, u, s, c, bits
    return P(f, lambda i: (t(2), i + 1))


def p_nonlocal_counter_branch():
    count = 0
    def f(x):
        nonlocal count
        count += 1
        if count % 2:
            return x * count
        return x - count
    def mutate(i):
        nonlocal count
        if i == 1:
            count = 10
    return P(f, lambda i: (t(2),), mutate, state=lambda: count, calls=5)


def p_closure_cell_rebound_by_setter():
    def make():
        scale = 2
        def get(x):
            return x * scale, scale
        def set_(v):
            nonlocal scale
            scale = v
        return get, set_
    get, set_ = make()
    def mutate(i):
        set_([3, 0.5, torch.tensor(4.0), 1][i])
    return P(get, lambda i: (t(2),), mutate, calls=5)


def p_default_list_grows_branch():
    def f(x, seen=[]):
        seen.append(x.shape[0])
        if len(seen) > 2:
            return x * len(seen), list(seen)
        return x, list(seen)
    return P(f, lambda i: (t(i % 2 + 2),), state=lambda: list(f.__defaults__[0]), calls=5)


def p_defaults_tuple_replaced():
    def helper(x, k=1, *, m=2):
        return x * k + m
    def f(x):
        return helper(x), helper(x, 3)
    def mutate(i):
        helper.__defaults__ = ([5, 0.5, -1][i],)
        helper.__kwdefaults__ = {"m": [7, 8, 9][i]}
    return P(f, lambda i: (t(2),), mutate)


G_R3 = 1
G_R3_D = {"a": 1}


def p_global_write_in_loop_then_read():
    def f(x, n):
        global G_R3
        for _ in range(n):
            G_R3 = G_R3 * 2 % 97
            x = x + G_R3
        return x, G_R3
    def mutate(i):
        global G_R3
        G_R3 = [5, -3, 0][i]
    return P(f, lambda i: (t(2), i + 1), mutate, state=lambda: G_R3)


def p_global_dict_rebound():
    def f(x):
        return x * G_R3_D["a"], sorted(G_R3_D)
    def mutate(i):
        global G_R3_D
        if i == 0:
            G_R3_D = {"a": 3, "b": 1}
        elif i == 1:
            G_R3_D["a"] = 7
        else:
            G_R3_D = dict(G_R3_D, c=2)
    return P(f, lambda i: (t(2),), mutate)


def p_global_created_and_deleted():
    def f(x, make):
        global G_R3_NEW
        if make:
            G_R3_NEW = x.shape[0]
            return x * G_R3_NEW
        del G_R3_NEW
        return x
    def state():
        return globals().get("G_R3_NEW", "absent")
    return P(f, lambda i: (t(i + 1), i % 2 == 0), state=state)


def p_class_instance_attr_shadowing():
    class C:
        k = 2
    o = C()
    def f(x):
        return x * o.k, C.k, "k" in vars(o)
    def mutate(i):
        if i == 0:
            o.k = 5
        elif i == 1:
            C.k = 9
        elif i == 2:
            del o.k
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_property_reading_changing_state():
    class Box:
        def __init__(self):
            self._w = 1
            self.reads = 0
        @property
        def w(self):
            self.reads += 1
            return self._w * 2
        @w.setter
        def w(self, v):
            self._w = v + 1
    b = Box()
    def f(x):
        y = x * b.w
        b.w = b.w + 1
        return y, b.w, b.reads
    def mutate(i):
        b._w = [0, 5, -2][i]
    return P(f, lambda i: (t(2),), mutate, state=lambda: vars(b))


def p_getattribute_override():
    class Aliased:
        def __init__(self):
            object.__setattr__(self, "aliases", {"width": "hidden"})
            object.__setattr__(self, "hidden", 3)
        def __getattribute__(self, name):
            aliases = object.__getattribute__(self, "aliases")
            return object.__getattribute__(self, aliases.get(name, name))
    o = Aliased()
    def f(x):
        return x * o.width + o.hidden, o.width
    def mutate(i):
        if i == 0:
            object.__setattr__(o, "hidden", 5)
        elif i == 1:
            o.aliases["width"] = "other"
            object.__setattr__(o, "other", -2)
    return P(f, lambda i: (t(2),), mutate)


def p_nondata_descriptor_shadowed():
    class Lazy:
        def __get__(self, obj, owner=None):
            return self if obj is None else 10
    class C:
        v = Lazy()
    c = C()
    def f(x):
        return x * c.v, c.v
    def mutate(i):
        if i == 0:
            c.__dict__["v"] = 3
        elif i == 1:
            del c.__dict__["v"]
        elif i == 2:
            C.v = 4
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_slots_deleted_and_set():
    class S:
        __slots__ = ("a", "b")
        def __init__(self):
            self.a = 1
    s = S()
    def f(x):
        has_b = hasattr(s, "b")
        s.a = s.a + 1
        return x * s.a + (s.b if has_b else 0), has_b
    def mutate(i):
        if i == 0:
            s.b = 4
        elif i == 1:
            del s.b
        elif i == 2:
            s.b = -1
    return P(f, lambda i: (t(2),), mutate, state=lambda: s.a, calls=5)


def p_dataclass_order_frozen_hash():
    @dataclasses.dataclass(order=True, frozen=True)
    class V:
        major: int
        minor: int = 0
    def f(x, a, b):
        va, vb = V(*a), V(*b)
        d = {va: 1}
        return (x * (2 if va < vb else 3), va == vb, max(va, vb), vb in d, dataclasses.astuple(vb),
                dataclasses.asdict(va), hash(va) == hash(V(*a)), sorted([vb, va]))
    vals = [((1, 2), (1, 3)), ((2, 0), (1, 9)), ((1, 1), (1, 1)), ((0, 5), (0, 4))]
    return P(f, lambda i: (t(2),) + vals[i])


def p_dataclass_mutated_field_between_calls():
    @dataclasses.dataclass
    class Cfg:
        scale: float = 1.0
        layers: list = dataclasses.field(default_factory=list)
    cfg = Cfg()
    def f(x):
        for k in cfg.layers:
            x = x * k
        return x * cfg.scale, len(cfg.layers)
    def mutate(i):
        cfg.layers.append(i + 2)
        cfg.scale = [0.5, 2.0, -1.0][i]
    return P(f, lambda i: (t(2),), mutate)


def p_namedtuple_methods():
    class Pair(typing.NamedTuple):
        a: int
        b: int = 5
        def total(self):
            return self.a + self.b
    Q = collections.namedtuple("Q", "x y", defaults=[0])
    def f(x, n):
        p = Pair(n)
        q = Q(n, n * 2)
        p2 = p._replace(b=n + 1)
        return (x * p.total() + q.y, p2, p._asdict(), Pair._fields, q._fields, Q._make([1, 2]),
                p2 > p, tuple(p2), Q(3))
    return P(f, lambda i: (t(2), i + 1))


def p_enum_lookup_and_iteration():
    class Color(enum.Enum):
        RED = 1
        GREEN = 2
        BLUE = 3
    class Lvl(enum.IntEnum):
        LOW = 1
        HIGH = 5
    class Perm(enum.Flag):
        R = 4
        W = 2
        X = 1
    def f(x, v, name, bits):
        c = Color(v)
        by_name = Color[name]
        perm = Perm(bits)
        out = x * c.value + Lvl.HIGH * 2 - Lvl(1)
        return (out, c.name, by_name is c, [m.name for m in Color], len(Lvl), Perm.R in perm,
                perm & Perm.W == Perm.W, Lvl.HIGH > 3, isinstance(Lvl.LOW, int), c == by_name)
    vals = [(1, "RED", 7), (2, "BLUE", 4), (3, "BLUE", 0), (2, "GREEN", 3)]
    return P(f, lambda i: (t(2),) + vals[i])


def p_enum_as_dict_key_and_match():
    class Mode(enum.Enum):
        A = "a"
        B = "b"
    table = {Mode.A: 2, Mode.B: 3}
    def f(x, m):
        match m:
            case Mode.A:
                y = x + table[m]
            case Mode.B:
                y = x * table[m]
        return y, m.value
    def mutate(i):
        table[Mode.A] = 10 + i
    return P(f, lambda i: (t(2), [Mode.A, Mode.B][i % 2]), mutate)


def p_partial_keywords_mutated():
    p = functools.partial(torch.add, alpha=2)
    def f(x, y):
        return p(x, y), sorted(p.keywords)
    def mutate(i):
        p.keywords["alpha"] = [3, -1, 0.5][i]
    return P(f, lambda i: (t(2), t(2)), mutate)


def p_partial_of_partial_and_reduce():
    def combine(a, b, *, w=1.0):
        return a * w + b
    def f(x, w, xs):
        inner = functools.partial(combine, w=w)
        outer = functools.partial(inner, w=w * 2)
        r1 = functools.reduce(inner, xs, x)
        r2 = functools.reduce(outer, xs)
        r3 = functools.reduce(operator.mul, [len(xs), 2, 3], 1)
        return r1, r2, r3, outer.keywords
    return P(f, lambda i: (t(2), [0.5, 2.0, -1.0, 1.0][i], [t(2) for _ in range(i + 1)]))


def p_operator_getters_complex():
    class O:
        def __init__(self, k):
            self.inner = types.SimpleNamespace(k=k)
        def scale(self, x, by=1):
            return x * self.inner.k * by
    def f(x, ks):
        objs = [O(k) for k in ks]
        g = operator.attrgetter("inner.k")
        mc = operator.methodcaller("scale", x, by=2)
        ig = operator.itemgetter(0, -1)
        return ([g(o) for o in objs], [mc(o) for o in objs], ig(ks), operator.index(ks[0]),
                operator.truediv(ks[0], 2), operator.neg(x), operator.contains(ks, 3))
    return P(f, lambda i: (t(2), [3, 1, 4, 1, 5][: i + 1]))


def p_itertools_more():
    def f(x, n):
        words = ["apple", "avocado", "banana", "blueberry", "cherry", "apricot"][:n + 2]
        g = [(k, list(v)) for k, v in itertools.groupby(words, key=lambda w: w[0])]
        zl = list(itertools.zip_longest(range(n), "ab", fillvalue=-1))
        sm = list(itertools.starmap(pow, [(2, n), (3, 2)]))
        acc = list(itertools.accumulate(range(1, n + 2), operator.mul, initial=1))
        sl = list(itertools.islice(range(20), 1, 2 * n + 3, 2))
        cf = list(itertools.chain.from_iterable([[1], [2, 3], range(n)]))
        cyc = list(itertools.islice(itertools.cycle("xy"), n + 1))
        a, b = itertools.tee(range(n + 1))
        comp = list(itertools.compress("abcdef", [1, 0, 1, 0, n > 1, 1]))
        dw = list(itertools.dropwhile(lambda v: v < n, range(6)))
        tw = list(itertools.takewhile(lambda v: v < n, range(6)))
        ff = list(itertools.filterfalse(lambda v: v % 2, range(n + 3)))
        return x * len(g), g, zl, sm, acc, sl, cf, cyc, list(a), list(b), comp, dw, tw, ff
    return P(f, lambda i: (t(2), i + 1), dynamic=True)


def p_itertools_on_tensors():
    def f(xs):
        pairs = [a * b for a, b in itertools.combinations(xs, 2)]
        runs = list(itertools.accumulate(xs))
        prod = [a + b for a, b in itertools.product(xs[:2], repeat=2)]
        zl = [a if b is None else a - b for a, b in itertools.zip_longest(xs, xs[1:])]
        return pairs, runs, prod, zl
    return P(f, lambda i: ([t(2) for _ in range(i + 2)],), aot=True)


def p_sorted_key_reverse_stability():
    def f(x, recs):
        by_b = sorted(recs, key=operator.itemgetter(1), reverse=True)
        by_len = sorted(recs, key=lambda r: (len(r[0]), -r[1]))
        names = sorted((r[0] for r in recs), key=str.lower)
        best = max(recs, key=lambda r: r[1])
        worst = min(recs, key=lambda r: r[1], default=None)
        return x * best[1], by_b, by_len, names, best, worst, min([], default="none"), max(3, 9, 4, key=lambda v: -v)
    recs = [("b", 2), ("Aa", 2), ("c", 5), ("dd", 1), ("E", 5)]
    return P(f, lambda i: (t(2), recs[: i + 2]))


def p_reversed_list_mutated_during():
    def f(x, lst):
        out = []
        for v in reversed(lst):
            out.append(v)
            if v % 2 == 0 and lst:
                lst.pop()
        return x * len(out), out, lst
    return P(f, lambda i: (t(2), [1, 2, 3, 4, 6, 5][: i + 3]))


def p_dict_views_after_mutation_local():
    def f(x, n):
        d = {f"k{i}": i for i in range(n)}
        keys, items, vals = d.keys(), d.items(), d.values()
        d["new"] = 10
        del d["k0"]
        inter = keys & {"k1", "new", "zz"}
        union = sorted(keys | {"q"})
        return (x * len(keys), list(keys), list(items), sum(vals), sorted(inter), union,
                ("new", 10) in items, list(reversed(d)), keys == {"new", *[f"k{i}" for i in range(1, n)]})
    return P(f, lambda i: (t(2), i + 1))


def p_dict_methods_local():
    def f(x, n):
        d = dict(a=1, b=2)
        d.update(c=n, a=n * 2)
        d.update([("z", 0)], y=5)
        s = d.setdefault("b", 100)
        s2 = d.setdefault("e", [])
        s2.append(n)
        p = d.pop("a")
        last = d.popitem()
        c = d.copy()
        c.clear()
        fk = dict.fromkeys(["u", "v"], n)
        return x * p + s, d, last, c, fk, d.get("zz", n), list(d.items())
    return P(f, lambda i: (t(2), i), dynamic=True)


def p_list_methods_local():
    def f(x, n):
        lst = [5, 3, n, 1, 3]
        lst.insert(-1, 9)
        lst.insert(100, 8)
        lst.insert(-100, 0)
        lst.remove(3)
        i3 = lst.index(3)
        i_start = lst.index(5, 0, 3) if 5 in lst[:3] else -1
        cnt = lst.count(3)
        lst.sort(key=lambda v: -v, reverse=True)
        copy_ = lst.copy()
        copy_.reverse()
        try:
            lst.remove(42)
        except ValueError as e:
            err = str(e)
        return x * i3, lst, copy_, cnt, i_start, err
    return P(f, lambda i: (t(2), [2, 3, 7][i]), calls=3, dynamic=True)


def p_string_methods_feed_shapes():
    def f(x, spec):
        name, dims = spec.split(":")
        rows, cols = (int(v) for v in dims.split(","))
        tag = name.strip().upper().replace("-", "_").zfill(6)
        y = x[:rows, :cols] * (2 if name.startswith("sc") else 1)
        return (y, tag, name.partition("-"), dims.count(","), "-".join(reversed(name.split("-"))),
                name.center(9, "*"), name.find("z"), name.title(), spec.endswith(("1", "2")), name.isalpha())
    specs = ["scale-a:2,3", "id:1,1", " sc-x :3,2", "up-down:2,2"]
    return P(f, lambda i: (t(4, 4), specs[i]))


def p_format_specs():
    def f(x, n, v):
        s = (f"{n:>5}|{n:<4}|{n:^7}|{n:#x}|{n:08b}|{n:,}|{v:.3f}|{v:e}|{v:+.1%}|{v!r}|{n:{n % 4 + 2}d}",
             "{:08.3f}|{:>{w}}|{k}".format(v, n, w=n % 5 + 1, k="kw"),
             "%5.2f %d %s %r %x %-4d|" % (v, n, "s", "r", n, n),
             "%(a)s-%(b)03d" % {"a": "A", "b": n},
             format(v, ".2g"), format(n, "x"))
        branch = x * 2 if f"{v:.1f}".endswith("5") else x
        return branch, s
    vals = [(7, 1.25), (255, -0.05), (12345, 3.14159), (0, 2.5)]
    return P(f, lambda i: (t(2),) + vals[i], dynamic=True)


def p_format_symbolic_sizes():
    def f(x):
        n = x.shape[0]
        key = f"n{n:03d}"
        cache = {key: n}
        msg = "rows=%d cols=%s" % (n, x.shape[1])
        return x * len(key), key, cache, msg, "{}x{}".format(*x.shape), str(x.shape)
    return P(f, lambda i: (t([2, 3, 5, 12][i], 2),), dynamic=True)


def p_return_in_finally_swallows():
    log = []
    def g(k):
        try:
            if k > 1:
                raise ValueError(k)
            return "body"
        finally:
            log.append(k)
            if k % 2:
                return "finally"
    def f(x, k):
        try:
            r = g(k)
        except ValueError as e:
            r = f"raised {e}"
        else:
            r = r + "!"
        finally:
            log.append("outer")
        return x * len(r), r
    return P(f, lambda i: (t(2), i), state=lambda: list(log), calls=5)


def p_exception_in_loop_continue():
    def f(x, vals):
        out, errors = [], []
        for v in vals:
            try:
                if v < 0:
                    raise ValueError(f"neg {v}")
                if v == 0:
                    continue
                out.append(x / v)
            except ValueError as e:
                errors.append(str(e))
                continue
            finally:
                errors.append("f")
            out.append(x * v)
        return out, errors
    return P(f, lambda i: (t(2), [[1, -2, 0, 3], [0, 0], [-1], [2, 5, -7]][i]))


def p_with_exit_swallows():
    class Swallow:
        def __init__(self, log):
            self.log = log
        def __enter__(self):
            self.log.append("in")
            return self
        def __exit__(self, et, ev, tb):
            self.log.append("out" if et is None else f"swallow {et.__name__}")
            return et is not None and issubclass(et, KeyError)
    log = []
    def f(x, key):
        d = {"a": x}
        y = x
        with Swallow(log):
            y = d[key] * 2
            log.append("after")
        try:
            with Swallow(log):
                raise ValueError("no")
        except ValueError:
            log.append("escaped")
        return y, list(log)
    return P(f, lambda i: (t(2), ["a", "b", "b", "a"][i]), state=lambda: list(log))


def p_contextmanager_generator_swallow():
    log = []
    @contextlib.contextmanager
    def guard(tag):
        log.append(f"enter {tag}")
        try:
            yield tag * 2
        except ZeroDivisionError:
            log.append("caught")
        finally:
            log.append(f"exit {tag}")
    def f(x, k):
        with guard(k) as v:
            y = x * v
            z = 1 / (k - 1)
            y = y + z
        return y
    return P(f, lambda i: (t(2), [1, 2, 1, 3][i]), state=lambda: list(log))


def p_generator_send_through_yield_from():
    def inner():
        total = 0
        while True:
            v = yield total
            if v is None:
                return total
            total += v
    def outer(log):
        r = yield from inner()
        log.append(r)
        yield -r
    def f(x, vals):
        log = []
        g = outer(log)
        next(g)
        for v in vals:
            last = g.send(v)
        end = g.send(None)
        return x * last, end, log
    return P(f, lambda i: (t(2), [1, 2, 3, 4][: i + 1]))


def p_generator_close_runs_finally():
    log = []
    def gen(x):
        try:
            for i in range(10):
                yield x * i
        finally:
            log.append("closed")
    def f(x, k):
        g = gen(x)
        vals = [next(g) for _ in range(k)]
        g.close()
        rest = list(g)
        return vals, rest
    return P(f, lambda i: (t(2), i + 1), state=lambda: list(log))


def p_generator_return_value_stopiteration():
    def gen(n):
        for i in range(n):
            yield i
        return n * 10
    def f(x, n):
        g = gen(n)
        seen = []
        while True:
            try:
                seen.append(next(g))
            except StopIteration as e:
                ret = e.value
                break
        return x * ret, seen, ret
    return P(f, lambda i: (t(2), i))


@dataclasses.dataclass
class R3Point:
    x: int
    y: int


def p_match_class_mapping_patterns():
    def f(x, cmd):
        match cmd:
            case R3Point(0, y):
                return x * y, "on-y"
            case R3Point(x=px, y=0) if px > 2:
                return x + px, "on-x-far"
            case R3Point():
                return x, "point"
            case {"op": "scale", "by": k, **rest}:
                return x * k, sorted(rest)
            case [int() | float() as a, *more] if len(more) < 2:
                return x + a, len(more)
            case str() as s if s.isdigit():
                return x * int(s), "digits"
            case (1 | 2) as small:
                return x - small, "small"
            case _:
                return x, "other"
    cmds = [R3Point(0, 4), R3Point(5, 0), R3Point(1, 1), {"op": "scale", "by": 3, "z": 1, "a": 2},
            [2.5, 1], "42", 2, [1, 2, 3], None]
    return P(f, lambda i: (t(2), cmds[i]), calls=9)


def p_walrus_in_comprehensions():
    def f(x, vals):
        hits = [y for v in vals if (y := v * 2) > 3]
        total = 0
        running = [(total := total + v) for v in vals]
        first = next((w for v in vals if (w := v - 1) > 0), None)
        return x * len(hits), hits, running, total, first, y if vals else None
    return P(f, lambda i: (t(2), [[1, 2, 3], [5], [0, -1, 4, 7], [2, 2]][i]))


def p_chained_comparison_side_effects():
    calls = []
    def mid(v):
        calls.append(v)
        return v
    def f(x, a, b, c):
        r1 = a < mid(b) < c
        r2 = a < mid(b) > c
        r3 = mid(a) == mid(b) == mid(c)
        r4 = a < b < c < 10
        return x * (1 if r1 else 2), r1, r2, r3, r4
    vals = [(1, 2, 3), (3, 2, 1), (2, 2, 2), (0, 5, 4)]
    return P(f, lambda i: (t(2),) + vals[i], state=lambda: list(calls), dynamic=True)


def p_bigint_from_shapes():
    def f(x):
        n = x.shape[0]
        big = 2 ** (n * 10)
        huge = (n << 70) // 3 + big
        return x * (big % 7), big, huge, huge.bit_length(), -huge // 5, huge % 1000, str(big)[-3:]
    return P(f, lambda i: (t([2, 7, 3, 9][i]),), dynamic=True)


def p_divmod_round_variants():
    def f(x, a, b):
        r = (divmod(a, b), divmod(-a, b), divmod(a * 1.5, b), round(a / b), round(a / b, 2), round(a * 100 + 50, -2),
             round(2.675, 2), round(0.5), round(1.5), round(-2.5), int(-a / b), int(a / -b), math.floor(-a / b),
             math.ceil(a / b), math.trunc(-a / b), round(a / b, 0), round(a, -1), a // -b, a % -b)
        return x * r[0][0], r
    vals = [(7, 2), (25, 10), (3, 7), (15, 4), (1, 3)]
    return P(f, lambda i: (t(2),) + vals[i], calls=5, dynamic=True)


def p_math_floor_ceil_dynamic():
    def f(x):
        n = x.shape[0]
        half = math.ceil(n / 2)
        third = math.floor(n / 3)
        root = math.isqrt(n)
        lg = math.log2(n)
        return (x[:half] * third, half, third, root, lg, math.comb(n, 2), math.trunc(n / 4), round(n / 4),
                math.gcd(n, 6), abs(-n), int(n / 3 * 2))
    return P(f, lambda i: (t([3, 4, 10, 7, 16][i]),), calls=5, dynamic=True)


def p_torch_size_arith():
    def f(x):
        s = x.shape
        t1 = s + (1,)
        t2 = s[1:]
        t3 = (2,) + s[:-1]
        r = (t1, t2, t3, s.numel(), s == (s[0], s[1]), s[-1], list(s), sum(s), s.index(s[-1]), s.count(s[0]),
             tuple(reversed(s)), torch.Size([s[0] * 2, *s[1:]]), len(s), s * 2, max(s))
        return x.reshape(t3[1:] + (s[1],)) * 2, r, type(t2).__name__, type(s + (1,)).__name__
    return P(f, lambda i: (t([2, 3, 4][i], [5, 1, 3][i]),), calls=3, dynamic=True)


def p_item_tolist_values_not_frozen():
    def f(x):
        v = x.sum().item()
        lst = x.tolist()
        big = [i for i, a in enumerate(lst) if a > 0]
        m = int(x.argmax())
        if v > 0:
            return x * 2, round(v, 3), big, m
        return x - 1, round(v, 3), big, m
    return P(f, lambda i: (t(4),), calls=5)


def p_bool_len_iter_of_tensors():
    def f(x, flag):
        out = []
        for row in x:
            out.append(row.sum())
        n = len(x)
        if flag:
            out.append(x[0] * n)
        if x[0, 0] > 0:
            out.append(x.abs())
        return out, n, bool(flag)
    return P(f, lambda i: (t(i + 2, 2), torch.tensor(i % 2 == 0)))


def p_requires_grad_inside():
    def f(x, w):
        w2 = w.detach().clone().requires_grad_()
        y = (x * w2).sum()
        z = x.requires_grad_(False)
        return y, y.requires_grad, w2.requires_grad, z.requires_grad, w.requires_grad
    return P(f, lambda i: (t(3), t(3).requires_grad_(i % 2 == 0)), aot=True)


def p_set_grad_enabled_flag_variants():
    def f(x, w, flag):
        with torch.set_grad_enabled(flag):
            y = x * w
        with torch.no_grad():
            with torch.enable_grad():
                z = x * w
        torch.set_grad_enabled(not flag)
        mid = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        return y, z, y.requires_grad, z.requires_grad, mid
    return P(f, lambda i: (t(2), t(2).requires_grad_(), i % 2 == 0))


def p_module_submodule_replaced_and_int_attr():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(3, 3)
            self.repeat = 1
            self.extra = []
        def forward(self, x):
            for _ in range(self.repeat):
                x = self.body(x)
            for fn in self.extra:
                x = fn(x)
            return x * (2 if self.training else 3)
    m = M()
    def mutate(i):
        if i == 0:
            m.body = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
        elif i == 1:
            m.repeat = 3
            m.eval()
        elif i == 2:
            m.extra.append(torch.tanh)
            m.train()
        elif i == 3:
            m.extra.append(torch.nn.Linear(3, 3))
    return P(m, lambda i: (t(2, 3),), mutate, calls=5)


def p_module_method_patched_on_class():
    class M(torch.nn.Module):
        def act(self, x):
            return x.relu()
        def forward(self, x):
            return self.act(x) * 2
    m = M()
    def mutate(i):
        if i == 0:
            M.act = lambda self, x: x.sigmoid()
        elif i == 1:
            m.act = lambda x: x * 10
        elif i == 2:
            del m.act
    return P(m, lambda i: (t(3),), mutate, calls=5)


def p_module_call_overridden():
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.calls = 0
        def __call__(self, x, scale=1.0):
            self.calls += 1
            return super().__call__(x) * scale
        def forward(self, x):
            return self.lin(x)
    inner = Wrapped()
    def f(x, s):
        return inner(x, scale=s) + inner(x), inner.calls
    return P(f, lambda i: (t(1, 2), [1.0, 2.0, -0.5, 2.0][i]), state=lambda: inner.calls)


def p_super_diamond_mro():
    class Base(torch.nn.Module):
        def forward(self, x):
            return x + 1
    class Left(Base):
        def forward(self, x):
            return super().forward(x) * 2
    class Right(Base):
        def forward(self, x):
            return super().forward(x) - 3
    class Both(Left, Right):
        def forward(self, x):
            return super().forward(x) + 100
    m = Both()
    def f(x):
        return m(x), [c.__name__ for c in type(m).__mro__[:4]]
    return P(f, lambda i: (t(2),))


def p_mutual_recursion():
    def even(x, n):
        return x if n == 0 else odd(x * 2, n - 1)
    def odd(x, n):
        return -x if n == 0 else even(x + 1, n - 1)
    def f(x, n):
        return even(x, n), odd(x, n)
    return P(f, lambda i: (t(2), [0, 3, 4, 1][i]))


def p_args_kwargs_forwarding_defaults():
    def inner(a, b=2, /, c=3, *rest, d, e=5, **kw):
        return a * b + c + sum(rest) + d * e + sum(kw.values()), len(rest), sorted(kw)
    def fwd(*args, **kwargs):
        kwargs.setdefault("d", 1)
        return inner(*args, **kwargs)
    def f(x, args, kwargs):
        return fwd(x, *args, **kwargs)
    cases = [((), {}), ((3,), {"e": 0}), ((1, 2, 7, 8), {"d": 2, "z": 4}), ((4, 5), {"e": 1, "q": 1, "r": 2})]
    return P(f, lambda i: (t(2),) + cases[i])


def p_lru_cache_cleared():
    calls = []
    @functools.lru_cache(maxsize=None)
    def table(n):
        calls.append(n)
        return [v * 2 for v in range(n)]
    def f(x, n):
        return x * sum(table(n)), table.cache_info().currsize
    def mutate(i):
        if i == 1:
            table.cache_clear()
    return P(f, lambda i: (t(2), [3, 3, 3, 4][i]), mutate, state=lambda: list(calls))


def p_float_arg_last_digit():
    def f(x, a):
        return x * a, a * 3, a == 0.3, repr(a)
    vals = [0.1 + 0.2, 0.3, 0.30000000000000004, 1 / 3, 0.3333333333333333]
    return P(f, lambda i: (t(2), vals[i]), calls=5)


def p_float_arg_last_digit_dynamic():
    def f(x, a, b):
        return x * a, a == b, a < b, a * 3, repr(a / 3)
    vals = [(0.1 + 0.2, 0.3), (0.3, 0.3), (1 / 3, 0.3333333333333333), (0.1 + 0.2, 0.30000000000000004)]
    return P(f, lambda i: (t(2),) + vals[i], dynamic=True)


def p_counter_and_chainmap():
    defaults = {"lr": 0.1, "depth": 2}
    def f(x, words, over):
        c = collections.Counter(words)
        c.update(["a"])
        c2 = c - collections.Counter(["a", "b"])
        cm = collections.ChainMap(over, defaults)
        return (x * cm["depth"] + cm["lr"], c.most_common(2), sorted(c2.elements()), c["zz"], sorted(cm),
                cm.get("extra", -1), c.total())
    def mutate(i):
        defaults["depth"] = i + 3
    return P(f, lambda i: (t(2), list("abcab")[: i + 2], {"lr": 0.5} if i % 2 else {}), mutate)


def p_deque_ops():
    def f(x, n):
        d = collections.deque(range(5), maxlen=4)
        d.append(n)
        d.appendleft(-n)
        d.rotate(n)
        d.extendleft([7, 8])
        left = d.popleft()
        d.extend([x.shape[0]])
        return x * left, list(d), d.maxlen, d[0], d[-1], len(d), d.count(7)
    return P(f, lambda i: (t(i + 1), i), dynamic=True)


def p_singledispatch_registered_later():
    @functools.singledispatch
    def scale(v, x):
        return x
    @scale.register
    def _(v: int, x):
        return x * v
    def f(x, v):
        return scale(v, x)
    def mutate(i):
        if i == 1:
            @scale.register
            def _(v: float, x):
                return x + v
    return P(f, lambda i: (t(2), [2, 1.5, 1.5, "s"][i]), mutate)


def p_cmp_to_key_sorting():
    def cmp(a, b):
        return (len(a) > len(b)) - (len(a) < len(b)) or (a > b) - (a < b)
    def f(x, words):
        s = sorted(words, key=functools.cmp_to_key(cmp))
        return x * len(s[0]), s
    return P(f, lambda i: (t(2), [["bb", "a", "ccc", "ab"], ["x"], ["zz", "yy", "w"], ["q", "qq", "q"]][i]))


def p_os_environ_read():
    import os
    key = "EMBER_R3_HARNESS_FLAG"
    def f(x):
        mode = os.environ.get(key, "off")
        return (x * 2 if mode == "on" else x), mode
    def mutate(i):
        if i == 0:
            os.environ[key] = "on"
        elif i == 1:
            os.environ[key] = "half"
        else:
            os.environ.pop(key, None)
    return P(f, lambda i: (t(2),), mutate)


def p_class_defined_inside():
    def f(x, k):
        class Local:
            scale = k
            def __init__(self, b):
                self.b = b
            def apply(self, t):
                return t * self.scale + self.b
        objs = [Local(i) for i in range(2)]
        return [o.apply(x) for o in objs], Local.__name__, Local.scale
    return P(f, lambda i: (t(2), i + 1))


def p_lambda_default_captures_loop_var():
    def f(x, n):
        fns = [lambda y, i=i: y * i for i in range(n)]
        late = [lambda y: y * i for i in range(n)]
        return [g(x) for g in fns], [g(x) for g in late]
    return P(f, lambda i: (t(2), i + 1))


def p_star_unpacking_forms():
    def f(x, seq):
        first, *mid, last = seq
        (a, b), *rest = [(1, 2), *([(3, 4)] * len(mid))]
        n, *dims = x.shape
        head, *_ = range(len(seq) + 1)
        merged = [*seq, *mid, *dims]
        d = {**{"a": 1}, **{str(v): v for v in mid}}
        return x * first + last, mid, a + b, len(rest), n, dims, head, merged, d
    return P(f, lambda i: (t(2, i + 1, 3), [1, 2, 3, 4, 5][: i + 2]), dynamic=True)


def p_global_augassign_in_helper():
    def bump(k):
        global G_R3_COUNT
        G_R3_COUNT += k
        return G_R3_COUNT
    def f(x, k):
        a = bump(k)
        b = bump(1)
        return x * a - b, G_R3_COUNT
    def mutate(i):
        global G_R3_COUNT
        if i == 1:
            G_R3_COUNT = -10
    return P(f, lambda i: (t(2), i), mutate, state=lambda: G_R3_COUNT)


G_R3_COUNT = 0


def p_bool_is_int_semantics():
    def f(x, flags):
        n = sum(flags)
        r = (True + 1, isinstance(True, int), n, sum(v > 0 for v in [-1, 2, 3]), flags.count(True), int(flags[0]) * 5,
             [1, 2][True], {True: "t", 1: "one"}, True == 1, hash(True) == hash(1.0), max(flags), ~True)
        return x * n, r
    return P(f, lambda i: (t(2), [[True, False], [False], [True, True, True], [False, True]][i]))


def p_tensor_membership_and_dict_keys():
    def f(x, y):
        pool = [y, x]
        found = x in pool
        keyed = {x: "x", y: "y"}
        same_key = keyed[x]
        ids = {id(x) == id(pool[1]), id(y) == id(x)}
        return found, same_key, len(keyed), sorted(ids), x is pool[1]
    return P(f, lambda i: (t(1), t(1)))


def p_complex_and_fraction_scalars():
    import fractions
    def f(x, n):
        z = complex(n, 1) * (1 - 2j)
        fr = fractions.Fraction(n, 3) + fractions.Fraction(1, 6)
        return x * abs(z), z, z.real, z.conjugate(), fr, float(fr), fr.numerator, round(fr)
    return P(f, lambda i: (t(2), i + 1))


def p_int_from_strings_and_back():
    def f(x, s):
        n = int(s, 0)
        v = float(s) if s.isdigit() else float.fromhex(s) if s.startswith("0x") else 0.0
        back = (str(n).zfill(5), hex(n), oct(n), bin(n), n.to_bytes(2, "big"), int.from_bytes(b"\x01\x02", "little"))
        return x * n, v, back
    return P(f, lambda i: (t(2), ["12", "0x1f", "0o17", "7"][i]))


def p_while_else_for_else():
    def f(x, vals, target):
        for v in vals:
            if v == target:
                found = True
                break
        else:
            found = False
        i = 0
        while i < len(vals):
            if vals[i] < 0:
                break
            x = x + vals[i]
            i += 1
        else:
            x = x * 2
        return x, found, i
    return P(f, lambda i: (t(2), [[1, 2, 3], [4, -1, 2], [], [5, 5]][i], [2, 9, 0, 5][i]))


def p_getattr_default_changes():
    class O:
        pass
    o = O()
    def f(x):
        k = getattr(o, "k", None)
        fn = getattr(o, "fn", torch.neg)
        y = fn(x)
        return (y * k if k is not None else y), hasattr(o, "k")
    def mutate(i):
        if i == 0:
            o.k = 3
        elif i == 1:
            o.fn = torch.exp
        elif i == 2:
            del o.k
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_class_attr_through_inheritance_changed():
    class Base:
        scale = 2
        def get(self):
            return self.scale
    class Child(Base):
        pass
    c = Child()
    def f(x):
        return x * c.get(), Child.scale
    def mutate(i):
        if i == 0:
            Base.scale = 5
        elif i == 1:
            Child.scale = 7
        elif i == 2:
            del Child.scale
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_exception_group_star():
    def f(x, k):
        caught = []
        try:
            raise ExceptionGroup("g", [ValueError(k), TypeError("t")][: k % 2 + 1])
        except* ValueError as eg:
            caught.append(len(eg.exceptions))
        except* TypeError:
            caught.append("type")
        return x * len(caught), caught
    return P(f, lambda i: (t(2), i))


def p_sentinel_default_identity():
    class Marker:
        pass
    _missing = Marker()
    def f(x, scale=_missing, *, bias=None):
        if scale is _missing:
            scale = 2
        if bias is None:
            return x * scale
        return x * scale + bias
    args = [(), (3,), (_missing,), (Marker(),)]
    def inputs(i):
        return (t(2),) + args[i] + ((KW(bias=1.5),) if i == 3 else ())
    return P(f, inputs)


def p_enum_argument_branches():
    class Act(enum.Enum):
        RELU = "relu"
        TANH = "tanh"
        NONE = None
    def f(x, act):
        if act is Act.RELU:
            y = x.relu()
        elif act == Act.TANH:
            y = x.tanh()
        else:
            y = x
        return y, act.name, act in (Act.RELU, Act.TANH)
    return P(f, lambda i: (t(3), [Act.RELU, Act.TANH, Act.NONE, Act.RELU, Act.TANH][i]), calls=5)


def p_symbolic_float_conditions():
    def f(x):
        n = x.shape[0]
        ratio = n / 7
        tags = []
        if n * 0.1 < 0.3000000000000001:
            tags.append("small")
        if ratio > 0.4:
            tags.append("big")
        if n * 0.7 == 2.1:
            tags.append("eq")
        return x * ratio, tags, ratio >= 3 / 7
    return P(f, lambda i: (t([4, 3, 5, 3, 8][i]),), calls=5, dynamic=True)


def p_symbolic_dict_keys_and_slices():
    def f(x, lst):
        n = x.shape[0]
        d = {n: "n", n + 1: "n+1"}
        s = {n % 3, n // 2}
        sl = lst[: n - 1]
        back = list(range(n))[::-2]
        idx = slice(1, n).indices(n + 2)
        return x * len(sl), d, sorted(s), sl, back, idx, lst[n % len(lst)], f"{n=}"
    return P(f, lambda i: (t([2, 3, 5, 4][i]), [10, 20, 30, 40, 50]), dynamic=True)


def p_config_namespace_attr_changed():
    cfg = types.SimpleNamespace(scale=2.0, act="relu", layers=[1])
    def f(x):
        y = x * cfg.scale
        y = y.relu() if cfg.act == "relu" else y.sigmoid()
        return y * len(cfg.layers), getattr(cfg, "extra", None)
    def mutate(i):
        if i == 0:
            cfg.scale = -1.0
        elif i == 1:
            cfg.act = "sigmoid"
            cfg.extra = 7
        elif i == 2:
            cfg.layers.append(2)
            del cfg.extra
    return P(f, lambda i: (t(3),), mutate, calls=5)


def p_property_replaced_on_class():
    class C:
        def __init__(self):
            self.v = 2
        @property
        def k(self):
            return self.v * 10
    c = C()
    def f(x):
        return x * c.k
    def mutate(i):
        if i == 0:
            C.k = property(lambda self: self.v - 100)
        elif i == 1:
            c.v = 5
        elif i == 2:
            C.k = 3
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_nonlocal_three_levels():
    def outer():
        a = 1
        def mid():
            b = 10
            def inner(x):
                nonlocal a, b
                a += 1
                b -= 1
                return x * a + b
            return inner
        return mid(), lambda: a
    inner, get_a = outer()
    def f(x):
        return inner(x), inner(x), get_a()
    return P(f, lambda i: (t(2),), state=lambda: get_a())


def p_closure_cell_holds_module_swapped():
    def make():
        layer = torch.nn.Linear(2, 2)
        def run(x):
            return layer(x)
        def swap(new):
            nonlocal layer
            layer = new
        return run, swap
    run, swap = make()
    def mutate(i):
        if i == 0:
            swap(torch.nn.Linear(2, 2, bias=False))
        elif i == 1:
            swap(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()))
    return P(run, lambda i: (t(1, 2),), mutate)


def p_lazy_map_filter_zip_side_effects():
    log = []
    def tap(v):
        log.append(v)
        return v * 2
    def f(x, vals):
        m = map(tap, vals)
        first = next(m)
        pairs = list(zip(m, range(2)))
        flt = filter(lambda v: v % 2, vals)
        odd = next(flt, None)
        return x * first, pairs, odd, list(m)
    return P(f, lambda i: (t(2), [[1, 2, 3, 4, 5], [7], [2, 4, 6], [3, 3, 3, 3]][i]), state=lambda: list(log))


def p_iter_callable_sentinel():
    def f(x, vals):
        it = iter(vals)
        taken = list(iter(lambda: next(it), 0))
        rest = list(it)
        return x * len(taken), taken, rest
    return P(f, lambda i: (t(2), [[1, 2, 0, 3], [0], [5, 6], [4, 0, 0]][i]))


def p_generator_with_try_except_inside():
    def gen(vals):
        for v in vals:
            try:
                yield 10 // v
            except ZeroDivisionError:
                yield -1
            finally:
                pass
    def safe(vals):
        out = []
        for v in vals:
            try:
                out.append(10 // v)
            except ZeroDivisionError:
                out.append(-1)
        return out
    def f(x, vals):
        return x * sum(safe(vals)), safe(vals)
    return P(f, lambda i: (t(2), [[1, 0, 5], [0], [3, 2], [0, 0, 7]][i]))


def p_module_int_attr_as_view_size():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = 2
        def forward(self, x):
            b, d = x.shape
            return x.view(b, self.heads, d // self.heads).sum(-1)
    m = M()
    def mutate(i):
        m.heads = [4, 1, 8][i]
    return P(m, lambda i: (t(3, 8),), mutate)


def p_bytes_and_bytearray():
    def f(x, data):
        b = bytes(data)
        ba = bytearray(b)
        ba.append(7)
        ba[0] = 1
        h = b.hex()
        return x * len(ba), b[::-1], list(ba), h, b.startswith(b"\x01"), int.from_bytes(b, "big") % 97
    return P(f, lambda i: (t(2), [[1, 2], [255], [0, 0, 3], [9, 8, 7, 6]][i]))


def p_tensor_scalar_conversions():
    def f(x):
        s = x.sum()
        a = float(s)
        b = int(s)
        c = complex(s)
        d = x.max().item() > 0
        e = [round(v, 2) for v in x.tolist()]
        return x * b, round(a, 4), b, round(c.real, 4), d, e, bool(s > 0)
    return P(f, lambda i: (t(3) * 3,), calls=5)


def p_assert_and_fstring_debug():
    def f(x, k):
        n = x.shape[0]
        assert n > 0, f"empty {n=}"
        try:
            assert k < 3, f"{k=} too big for {n=}"
        except AssertionError as e:
            return x, str(e)
        return x * k, f"{k=} {n=:>4}"
    return P(f, lambda i: (t([2, 3, 4, 5][i]), i + 1), dynamic=True)


def p_sorted_dict_by_value_and_ties():
    def f(x, d):
        by_v = sorted(d.items(), key=lambda kv: (kv[1], kv[0]))
        top = max(d, key=d.get)
        low = min(d.values(), default=0)
        inv = {v: k for k, v in d.items()}
        return x * d[top], by_v, top, low, inv, sorted(d, reverse=True)
    return P(f, lambda i: (t(2), [{"a": 2, "b": 3, "c": 3}, {"z": 1}, {"q": 5, "p": 5}, {"m": 0, "n": -1}][i]))


def p_classmethod_registry_counter():
    class Layer:
        made = 0
        @classmethod
        def build(cls, k):
            cls.made += 1
            obj = cls()
            obj.k = k
            return obj
        def __call__(self, x):
            return x * self.k
    def f(x, ks):
        layers = [Layer.build(k) for k in ks]
        for layer in layers:
            x = layer(x)
        return x, Layer.made
    return P(f, lambda i: (t(2), [1, 2, 3][: i + 1]), state=lambda: Layer.made)


def p_error_messages_of_builtins():
    def f(x, k):
        out = []
        for thunk in (lambda: [1, 2][k], lambda: {"a": 1}[str(k)], lambda: 10 // (k - 1), lambda: 1.0 / (k - 1),
                      lambda: 10 % (k - 1), lambda: int("x" * k), lambda: (1, "a")[k] < 2, lambda: None.attr,
                      lambda: [].pop(), lambda: {}.popitem(), lambda: [1, 2].index(k), lambda: float("nan") < k < "s"):
            try:
                out.append(thunk())
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
        return x * len(out), out
    return P(f, lambda i: (t(2), [0, 1, 2, 5][i]))


def p_tuple_item_augassign_gotcha():
    def f(x, k):
        tup = ([1], x)
        try:
            tup[0] += [k]
        except TypeError as e:
            msg = str(e)
        a = b = []
        a.append(k)
        return x * len(tup[0]), tup[0], msg, b
    return P(f, lambda i: (t(2), i))


def p_dict_changed_during_iteration():
    def f(x, d):
        try:
            for k in d:
                if k == "a":
                    d["new" + k] = 1
        except RuntimeError as e:
            err = str(e)
        else:
            err = None
        lst = [1, 2, 3]
        for v in lst:
            if v < 3 and len(lst) < 6:
                lst.append(v + 10)
        return x * len(d), err, lst, sorted(d)
    return P(f, lambda i: (t(2), [{"a": 1, "b": 2}, {"b": 1}, {"a": 0}, {}][i]))


def p_property_attributeerror_falls_to_getattr():
    class C:
        def __init__(self, ok):
            self.ok = ok
        @property
        def value(self):
            if not self.ok:
                raise AttributeError("no value")
            return 5
        def __getattr__(self, name):
            return f"fallback:{name}"
    objs = [C(True)]
    def f(x):
        v = objs[0].value
        return (x * v if isinstance(v, int) else x), v
    def mutate(i):
        objs[0].ok = i % 2 == 1
    return P(f, lambda i: (t(2),), mutate)


def p_eq_notimplemented_and_radd():
    class Money:
        def __init__(self, v):
            self.v = v
        def __eq__(self, other):
            if not isinstance(other, Money):
                return NotImplemented
            return self.v == other.v
        __hash__ = None
        def __radd__(self, other):
            return Money(other + self.v) if isinstance(other, int) else NotImplemented
        def __add__(self, other):
            return Money(self.v + (other.v if isinstance(other, Money) else other))
    def f(x, vals):
        ms = [Money(v) for v in vals]
        total = sum(ms)
        return x * total.v, ms[0] == Money(vals[0]), ms[0] == vals[0], ms[0] != "s", (ms[0] + 1).v
    return P(f, lambda i: (t(2), [1, 2, 3, 4][: i + 1]))


def p_user_object_protocols_from_inputs():
    class Bag:
        def __init__(self, items):
            self.items = list(items)
        def __len__(self):
            return len(self.items)
        def __contains__(self, v):
            return v in self.items
        def __iter__(self):
            return iter(self.items)
        def __getitem__(self, i):
            return self.items[i]
        def __bool__(self):
            return bool(self.items) and self.items[0] != 0
    class Idx:
        def __init__(self, i):
            self.i = i
        def __index__(self):
            return self.i
    bag = Bag([1, 2])
    def f(x, k):
        lst = [10, 20, 30, 40]
        return (x * len(bag), 2 in bag, list(bag), bag[-1], lst[Idx(k)], lst[Idx(0):Idx(k)],
                "truthy" if bag else "falsy", sum(bag))
    def mutate(i):
        bag.items = [[0, 5], [3, 4, 5], []][i]
    return P(f, lambda i: (t(2), i % 3), mutate)


def p_function_attributes_read():
    def helper(a, b=2, *, c=3):
        "doc"
        return a
    def f(x):
        return (x * helper.__code__.co_argcount, helper.__name__, helper.__defaults__, helper.__kwdefaults__,
                helper.__doc__, type(x).__name__, x.__class__.__name__, f.__qualname__.split(".")[-1])
    def mutate(i):
        helper.__defaults__ = ((5,), (6,), None)[i]
        helper.__doc__ = f"doc{i}"
    return P(f, lambda i: (t(2),), mutate)


def p_init_subclass_and_class_registry():
    registry = {}
    class Base:
        def __init_subclass__(cls, key=None, **kw):
            super().__init_subclass__(**kw)
            registry[key or cls.__name__] = cls
        def run(self, x):
            return x
    class Double(Base, key="double"):
        def run(self, x):
            return x * 2
    def f(x, key):
        cls = registry.get(key, Base)
        return cls().run(x), sorted(registry)
    def mutate(i):
        if i == 0:
            class Neg(Base, key="neg"):
                def run(self, x):
                    return -x
    return P(f, lambda i: (t(2), ["double", "neg", "none", "neg"][i]), mutate)


def p_super_in_classmethod_and_staticmethod():
    class A:
        scale = 2
        @classmethod
        def make(cls, v):
            return v * cls.scale
    class B(A):
        scale = 3
        @classmethod
        def make(cls, v):
            return super().make(v) + 1
        @staticmethod
        def helper(v):
            return v - 1
    def f(x, v):
        return x * B.make(v), A.make(v), B.helper(v), B().make(v)
    def mutate(i):
        A.scale = i + 5
    return P(f, lambda i: (t(2), i + 1), mutate)


def p_list_remove_del_slices_steps():
    def f(x, n):
        lst = list(range(10))
        del lst[::3]
        lst[1:3] = []
        lst[::2] = [0] * len(lst[::2])
        del lst[-n:]
        try:
            lst[::2] = [1]
        except ValueError as e:
            err = str(e)
        return x * len(lst), lst, err
    return P(f, lambda i: (t(2), i + 1))


def p_nested_data_structure_updates():
    def f(x, cfg):
        layers = cfg.setdefault("layers", [])
        layers.append({"w": x.shape[0]})
        cfg["count"] = cfg.get("count", 0) + 1
        total = sum(l["w"] for l in cfg["layers"])
        return x * total, cfg
    return P(f, lambda i: (t(i + 1), {} if i % 2 else {"layers": [{"w": 9}], "count": 5}))


def p_int_enum_str_enum_args():
    class Lvl(enum.IntEnum):
        LOW = 1
        HIGH = 3
    class Name(str, enum.Enum):
        A = "a"
        B = "b"
    def f(x, lvl, name):
        y = x * lvl
        key = name + "_k" if isinstance(name, str) else None
        return y, int(lvl), lvl.name, key, name.value, name == "a", lvl == 3, {name: 1}
    vals = [(Lvl.LOW, Name.A), (Lvl.HIGH, Name.B), (Lvl.HIGH, Name.A), (Lvl.LOW, Name.B)]
    return P(f, lambda i: (t(2),) + vals[i])


def p_rng_objects_around_breaks():
    rng = random.Random(5)
    def f(x):
        a = rng.random()
        if x.sum() > 0:
            x = x + 1
        b = rng.randint(0, 9)
        print("draw", b)
        c = random.random()
        return x * a + b, a, b, c
    return P(f, lambda i: (t(3),), state=lambda: rng.getstate(), calls=5)


def p_generator_expression_binding_time():
    vals = [1, 2]
    def make(x, extra):
        return (x * v + w for v in vals for w in extra)
    def f(x, extra):
        g = make(x, extra)
        vals.append(10)
        extra.append(100)
        out = list(g)
        vals.pop()
        return out, list(extra)
    return P(f, lambda i: (t(2), [0, 1][: i % 2 + 1]), state=lambda: list(vals))


def p_globals_dict_written():
    def f(x, k):
        g = globals()
        g["G_R3_VIA"] = g.get("G_R3_VIA", 0) + k
        return x * G_R3_VIA, "G_R3_VIA" in g
    def state():
        return globals().get("G_R3_VIA")
    return P(f, lambda i: (t(2), i + 1), state=state)


def p_tensor_python_attribute():
    def f(x):
        tag = getattr(x, "tag", None)
        if tag is None:
            return x, False
        return x * tag, hasattr(x, "tag")
    def inputs(i):
        x = t(2)
        if i % 2:
            x.tag = i + 1
        return (x,)
    return P(f, inputs)


def p_unpack_tensor_rows_and_star_cat():
    def f(x, xs):
        a, b = x
        first, *rest = xs
        return torch.cat([*xs, a[None]]), a - b, first * len(rest), torch.stack([*rest, first]) if rest else first
    return P(f, lambda i: (t(2, 3), [t(1, 3) for _ in range(i + 1)]))


def p_module_cached_property_and_class_change():
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
        @functools.cached_property
        def factor(self):
            return 3.0
        def forward(self, x):
            return self.lin(x) * self.factor
    class Other(Head):
        def forward(self, x):
            return -super().forward(x)
    m = Head()
    def mutate(i):
        if i == 0:
            m.factor = 0.5
        elif i == 1:
            m.__class__ = Other
        elif i == 2:
            del m.__dict__["factor"]
    return P(m, lambda i: (t(1, 2),), mutate, calls=5)


def p_defaults_written_inside():
    def helper(x, k=1):
        return x * k
    def f(x, k):
        helper.__defaults__ = (k,)
        a = helper(x)
        return a, helper.__defaults__
    return P(f, lambda i: (t(2), i + 2), state=lambda: helper.__defaults__)


def p_kwargs_dict_mutated_after_unpack():
    def g(x, **kw):
        kw["seen"] = True
        return x * kw.get("k", 1), sorted(kw)
    def f(x, opts):
        r = g(x, **opts)
        opts["k"] = opts.get("k", 0) + 1
        r2 = g(x, **opts, extra=1)
        return r, r2, dict(zip(["a", "b", "a"], [1, 2, 3]))
    return P(f, lambda i: (t(2), [{}, {"k": 2}, {"k": -1, "z": 0}, {}][i]))


def p_data_dependent_keys_and_orders():
    def f(xs):
        best = max(xs, key=lambda t: t.sum())
        order = sorted(range(len(xs)), key=lambda i: xs[i].mean().item())
        ys = list(xs)
        ys.sort(key=lambda t: float(t.max()), reverse=True)
        smallest = min(x.sum() for x in xs)
        any_pos = any(x.sum() > 0 for x in xs)
        count = int(xs[0].abs().sum() * 2)
        idx = int(xs[0].argmax())
        table = {round(x.sum().item(), 3): i for i, x in enumerate(xs)}
        return best * 1, order, ys[0], smallest, any_pos, [i for i in range(count)], xs[idx % len(xs)], table
    return P(f, lambda i: ([t(3) for _ in range(i + 2)],), calls=5)


def p_tensor_truth_in_python_structures():
    def f(x, y):
        pair = (x > 0).all() and (y > 0).any()
        picked = x if (x.sum() > y.sum()) else y
        flags = [bool(v > 0) for v in x]
        n = sum(1 for v in y if v > 0)
        while x.abs().max() > 1:
            x = x / 2
        return bool(pair), picked, flags, n, x
    return P(f, lambda i: (t(3) * 3, t(3)), calls=5)


def p_breaks_inside_features():
    log = []
    class Mode(enum.Enum):
        A = 1
        B = 2
    @contextlib.contextmanager
    def tagged(tag):
        log.append(("in", tag))
        try:
            yield tag
        finally:
            log.append(("out", tag))
    count = 0
    def bump(x):
        nonlocal count
        count += 1
        print("bump", count)
        return x + count
    def f(x, mode, vals):
        with tagged(mode.name) as tag:
            x = bump(x)
            if mode is Mode.A:
                x = x * 2
        out = []
        for v in vals:
            try:
                if v < 0:
                    raise ValueError(v)
                print("v", v)
                out.append(x * v)
            except ValueError:
                out.append(x)
                continue
            finally:
                log.append(v)
        return out, tag, count, mode == Mode.B
    return P(f, lambda i: (t(2), [Mode.A, Mode.B, Mode.A, Mode.B][i], [1, -1, 2][: i + 1]),
             state=lambda: (list(log), count))


def p_generator_pipeline_with_breaks():
    def source(xs):
        for x in xs:
            print("src")
            yield x * 2
    def scale(gen, k):
        for v in gen:
            yield v * k
    def f(xs, k):
        total = None
        for v in scale(source(xs), k):
            total = v if total is None else total + v
        return total
    return P(f, lambda i: ([t(2) for _ in range(i + 1)], i + 1))


def p_dataclass_post_init_and_frozen_setattr():
    @dataclasses.dataclass(frozen=True)
    class Spec:
        n: int
        scale: float = 1.0
        area: int = dataclasses.field(init=False)
        def __post_init__(self):
            object.__setattr__(self, "area", self.n * self.n)
    @dataclasses.dataclass
    class State:
        step: int = 0
        hist: list = dataclasses.field(default_factory=list)
    st = State()
    def f(x, n):
        s = Spec(n, scale=0.5)
        s2 = dataclasses.replace(s, n=n + 1)
        st.step += 1
        st.hist.append(s2.area)
        try:
            s.n = 3
        except dataclasses.FrozenInstanceError as e:
            err = type(e).__name__
        return x * s.area * s.scale, s2.area, s == Spec(n, 0.5), err, dataclasses.replace(st, step=-1)
    return P(f, lambda i: (t(2), i + 1), state=lambda: dataclasses.asdict(st))


def p_slots_inheritance_and_dict():
    class Base:
        __slots__ = ("a",)
    class Child(Base):
        __slots__ = ("b", "__dict__")
        c = 10
    o = Child()
    o.a, o.b = 1, 2
    def f(x):
        extra = o.__dict__.get("c", None)
        return x * (o.a + o.b) + o.c, extra
    def mutate(i):
        if i == 0:
            o.c = 5
        elif i == 1:
            o.a = 7
        elif i == 2:
            del o.c
    return P(f, lambda i: (t(2),), mutate, calls=5)


def p_class_attr_written_inside_compiled():
    class Counter:
        total = 0
        names = []
        def __init__(self, name):
            type(self).total += 1
            Counter.names.append(name)
            self.name = name
    def f(x, names):
        objs = [Counter(n) for n in names]
        return x * Counter.total, [o.name for o in objs], list(Counter.names)
    return P(f, lambda i: (t(2), ["a", "b"][: i % 2 + 1]), state=lambda: (Counter.total, list(Counter.names)))


def p_torch_errors_caught_and_messages():
    def f(x, y):
        out = []
        for thunk in (lambda: x @ y, lambda: x.view(-1, 7), lambda: x[::-1], lambda: torch.cat([x, y[None]]),
                      lambda: x.reshape(y.shape[0], -1), lambda: x + y):
            try:
                out.append(thunk())
            except (RuntimeError, ValueError, IndexError) as e:
                out.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
        return out
    shapes = [((2, 3), (3,)), ((2, 3), (2,)), ((4, 7), (7,)), ((3, 3), (3,))]
    return P(f, lambda i: (t(*shapes[i][0]), t(*shapes[i][1])))


def p_range_and_format_field_access():
    def f(x, n):
        r = range(n, -1, -2)
        rev = list(reversed(range(1, n)))
        s = "{0.shape[0]}x{0.shape[1]}|{d[k]}|{1:>{w}}".format(x, n, d={"k": "v"}, w=n + 2)
        cols = list(zip(*[[1, 2, 3], [4, 5, 6]]))
        sums = list(map(operator.add, [1, 2], [10, 20, 30]))
        return (x * len(r), list(r), r[1] if len(r) > 1 else None, 3 in r, r.index(n), rev, s, cols, sums,
                list(enumerate("ab", start=n)), (n).__add__(1), getattr(n, "bit_length")())
    return P(f, lambda i: (t(2, 3), i + 2), dynamic=True)


def p_module_parameters_iterated_and_changed():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2)
        def forward(self, x):
            reg = sum(p.pow(2).sum() for p in self.parameters())
            names = [n for n, _ in self.named_parameters()]
            frozen = [n for n, p in self.named_parameters() if not p.requires_grad]
            return self.a(x) + reg, names, frozen, len(list(self.children()))
    m = M()
    def mutate(i):
        if i == 0:
            m.register_parameter("extra", torch.nn.Parameter(torch.ones(3)))
        elif i == 1:
            m.a.requires_grad_(False)
        elif i == 2:
            m.add_module("b", torch.nn.Linear(1, 1))
    return P(m, lambda i: (t(1, 2),), mutate, calls=5)


# == fourth round: global torch state set by the caller, Python state read inside, object =========
# -- protocols, tensor-attached Python state (grad, version, layout, storage) ----------------------
@contextlib.contextmanager
def _caller_sets(get, set_, value):
    """Global state the caller sets around a call (through its setter), restored after it."""
    old = get()
    set_(value)
    try:
        yield
    finally:
        set_(old)


def _default_dtype(dtype):
    return _caller_sets(torch.get_default_dtype, torch.set_default_dtype, dtype)


def _deterministic(flag):
    return _caller_sets(torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms, flag)


def _num_threads(n):
    return _caller_sets(torch.get_num_threads, torch.set_num_threads, n)


# torch.backends' flags refuse plain assignment once torch.testing's common_utils has been imported
# in the process (disable_global_flags); its flags() context managers allow it
_ALLOW_FLAGS = getattr(torch.backends, "__allow_nonbracketed_mutation", contextlib.nullcontext)


def _flag(obj, name, value):
    def set_(v):
        with _ALLOW_FLAGS():
            setattr(obj, name, v)
    return _caller_sets(lambda: getattr(obj, name), set_, value)


def p_default_dtype_set_by_caller():
    def f(x):
        a = torch.ones(3) * 1.1
        b = torch.tensor([1.5, 2.25])
        c = torch.arange(3.0) / 3
        d = torch.zeros_like(x) + torch.full((3,), 0.1)
        return x.sum() + a, b, c, d, torch.get_default_dtype(), a.dtype
    dtypes = [torch.float32, torch.float64, torch.float64, torch.float32, torch.bfloat16]
    return P(f, lambda i: (t(3),), around=lambda i: _default_dtype(dtypes[i]), calls=5)


def p_default_dtype_branch_inside():
    def f(x):
        if torch.get_default_dtype() == torch.float64:
            return x.double() * 2, "double"
        return x * 3, "single"
    dtypes = [torch.float32, torch.float64, torch.float32, torch.float64]
    return P(f, lambda i: (t(3),), around=lambda i: _default_dtype(dtypes[i]))


def p_grad_disabled_by_caller():
    w = torch.randn(3, 3, requires_grad=True)
    def f(x):
        y = x @ w
        return y, y.requires_grad, torch.is_grad_enabled(), (y * 2).grad_fn is None
    modes = [True, False, True, False]
    return P(f, lambda i: (t(2, 3),), around=lambda i: torch.set_grad_enabled(modes[i]))


def p_grad_disabled_by_caller_branch():
    w = torch.randn(3, requires_grad=True)
    def f(x):
        if torch.is_grad_enabled():
            return (x * w).sum(), "train"
        return (x * w.detach()).mean(), "eval"
    modes = [False, True, False, True]
    return P(f, lambda i: (t(3),), around=lambda i: torch.set_grad_enabled(modes[i]))


def p_inference_mode_around_call():
    w = torch.randn(3, requires_grad=True)
    def f(x):
        y = x * w + 1
        return y, torch.is_inference_mode_enabled(), y.is_inference(), y.requires_grad
    modes = [False, True, False, True]
    return P(f, lambda i: (t(3),), around=lambda i: torch.inference_mode(modes[i]))


def p_inference_mode_branch_inside():
    def f(x):
        if torch.is_inference_mode_enabled():
            return x.clone(), 0
        y = x.clone()
        y.add_(1)
        return y, y._version
    modes = [True, False, True, False]
    return P(f, lambda i: (t(3),), around=lambda i: torch.inference_mode(modes[i]))


def p_autocast_entered_by_caller():
    def f(x, w):
        y = x @ w
        z = torch.relu(y) + 1
        return y.dtype, z.dtype, y.float(), z.float(), torch.is_autocast_enabled("cpu")
    on = [False, True, False, True]
    return P(f, lambda i: (t(2, 2), t(2, 2)),
             around=lambda i: torch.autocast("cpu", dtype=torch.bfloat16, enabled=on[i]))


def p_autocast_dtype_changed_by_caller():
    def f(x, w):
        y = torch.mm(x, w)
        return y.dtype, y.float(), torch.get_autocast_dtype("cpu")
    dts = [torch.bfloat16, torch.float16, torch.bfloat16]
    return P(f, lambda i: (t(2, 2), t(2, 2)), calls=3,
             around=lambda i: torch.autocast("cpu", dtype=dts[i]))


def p_deterministic_flag_read():
    def f(x):
        if torch.are_deterministic_algorithms_enabled():
            return x.cumsum(0), True
        return x * 2, False
    flags = [False, True, False, True]
    return P(f, lambda i: (t(3),), around=lambda i: _deterministic(flags[i]))


def p_backends_flags_read():
    def f(x):
        a = torch.backends.mkldnn.enabled
        b = torch.backends.cudnn.benchmark
        return (x + 1 if a else x - 1), (x * 2 if b else x * 3), a, b
    vals = [(True, False), (False, False), (True, True), (False, True)]
    def around(i):
        st = contextlib.ExitStack()
        st.enter_context(_flag(torch.backends.mkldnn, "enabled", vals[i][0]))
        st.enter_context(_flag(torch.backends.cudnn, "benchmark", vals[i][1]))
        return st
    return P(f, lambda i: (t(3),), around=around)


def p_num_threads_read():
    def f(x):
        n = torch.get_num_threads()
        return x * n, n
    counts = [1, 2, 1, 2]
    return P(f, lambda i: (t(3),), around=lambda i: _num_threads(counts[i]))


def p_matmul_precision_read():
    def f(x):
        p = torch.get_float32_matmul_precision()
        return (x * 2 if p == "highest" else x * 3), p
    ps = ["highest", "high", "highest", "medium"]
    @contextlib.contextmanager
    def around(i):
        old = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(ps[i])
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(old)
    return P(f, lambda i: (t(3),), around=around)


def p_generator_passed_in():
    def f(x, g):
        a = torch.randn(3, generator=g)
        b = torch.rand(3, generator=g)
        idx = torch.randperm(3, generator=g)
        return x + a, b, idx, g.initial_seed()
    def inputs(i):
        g = torch.Generator().manual_seed([1, 2, 1, 7][i])
        return (t(3), g)
    return P(f, inputs)


def p_generator_kept_between_calls():
    g = torch.Generator().manual_seed(3)
    def f(x):
        return x + torch.randn(3, generator=g), torch.randint(0, 10, (2,), generator=g)
    def mutate(i):
        if i == 1:
            g.manual_seed(3)
    return P(f, lambda i: (t(3),), mutate, state=lambda: g.get_state())


def p_rng_state_saved_and_restored_inside():
    def f(x):
        s = torch.get_rng_state()
        a = torch.rand(3)
        torch.set_rng_state(s)
        b = torch.rand(3)
        c = torch.rand(3)
        return x + a, torch.equal(a, b), b, c
    return P(f, lambda i: (t(3),))


def p_manual_seed_arg_inside():
    def f(x, seed):
        torch.manual_seed(seed)
        a = torch.randn(3)
        torch.manual_seed(seed + 1)
        b = torch.rand(2)
        return x + a, b, torch.initial_seed()
    return P(f, lambda i: (t(3), [5, 6, 5, 9][i]))


def p_global_rng_drawn_after_call():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True), torch.rand(2)
    return P(f, lambda i: (t(8),))


def p_is_compiling_not_returned():
    def f(x):
        y = x * 2
        if torch.compiler.is_compiling():
            y = y + 0.0
        return y
    return P(f, lambda i: (t(3),))


def p_sys_flags_and_version_read():
    import sys
    def f(x):
        k = 2 if sys.flags.optimize == 0 else 3
        v = sys.version_info >= (3, 8)
        return x * k, v, sys.flags.dont_write_bytecode in (0, 1, True, False)
    return P(f, lambda i: (t(3),))


def p_module_level_state_dict_of_lists():
    registry = {"ops": [torch.sin]}
    def f(x):
        for op in registry["ops"]:
            x = op(x)
        return x, len(registry["ops"])
    def mutate(i):
        if i == 0:
            registry["ops"].append(torch.cos)
        elif i == 1:
            registry["ops"][0] = torch.tanh
        else:
            registry["ops"] = [torch.exp]
    return P(f, lambda i: (t(3),), mutate, aot=True)


def p_weakref_to_tensor_and_module():
    keep = {"t": torch.ones(3), "m": torch.nn.Linear(3, 3)}
    refs = {"t": weakref.ref(keep["t"]), "m": weakref.ref(keep["m"])}
    def f(x):
        tt, m = refs["t"](), refs["m"]()
        out = x if tt is None else x + tt
        return (out if m is None else m(out)), tt is None, m is None
    def mutate(i):
        if i == 0:
            keep["t"].mul_(2)
        elif i == 1:
            keep["t"] = torch.full((3,), 5.0)
            refs["t"] = weakref.ref(keep["t"])
        else:
            del keep["t"]
            import gc
            gc.collect()
    return P(f, lambda i: (t(3),), mutate)


def p_id_and_is_between_inputs():
    def f(a, b):
        same_obj = a is b
        same_id = id(a) == id(b)
        if same_obj:
            return a * 2, same_obj, same_id
        return a + b, same_obj, same_id
    def inputs(i):
        x = t(3)
        return [(x, t(3)), (x, x), (x, t(3)), (x, x)][i]
    return P(f, inputs)


def p_hash_of_user_objects_inside():
    class Key:
        def __init__(self, k):
            self.k = k
        def __hash__(self):
            return hash(self.k) % 7
        def __eq__(self, other):
            return isinstance(other, Key) and self.k == other.k
    def f(x, k):
        h = hash(k)
        table = {Key(1): 1.0, Key(2): 2.0}
        return x * table.get(k, -1.0), h, k in {Key(2)}
    return P(f, lambda i: (t(3), Key([1, 2, 5, 2][i])))


def p_deepcopy_module_inside():
    import copy
    m = torch.nn.Linear(3, 3)
    def f(x):
        m2 = copy.deepcopy(m)
        with torch.no_grad():
            m2.weight.mul_(0)
        tensors = [x, x * 2]
        shallow = copy.copy(tensors)
        shallow.append(x * 3)
        deep = copy.deepcopy([x.detach()])
        deep[0].add_(1)
        return m(x) + m2(x), len(tensors), len(shallow), deep[0], x
    def mutate(i):
        with torch.no_grad():
            m.bias.add_(1)
    return P(f, lambda i: (t(3),), mutate)


def p_warnings_warn_inside():
    import warnings
    log = []
    def f(x):
        if x.shape[0] > 2:
            warnings.warn(f"big input {x.shape[0]}")
        warnings.warn("always")
        return x + 1
    @contextlib.contextmanager
    def around(i):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            yield
        log.extend(str(w.message) for w in rec if w.category is UserWarning
                   and str(w.message).startswith(("big", "always")))
    return P(f, lambda i: (t([2, 3, 4, 1][i]),), state=lambda: list(log), around=around)


def p_logging_inside():
    import logging
    records = []
    class H(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logger = logging.getLogger(f"ember_r4_{id(records)}")
    logger.addHandler(H())
    logger.setLevel(logging.INFO)
    logger.propagate = False
    def f(x):
        logger.info("shape %s", tuple(x.shape))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("debug %d", x.shape[0])
            x = x * 2
        logger.warning("done")
        return x + 1
    def mutate(i):
        logger.setLevel([logging.DEBUG, logging.WARNING, logging.INFO][i])
    return P(f, lambda i: (t(i + 2),), mutate, state=lambda: list(records))


def p_print_sep_end_file():
    import sys
    def f(x, n):
        print("n =", n, sep="", end="|\n")
        print(*range(n), sep=",")
        print(x.shape, file=sys.stdout)
        return x * n
    return P(f, lambda i: (t(2), i + 1))


def p_assert_on_tensor_values():
    def f(x):
        assert (x > -10).all(), "too small"
        assert x.shape[0] == 3, f"bad shape {x.shape}"
        return x * 2
    def inputs(i):
        return [(t(3),), (torch.full((3,), -20.0),), (t(4),), (t(3),)][i]
    return P(f, inputs)


def p_metaclass_call_caches_instances():
    class Cached(type):
        instances = {}
        def __call__(cls, *args):
            key = (cls.__name__, args)
            if key not in Cached.instances:
                Cached.instances[key] = super().__call__(*args)
            return Cached.instances[key]
    class Scale(metaclass=Cached):
        def __init__(self, k):
            self.k = k
            self.uses = 0
    def f(x, k):
        s = Scale(k)
        s.uses += 1
        return x * s.k, s.uses, len(Cached.instances), s is Scale(k)
    return P(f, lambda i: (t(3), [2, 3, 2, 2][i]), state=lambda: sorted(k[1] for k in Scale.__class__.instances))


def p_index_dunder_in_slicing():
    class Pos:
        def __init__(self, v):
            self.v = v
        def __index__(self):
            return self.v
    p = Pos(1)
    def f(x):
        return x[p:], x[:Pos(2)], [10, 20, 30, 40][p], x.narrow(0, 0, p) if hasattr(x, "narrow") else None
    def mutate(i):
        p.v = [2, 0, 3][i]
    return P(f, lambda i: (t(5),), mutate)


def p_len_bool_contains_user_object_in_closure():
    class Bag:
        def __init__(self):
            self.items = []
        def __len__(self):
            return len(self.items)
        def __bool__(self):
            return len(self.items) > 1
        def __contains__(self, v):
            return v in self.items
        def __iter__(self):
            return iter(self.items)
    bag = Bag()
    def f(x):
        y = x * len(bag)
        if bag:
            y = y + 1
        if 3 in bag:
            y = y * 3
        return y + sum(bag), list(bag)
    def mutate(i):
        bag.items.append([3, 1, 4][i])
    return P(f, lambda i: (t(2),), mutate)


def p_getattr_fallback_computes_from_dict():
    class Cfg:
        def __init__(self):
            self.raw = {"scale": 2}
        def __getattr__(self, name):
            if name.startswith("double_"):
                return 2 * getattr(self, name[7:])
            try:
                return self.raw[name]
            except KeyError:
                raise AttributeError(name)
    c = Cfg()
    def f(x):
        return x * c.scale + c.double_scale, getattr(c, "shift", 0)
    def mutate(i):
        if i == 0:
            c.raw["scale"] = 5
        elif i == 1:
            c.raw["shift"] = 7
        else:
            c.scale = -1
    return P(f, lambda i: (t(2),), mutate)


def p_module_setattr_override():
    class Tracked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            object.__setattr__(self, "writes", [])
            self.lin = torch.nn.Linear(2, 2)
        def __setattr__(self, name, value):
            if name != "writes":
                self.writes.append(name)
            super().__setattr__(name, value)
        def forward(self, x):
            self.last = x.shape[0]
            self.count = getattr(self, "count", 0) + 1
            return self.lin(x) * self.count
    m = Tracked()
    return P(m, lambda i: (t(i + 1, 2),), state=lambda: (list(m.writes), m.count))


def p_getattribute_counting_side_effect():
    class Counting:
        def __init__(self):
            object.__setattr__(self, "reads", 0)
            object.__setattr__(self, "k", 2)
        def __getattribute__(self, name):
            if name == "k":
                object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
            return object.__getattribute__(self, name)
    o = Counting()
    def f(x):
        a = o.k
        b = o.k
        return x * a + b, object.__getattribute__(o, "reads")
    return P(f, lambda i: (t(2),), state=lambda: object.__getattribute__(o, "reads"))


def p_contextmanager_yield_value_and_state():
    depth = [0]
    @contextlib.contextmanager
    def scope(k):
        depth[0] += 1
        try:
            yield k * depth[0]
        finally:
            depth[0] -= 1
    def f(x, k):
        with scope(k) as a:
            with scope(a) as b:
                y = x * b
        with contextlib.nullcontext(5) as n, contextlib.suppress(KeyError):
            y = y + n
            {}["missing"]
            y = y * 100
        with contextlib.ExitStack() as st:
            c = st.enter_context(scope(2))
            st.callback(depth.append, c)
            y = y + c
        return y, a, b, list(depth)
    return P(f, lambda i: (t(2), i + 1), state=lambda: list(depth))


def p_namedtuple_typing_defaults():
    class Cfg(typing.NamedTuple):
        scale: float = 2.0
        shift: int = 0
        name: str = "c"
        def apply(self, x):
            return x * self.scale + self.shift
    def f(x, cfg):
        c2 = cfg._replace(shift=cfg.shift + 1)
        return cfg.apply(x), c2.apply(x), c2, Cfg(), Cfg._field_defaults, cfg._asdict()
    return P(f, lambda i: (t(2), [Cfg(), Cfg(3.0), Cfg(shift=2, name="z"), Cfg(-1.0, 4)][i]))


def p_ordereddict_move_to_end_and_popitem():
    def f(x, n):
        od = collections.OrderedDict((f"k{i}", i) for i in range(n + 2))
        od.move_to_end("k0")
        od.move_to_end(f"k{n + 1}", last=False)
        first = od.popitem(last=False)
        last = od.popitem()
        return x * len(od), list(od.items()), first, last
    return P(f, lambda i: (t(2), i + 1))


def p_deque_maxlen_returned():
    hist = collections.deque(maxlen=3)
    def f(x):
        hist.append(x.sum().item() > 0)
        local = collections.deque([1, 2, 3], maxlen=2)
        local.appendleft(0)
        local.rotate(1)
        return x * sum(hist), hist.maxlen, list(local), local
    return P(f, lambda i: (t(3),), state=lambda: list(hist), calls=5)


def p_counter_defaultdict_returned():
    def f(x, words):
        c = collections.Counter(words)
        c.update(["a"])
        groups = collections.defaultdict(list)
        for w in words:
            groups[len(w)].append(w)
        top = c.most_common(2)
        return x * c["a"], c, groups, top, dict(groups), sorted(c.elements())
    return P(f, lambda i: (t(2), [["a", "bb", "a"], ["ccc"], ["a", "a", "dd", "e"], []][i]))


def p_heapq_bisect_on_sizes():
    def f(x, y):
        sizes = [x.shape[0], y.shape[0], x.shape[0] + y.shape[0], 3]
        heap = []
        for s in sizes:
            heapq.heappush(heap, -s)
        biggest = -heapq.heappop(heap)
        small = heapq.nsmallest(2, sizes)
        srt = sorted(sizes)
        pos = bisect.bisect_left(srt, 3)
        bisect.insort(srt, x.shape[0])
        return x.sum() * biggest + y.sum(), small, pos, srt, heapq.nlargest(1, sizes, key=lambda v: -v)
    return P(f, lambda i: (t(i + 1), t(4 - i)), dynamic=True)


def p_user_eq_hash_in_set_and_dict_keys():
    class Pt:
        def __init__(self, a, b):
            self.a, self.b = a, b
        def __eq__(self, o):
            return (self.a, self.b) == (o.a, o.b)
        def __hash__(self):
            return hash((self.a, self.b))
    seen = {Pt(1, 2)}
    weights = {Pt(0, 0): 1.0}
    def f(x, p):
        hit = p in seen
        w = weights.get(p, 0.5)
        s = {p, Pt(p.a, p.b), Pt(9, 9)}
        return x * w + hit, hit, len(s)
    def mutate(i):
        if i == 0:
            seen.add(Pt(3, 4))
        elif i == 1:
            weights[Pt(3, 4)] = 7.0
    return P(f, lambda i: (t(2), [Pt(1, 2), Pt(3, 4), Pt(3, 4), Pt(0, 0)][i]), mutate)


def p_iter_next_user_iterator_input():
    class Countdown:
        def __init__(self, n):
            self.n = n
        def __iter__(self):
            return self
        def __next__(self):
            if self.n <= 0:
                raise StopIteration
            self.n -= 1
            return self.n
    def f(x, it):
        first = next(it, None)
        rest = list(it)
        return x * (first or 0) + sum(rest), first, rest, it.n
    return P(f, lambda i: (t(2), Countdown([3, 0, 5, 1][i])))


def p_abc_isinstance_virtual_subclass():
    class Base(abc.ABC):
        @abc.abstractmethod
        def go(self, x): ...
    class Impl(Base):
        def go(self, x):
            return x + 1
    class Plain:
        def go(self, x):
            return x - 1
    objs = [Impl(), Plain()]
    def f(x):
        return [o.go(x) if isinstance(o, Base) else o.go(x) * 10 for o in objs], issubclass(Plain, Base)
    def mutate(i):
        if i == 1:
            Base.register(Plain)
    return P(f, lambda i: (t(2),), mutate)


def p_descriptor_set_name_class_level_state():
    class Counted:
        def __set_name__(self, owner, name):
            self.name = name
            self.hits = 0
        def __get__(self, obj, objtype=None):
            self.hits += 1
            return obj.__dict__.get(self.name, 1) if obj is not None else self
        def __set__(self, obj, value):
            obj.__dict__[self.name] = value * 2
    class M:
        scale = Counted()
    m = M()
    def f(x):
        a = m.scale
        m.scale = a + 1
        return x * m.scale, M.__dict__["scale"].hits
    return P(f, lambda i: (t(2),), state=lambda: (M.__dict__["scale"].hits, vars(m)))


def p_class_attribute_changed_read_via_instance_method():
    class Layer:
        mode = "add"
        k = 1
        def run(self, x):
            return x + self.k if self.mode == "add" else x * self.k
    obj = Layer()
    def f(x):
        return obj.run(x), type(obj).mode
    def mutate(i):
        if i == 0:
            Layer.k = 5
        elif i == 1:
            Layer.mode = "mul"
        else:
            obj.k = -2
    return P(f, lambda i: (t(2),), mutate)


def p_grad_attr_none_or_tensor_between_calls():
    w = torch.randn(3, requires_grad=True)
    def f(x):
        g = w.grad
        if g is None:
            return x * w.detach(), None
        return x * g, g.sum()
    def mutate(i):
        if i == 0:
            w.grad = torch.ones(3)
        elif i == 1:
            w.grad.mul_(3)
        else:
            w.grad = None
    return P(f, lambda i: (t(3),), mutate)


def p_grad_attr_of_input():
    def f(x):
        has = x.grad is not None
        return (x.detach() + x.grad if has else x.detach() * 2), has
    def inputs(i):
        x = t(3).requires_grad_()
        if i % 2:
            x.grad = torch.full((3,), float(i))
        return (x,)
    return P(f, inputs)


def p_requires_grad_branch_on_inputs():
    def f(x, w):
        if w.requires_grad:
            out = x * w
        else:
            out = x + w
        return out, out.requires_grad, x.requires_grad
    def inputs(i):
        return (t(3), t(3).requires_grad_(i % 2 == 0))
    return P(f, inputs, aot=True)


def p_is_leaf_and_grad_fn_branch():
    def f(x):
        if x.is_leaf:
            y = x * 2
        else:
            y = x * 3
        return y, x.is_leaf, x.grad_fn is None, (y.grad_fn is None)
    def inputs(i):
        base = t(3).requires_grad_(i != 3)
        return (base if i % 2 == 0 else base * 1,)
    return P(f, inputs)


def p_version_counter_read():
    def f(x):
        v0 = x._version
        x.add_(1)
        v1 = x._version
        y = x.clone()
        y.mul_(2)
        y.mul_(2)
        return y, v1 - v0, y._version
    def inputs(i):
        x = t(3)
        for _ in range(i):
            x.add_(0)
        return (x,)
    return P(f, inputs)


def p_version_of_input_branch():
    def f(x):
        if x._version > 1:
            return x * 10, x._version
        return x, x._version
    def inputs(i):
        x = t(3)
        for _ in range([0, 3, 1, 5][i]):
            x.mul_(1)
        return (x,)
    return P(f, inputs)


def p_data_ptr_and_storage_compare():
    def f(a, b):
        shares = a.data_ptr() == b.data_ptr()
        same_storage = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        nbytes = a.untyped_storage().nbytes()
        return (a + b if shares else a - b), shares, same_storage, nbytes, a.storage_offset()
    def inputs(i):
        base = t(8)
        return [(base[:4], base[:4]), (base[:4], t(4)), (base[2:6], base[:4]), (base.view(2, 4)[0], base[:4])][i]
    return P(f, inputs)


def p_channels_last_branch():
    def f(x):
        if x.is_contiguous(memory_format=torch.channels_last):
            y = x * 2
            layout = "cl"
        elif x.is_contiguous():
            y = x + 1
            layout = "c"
        else:
            y = x - 1
            layout = "other"
        return y, layout, y.stride(), y.is_contiguous()
    def inputs(i):
        x = t(2, 3, 4, 5)
        return [(x,), (x.to(memory_format=torch.channels_last),), (x.transpose(2, 3),),
                (x.contiguous(memory_format=torch.channels_last),)][i]
    return P(f, inputs)


def p_dim_order_and_strides():
    def f(x):
        order = x.dim_order()
        strides = x.stride()
        y = x.permute(*order) if order != tuple(range(x.dim())) else x
        return y.contiguous() * 2, order, strides, x.is_contiguous()
    def inputs(i):
        x = t(2, 3, 4)
        return [(x,), (x.transpose(0, 2),), (x.permute(1, 0, 2),), (x,)][i]
    return P(f, inputs)


def p_stride_branch_on_expanded():
    def f(x):
        if 0 in x.stride():
            return x.contiguous() * 2, x.stride(), x.is_contiguous()
        return x + 1, x.stride(), x.is_contiguous()
    def inputs(i):
        return [(t(1, 3).expand(4, 3),), (t(4, 3),), (t(4, 1).expand(4, 3),), (t(4, 3)[::2],)][i]
    return P(f, inputs)


def p_tensor_attr_dict_and_hooks_state():
    def f(x):
        hooks = x._backward_hooks
        tag = getattr(x, "tag", None)
        return x * (2 if tag == "a" else 1), tag, hooks is None
    def inputs(i):
        x = t(3)
        if i in (1, 2):
            x.tag = ["a", "b"][i - 1]
        return (x,)
    return P(f, inputs)


def p_is_inference_and_is_shared():
    def f(x):
        return x + 1, x.is_inference(), x.is_shared(), x.is_pinned() if hasattr(x, "is_pinned") else None
    def inputs(i):
        if i % 2:
            with torch.inference_mode():
                return (t(3),)
        return (t(3),)
    return P(f, inputs)


def p_tensor_dtype_device_layout_attrs():
    def f(x):
        return (x.float() * 2, x.dtype.is_floating_point, x.dtype.itemsize, x.element_size(), x.layout, x.device.type,
                x.is_complex(), x.is_floating_point(), x.nbytes, x.itemsize)
    dts = [torch.float32, torch.int64, torch.float64, torch.int8]
    return P(f, lambda i: ((t(3) * 10).to(dts[i]),))


def p_grad_set_inside_function():
    w = torch.zeros(3, requires_grad=True)
    def f(x):
        if w.grad is None:
            w.grad = x.clone()
        else:
            w.grad += x
        return w.grad * 2
    def mutate(i):
        if i == 1:
            w.grad = None
    return P(f, lambda i: (t(3),), mutate, state=lambda: None if w.grad is None else w.grad.clone())


def p_torch_function_mode_entered_by_caller():
    from torch.overrides import TorchFunctionMode
    seen = []
    class Shift(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.add or getattr(func, "__name__", "") == "add":
                seen.append("add")
                return out + 100
            return out
    def f(x):
        return torch.add(x, 1) * 2
    return P(f, lambda i: (t(3),), around=lambda i: Shift() if i % 2 else contextlib.nullcontext(),
             state=lambda: list(seen))


def p_dispatch_mode_entered_by_caller():
    from torch.utils._python_dispatch import TorchDispatchMode
    ops = []
    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))
    def f(x):
        return (x * 2).sin()
    return P(f, lambda i: (t(3),), around=lambda i: Log() if i in (1, 2) else contextlib.nullcontext(),
             state=lambda: list(ops))


def p_saved_tensors_hooks_entered_by_caller():
    packed = []
    def pack(t_):
        packed.append(tuple(t_.shape))
        return t_
    w = torch.randn(3, requires_grad=True)
    def f(x):
        y = (x * w).sin().sum()
        y.backward()
        return y.detach(), w.grad.clone()
    def mutate(i):
        w.grad = None
    return P(f, lambda i: (t(3),), mutate, state=lambda: len(packed) > 0,
             around=lambda i: torch.autograd.graph.saved_tensors_hooks(pack, lambda t_: t_) if i % 2 else contextlib.nullcontext())


def p_anomaly_mode_read_inside():
    def f(x):
        if torch.is_anomaly_enabled():
            return x * 2, True
        return x + 1, False
    return P(f, lambda i: (t(3),), around=lambda i: torch.autograd.set_detect_anomaly(i % 2 == 1))


def p_warnings_filter_error_by_caller():
    import warnings
    def f(x):
        y = x + 1
        warnings.warn("careful", RuntimeWarning)
        return y * 2
    @contextlib.contextmanager
    def around(i):
        with warnings.catch_warnings():
            warnings.simplefilter("error" if i % 2 else "ignore", RuntimeWarning)
            yield
    return P(f, lambda i: (t(3),), around=around)


def p_contextvar_set_by_caller():
    import contextvars
    scale = contextvars.ContextVar("scale", default=1.0)
    def f(x):
        return x * scale.get(), scale.get()
    def mutate(i):
        scale.set([2.0, 3.0, 0.5][i])
    return P(f, lambda i: (t(3),), mutate)


def p_threading_local_read():
    import threading
    local = threading.local()
    local.mode = "a"
    def f(x):
        mode = getattr(local, "mode", "none")
        return (x * 2 if mode == "a" else x - 1), mode
    def mutate(i):
        if i == 0:
            local.mode = "b"
        elif i == 1:
            del local.mode
        else:
            local.mode = "a"
    return P(f, lambda i: (t(3),), mutate)


def p_global_itertools_counter_next():
    counter = itertools.count(10)
    gen_state = {"g": (k * k for k in range(100))}
    def f(x):
        a = next(counter)
        b = next(gen_state["g"])
        return x + a + b, a, b
    return P(f, lambda i: (t(3),), state=lambda: None)


def p_os_environ_written_inside():
    import os
    key = "EMBER_R4_WRITTEN"
    def f(x, v):
        os.environ[key] = str(v)
        got = int(os.environ[key])
        os.environ.pop(key)
        return x * got, key in os.environ
    return P(f, lambda i: (t(3), i + 2))


def p_sys_modules_and_importlib():
    import importlib
    import sys
    def f(x, name):
        mod = importlib.import_module(name)
        has = "math" in sys.modules
        return x * getattr(mod, "pi", 1.0), has, mod.__name__
    return P(f, lambda i: (t(3), ["math", "cmath", "math", "operator"][i]))


def p_globals_dynamic_name():
    def f(x, name):
        g = globals()
        v = g.get(name, 0)
        return x * (v if isinstance(v, (int, float)) else 1), name in g
    return P(f, lambda i: (t(3), ["G_SCALE", "NOPE", "G_COUNT", "G_SCALE"][i]))


def p_user_number_protocols():
    class Num:
        def __init__(self, v):
            self.v = v
        def __float__(self):
            return float(self.v)
        def __int__(self):
            return int(self.v)
        def __index__(self):
            return int(self.v)
        def __format__(self, spec):
            return f"Num<{self.v:{spec}}>"
        def __repr__(self):
            return f"Num({self.v})"
    def f(x, n):
        a = float(n)
        b = int(n)
        c = operator.index(n)
        s = f"{n:.2f}|{n!r}|{str(n)}"
        return x * a + b, x[:c], s, torch.zeros(n).shape, list(range(n))
    return P(f, lambda i: (t(5), Num([2, 3, 1, 4][i])))


def p_sequence_protocol_getitem_only():
    class Seq:
        def __init__(self, items):
            self.items = items
        def __getitem__(self, i):
            return self.items[i]
        def __len__(self):
            return len(self.items)
    class Bag:
        def __init__(self, items):
            self.items = items
        def __iter__(self):
            yield from self.items
        def __reversed__(self):
            return iter(self.items[::-1] + [0])
    def f(x, s, b):
        total = 0
        for v in s:
            total += v
        return x * total, list(reversed(s)), 2 in s, list(b), list(reversed(b)), 3 in b, sorted(b)
    return P(f, lambda i: (t(2), Seq(list(range(i + 1))), Bag([3, 1, 2][: i + 1])))


def p_dict_subclass_missing():
    class Defaulting(dict):
        def __missing__(self, key):
            v = len(key)
            self[key] = v
            return v
    cache = Defaulting()
    def f(x, k):
        return x * cache[k], dict(cache), k in cache
    return P(f, lambda i: (t(2), ["ab", "abc", "ab", "z"][i]), state=lambda: dict(cache))


def p_unhashable_and_eq_ne():
    class V:
        __hash__ = None
        def __init__(self, v):
            self.v = v
        def __eq__(self, o):
            return isinstance(o, V) and self.v == o.v
    def f(x, a, b):
        r = [a == b, a != b, a in [b], V(1) == 1]
        try:
            {a: 1}
            r.append("hashed")
        except TypeError as e:
            r.append(str(e))
        return x * sum(map(int, r[:4])), r
    return P(f, lambda i: (t(2), V(i % 2), V(1)))


def p_property_with_deleter_and_cached():
    class Box:
        def __init__(self):
            self._v = 1
            self.log = []
        @property
        def v(self):
            self.log.append("get")
            return self._v
        @v.setter
        def v(self, val):
            self.log.append("set")
            self._v = val
        @v.deleter
        def v(self):
            self.log.append("del")
            self._v = 0
    b = Box()
    def f(x, k):
        b.v = b.v + k
        out = x * b.v
        if k > 2:
            del b.v
        return out, b.v
    return P(f, lambda i: (t(2), i + 1), state=lambda: (list(b.log), b._v))


def p_conj_and_offset_views_of_inputs():
    def f(x, y):
        v = x[1:]
        return (y + 1, v.storage_offset(), torch.is_conj(x), x.is_neg(), y.storage_offset(),
                x.resolve_conj() * 2)
    def inputs(i):
        c = torch.randn(6, dtype=torch.complex64)
        base = t(10)
        return [(c, base[:4]), (c.conj(), base[3:7]), (c._neg_view(), base[:4]), (c, base[6:])][i]
    return P(f, inputs)


def p_inference_tensor_input_branch():
    def f(x):
        if x.is_inference():
            return x.clone() * 2, "inference"
        return x * 3, "normal"
    def inputs(i):
        if i in (1, 2):
            with torch.inference_mode():
                return (t(3),)
        return (t(3),)
    return P(f, inputs)


def p_no_grad_then_inference_mode_by_caller():
    def f(x):
        y = x + 1
        return y, y.is_inference(), torch.is_grad_enabled()
    ctxs = [torch.no_grad, torch.inference_mode, torch.no_grad, torch.enable_grad]
    return P(f, lambda i: (t(3),), around=lambda i: ctxs[i]())


def p_list_index_count_user_eq():
    class Tok:
        def __init__(self, s):
            self.s = s
        def __eq__(self, o):
            return isinstance(o, Tok) and self.s == o.s
        __hash__ = object.__hash__
    vocab = [Tok("a"), Tok("b"), Tok("c")]
    def f(x, tok):
        idx = vocab.index(tok) if tok in vocab else -1
        return x * idx, idx, vocab.count(tok), tuple(vocab).count(tok)
    def mutate(i):
        if i == 0:
            vocab.insert(0, Tok("z"))
    return P(f, lambda i: (t(2), Tok(["b", "c", "q", "a"][i])), mutate)


def p_torch_random_generator_state_roundtrip():
    g = torch.Generator().manual_seed(11)
    def f(x):
        state = g.get_state()
        a = torch.rand(3, generator=g)
        g.set_state(state)
        b = torch.rand(3, generator=g)
        c = torch.normal(0.0, 1.0, (2,), generator=g)
        return x + a, torch.equal(a, b), c
    return P(f, lambda i: (t(3),), state=lambda: g.get_state())


def p_default_dtype_float64_python_scalars():
    def f(x, s):
        y = x * s
        z = torch.tensor(s)
        w = torch.as_tensor([s, 2 * s])
        return y, z, w, z.dtype, torch.empty(0).dtype
    dts = [torch.float32, torch.float64, torch.float64, torch.float32]
    return P(f, lambda i: (t(3), 1.5 + i), around=lambda i: _default_dtype(dts[i]))


def p_autocast_caller_with_inner_disable():
    def f(x, w):
        with torch.autocast("cpu", enabled=False):
            a = x @ w
        b = x @ w
        return a.dtype, b.dtype, a, b.float()
    on = [True, False, True, True]
    return P(f, lambda i: (t(2, 2), t(2, 2)),
             around=lambda i: torch.autocast("cpu", dtype=torch.bfloat16, enabled=on[i]))


def p_grad_enabled_by_caller_with_inner_enable_grad():
    w = torch.randn(3, requires_grad=True)
    def f(x):
        with torch.enable_grad():
            y = x * w
        z = x * w
        return y.requires_grad, z.requires_grad, y.detach(), z.detach()
    modes = [False, True, False, True]
    return P(f, lambda i: (t(3),), around=lambda i: torch.set_grad_enabled(modes[i]))


def p_tensor_grad_version_after_inplace_inside():
    w = torch.nn.Parameter(torch.ones(3))
    def f(x):
        before = w._version
        with torch.no_grad():
            w.mul_(2)
        return x * w, w._version - before
    return P(f, lambda i: (t(3),), state=lambda: w.detach().clone())


def p_weakref_method_and_finalizer_state():
    class Obj:
        def scale(self):
            return 3
    holder = {"o": Obj()}
    ref = weakref.WeakMethod(holder["o"].scale)
    wset = weakref.WeakSet([holder["o"]])
    def f(x):
        m = ref()
        return x * (m() if m is not None else 1), len(wset)
    def mutate(i):
        if i == 1:
            holder.pop("o")
            import gc
            gc.collect()
    return P(f, lambda i: (t(3),), mutate)


def p_generator_passed_in_around_a_break():
    def f(x, g):
        a = torch.rand(2, generator=g)
        if x.sum() > 0:
            x = x + 1
        b = torch.rand(2, generator=g)
        return x + a, b
    def inputs(i):
        return (t(2), torch.Generator().manual_seed([1, 2, 1, 3][i]))
    return P(f, inputs)


# -- fifth round: user iterators in every consumer, out= arguments, tensor subclasses, number
# -- protocols, hooks with kwargs/prepend/always_call, notes on exceptions, stdout redirection -----
class _Ticker:
    """An iterator whose __iter__ returns self; each __next__ logs its step."""

    def __init__(self, n, log):
        self.n, self.i, self.log = n, 0, log

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        self.log.append(f"next{self.i}")
        return self.i


def p_user_iterator_self_in_consumers():
    log = []

    def f(x, n):
        a = list(_Ticker(n, log))
        b = sum(_Ticker(n, log))
        c = dict(zip("abc", _Ticker(n, log)))
        d = [x * v for i, v in enumerate(_Ticker(n, log), start=10) if i % 2 == 0]
        e = sorted(_Ticker(n, log), reverse=True)
        g = max(_Ticker(n, log), default=-1)
        h = 2 in _Ticker(n, log)
        return x + b, a, c, d, e, g, h
    return P(f, lambda i: (t(2), [3, 0, 4, 3][i]), state=lambda: list(log))


def p_user_iterator_self_zip_pulls_one_more():
    log = []

    def f(x, n, m):
        # zip asks its first iterator before it finds the second exhausted: one extra __next__
        pairs = list(zip(_Ticker(n, log), _Ticker(m, log)))
        mapped = list(map(lambda a, b: a * b, _Ticker(n, log), _Ticker(m, log)))
        return x * len(pairs), pairs, mapped
    return P(f, lambda i: (t(2), [3, 2, 4, 1][i], [2, 3, 4, 0][i]), state=lambda: list(log))


def p_user_iterator_self_loop_break_and_resume():
    def f(x, it, stop):
        out = x
        for v in it:
            it.log.append(f"body{v}")
            out = out * v
            if v == stop:
                break
        rest = list(it)
        return out, it.i, rest, list(it.log)
    return P(f, lambda i: (t(2), _Ticker([4, 5, 3, 4][i], []), [2, 9, 1, 4][i]))


def p_user_iterator_self_with_break_inside_loop():
    def f(x, it):
        out = x
        for v in it:
            out = out + v
            if out.sum() > 3:  # data-dependent: a graph break inside the loop over a user iterator
                out = out - 1
        return out, it.i, list(it.log)
    return P(f, lambda i: (torch.full((2,), [0.5, 3.0, -2.0, 1.0][i]), _Ticker([3, 2, 4, 3][i], [])))


def p_user_iterator_next_raises_midway():
    class Flaky(_Ticker):
        def __next__(self):
            if self.i == self.fail_at:
                raise ValueError(f"step {self.i} failed")
            return super().__next__()

    def f(x, n, fail_at):
        it = Flaky(n, [])
        it.fail_at = fail_at
        got = []
        try:
            for v in it:
                got.append(v)
        except ValueError as e:
            return x - 1, got, str(e), it.i
        return x + 1, got, "", it.i
    return P(f, lambda i: (t(2), 4, [2, 9, 0, 2][i]))


def p_iter_returns_other_user_iterator():
    class Box:
        def __init__(self, items):
            self.items = items
            self.iters = 0

        def __iter__(self):
            self.iters += 1
            return _Ticker(len(self.items), self.items)  # logs into the box's own list

    def f(x, box):
        total = x
        for v in box:
            total = total + v
        again = [v for v in box]
        return total, again, box.iters, list(box.items)
    return P(f, lambda i: (t(2), Box(list(range([2, 3, 0, 2][i])))))


def p_out_argument_inputs():
    def f(x, y, buf):
        r = torch.add(x, y, out=buf)
        s = torch.mul(x, 2, out=buf[:1])
        return r is buf, buf.clone(), s.shape, buf.sum()
    return P(f, lambda i: (t(3), t(3), torch.zeros(3)), aot=True)


def p_out_argument_aliases_input():
    def f(x, y):
        torch.add(x, y, out=x)  # x is written with x + y
        torch.sin(y, out=y)
        return x * 2, y
    return P(f, lambda i: (t(4), t(4)), aot=True)


def p_tensor_subclass_torch_function_input():
    calls = []

    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    def f(x, y):
        z = x * 2 + y
        return z.sum(), type(z).__name__
    return P(f, lambda i: (t(3).as_subclass(Logged) if i % 2 == 0 else t(3), t(3)),
             state=lambda: len(calls) > 0)


def p_number_protocols_round_floor_trunc():
    class Money:
        def __init__(self, v):
            self.v = v

        def __round__(self, ndigits=None):
            return Money(round(self.v, ndigits)) if ndigits is not None else round(self.v)

        def __floor__(self):
            return math.floor(self.v) - 100

        def __trunc__(self):
            return int(self.v) + 100

        def __int__(self):
            return int(self.v)

        def __float__(self):
            return float(self.v) * 2

    def f(x, v):
        m = Money(v)
        r0 = round(m)
        r2 = round(m, 1).v
        fl = math.floor(m)
        tr = math.trunc(m)
        return x * r0 + fl + tr, r0, r2, fl, tr, int(m), float(m)
    return P(f, lambda i: (t(2), [2.5, -3.55, 0.45, 7.25][i]))


def p_total_ordering_sorted_min_max():
    @functools.total_ordering
    class Ver:
        def __init__(self, major, minor):
            self.major, self.minor = major, minor

        def __eq__(self, other):
            return (self.major, self.minor) == (other.major, other.minor)

        def __lt__(self, other):
            return (self.major, self.minor) < (other.major, other.minor)

    def f(x, pairs):
        vs = [Ver(*p) for p in pairs]
        lo, hi = min(vs), max(vs)
        ordered = [(v.major, v.minor) for v in sorted(vs)]
        ge = [a >= b for a, b in zip(vs, vs[1:])]
        return x * hi.major + lo.minor, ordered, ge
    return P(f, lambda i: (t(2), [[(1, 2), (0, 9), (1, 0)], [(3, 1), (3, 1)], [(0, 0)], [(2, 2), (1, 5), (2, 1)]][i]))


def p_hooks_prepend_always_call_kwargs():
    log = []

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x, scale=1.0):
            return self.lin(x) * scale

    m = M()
    handles = []

    def pre_a(mod, args, kwargs):
        log.append("a")
        return args, {**kwargs, "scale": kwargs.get("scale", 1.0) * 2}

    def pre_b(mod, args):
        log.append("b")
        return (args[0] + 1,)

    def post(mod, args, kwargs, out):
        log.append(f"post{sorted(kwargs)}")
        return out - 1

    def f(x):
        return m(x, scale=3.0)

    def mutate(i):
        if i == 0:
            handles.append(m.register_forward_pre_hook(pre_a, with_kwargs=True))
        elif i == 1:
            handles.append(m.register_forward_pre_hook(pre_b, prepend=True))
            handles.append(m.register_forward_hook(post, with_kwargs=True, always_call=True))
        else:
            handles.pop(0).remove()
    return P(f, lambda i: (t(2, 3),), mutate, state=lambda: list(log), calls=4)


def p_exception_notes_and_groups():
    def f(x, k):
        try:
            try:
                if k > 1:
                    raise ValueError(f"k={k}")
                y = x + k
            except ValueError as e:
                e.add_note("while scaling")
                e.add_note(f"shape {tuple(x.shape)}")
                raise
        except ValueError as e:
            return x - 1, list(e.__notes__), str(e)
        return y, [], ""
    return P(f, lambda i: (t(2), [0, 2, 5, 1][i]))


def p_redirect_stdout_inside():
    import io as _io

    def f(x, n):
        buf = _io.StringIO()
        with contextlib.redirect_stdout(buf):
            print("n is", n)
            y = x * n
        print("after", buf.getvalue().strip())
        return y, buf.getvalue()
    return P(f, lambda i: (t(2), [1, 2, 2, 5][i]))


def p_itertools_permutations_product_batched():
    def f(x, n):
        perms = list(itertools.permutations(range(n), 2))
        prod = list(itertools.product("ab", repeat=2))
        chunks = [list(c) for c in itertools.islice(itertools.cycle(range(n)), 5)]
        grouped = {k: len(list(g)) for k, g in itertools.groupby(sorted([n, 1, n, 2, 1]))}
        return x * len(perms), perms, prod, chunks, grouped
    return P(f, lambda i: (t(2), [3, 2, 1, 3][i]))


def p_length_hint_and_reversed_protocols():
    import operator as _op

    class Seq:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i >= self.n:
                raise IndexError(i)
            return i * 10

        def __reversed__(self):
            return iter([-1] * self.n)

    def f(x, n):
        s = Seq(n)
        fwd = list(s)
        back = list(reversed(s))
        hint = _op.length_hint(s)
        return x + sum(fwd), fwd, back, hint, 20 in s
    return P(f, lambda i: (t(2), [3, 0, 2, 4][i]))


def p_simplenamespace_and_mappingproxy_config():
    cfg = types.SimpleNamespace(scale=2.0, mode="add", extra={"bias": 1.0})
    view = types.MappingProxyType(cfg.extra)

    def f(x):
        y = x * cfg.scale
        if cfg.mode == "add":
            y = y + view.get("bias", 0.0)
        return y, dict(view), vars(cfg).get("new", None)

    def mutate(i):
        if i == 0:
            cfg.scale = 3.0
        elif i == 1:
            cfg.extra["bias"] = -5.0
            cfg.mode = "mul"
        else:
            cfg.new = "set"
    return P(f, lambda i: (t(2),), mutate)


def p_user_iterator_self_unpacking_and_yield_from():
    log = []

    def relay(n):
        got = yield from _Ticker(n, log)
        yield -1
        return got

    def f(x, n):
        first, *rest = _Ticker(n + 1, log)
        star = [*_Ticker(n, log)]
        joined = "-".join(str(v) for v in _Ticker(n, log))
        pairs = dict((v, v * v) for v in _Ticker(n, log))
        relayed = list(relay(n))
        return x * first + len(rest), rest, star, joined, pairs, relayed, set(_Ticker(n, log))
    return P(f, lambda i: (t(2), [2, 0, 3, 2][i]), state=lambda: list(log))


def p_user_iterator_self_partly_consumed_input():
    def f(x, it, k):
        head = [next(it) for _ in range(k)]
        total = x
        for i, v in enumerate(it):
            total = total + v * i
        return total, head, it.i, list(it.log)

    def inputs(i):
        it = _Ticker([5, 4, 6, 5][i], [])
        for _ in range([1, 0, 2, 1][i]):
            next(it)
        return (t(2), it, [1, 2, 0, 1][i])
    return P(f, inputs)


def p_generator_stopiteration_becomes_runtimeerror():
    def gen(n):
        for i in range(n):
            if i == 2:
                raise StopIteration("inner")  # PEP 479: a RuntimeError for the consumer
            yield i

    def f(x, n):
        try:
            got = list(gen(n))
        except RuntimeError as e:
            return x - 1, str(e), type(e.__cause__).__name__
        return x + sum(got), "", ""
    return P(f, lambda i: (t(2), [2, 5, 0, 3][i]))


def p_generator_nonlocal_and_closure_state():
    def f(x, n):
        count = 0

        def gen():
            nonlocal count
            for i in range(n):
                count += 1
                yield x * i

        g = gen()
        first = next(g)
        after_first = count
        rest = list(g)
        return first, rest, after_first, count
    return P(f, lambda i: (t(2), [3, 1, 4, 2][i]))


def p_min_max_sorted_keys_on_tensors_and_dicts():
    def f(xs, d):
        widest = max(xs, key=lambda t: t.shape[0])
        narrow = min(xs, key=lambda t: (t.shape[0], -t.ndim))
        by_value = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        top = max(d, key=d.get)
        return widest * 2, narrow.shape, by_value, top, min(d.values(), default=None)
    return P(f, lambda i: ([t(2), t([3, 1, 4, 2][i]), t(1)], {"a": [1, 3, 2, 2][i], "b": 2, "c": [0, 3, 5, 1][i]}))


def p_min_max_with_data_dependent_key():
    def f(xs):
        best = max(xs, key=lambda t: float(t.sum()))  # the key reads tensor data
        order = sorted(range(len(xs)), key=lambda i: xs[i].abs().sum().item())
        return best * 1, order
    return P(f, lambda i: ([t(3), t(3), t(3)],))


def p_int_division_semantics_python_vs_tensor():
    def f(x, a, b):
        py = (a // b, a % b, divmod(a, b), -a // b, math.floor(a / b), int(a / b), round(a / b),
              math.fmod(a, b), a ** 2 // b)
        ta, tb = torch.tensor(a), torch.tensor(b)
        tens = ((ta // tb).item(), (ta % tb).item(), torch.fmod(ta, tb).item(), torch.remainder(ta, tb).item(),
                torch.div(ta, tb, rounding_mode="trunc").item(), torch.div(ta, tb, rounding_mode="floor").item())
        return x * py[0] + tens[1], py, tens
    return P(f, lambda i: (t(2), [-7, 7, -9, 13][i], [2, -3, 4, -5][i]))


def p_round_half_even_floats_and_tensors():
    def f(x, v):
        py = [round(v), round(v, 1), round(-v), round(v + 1)]
        ten = torch.round(torch.tensor([v, -v, v + 1], dtype=torch.float64)).tolist()
        s = x.sum().item() * 0 + v  # a float that passed through a tensor
        return x * round(s), py, ten, round(s)
    return P(f, lambda i: (t(2), [0.5, 2.5, 1.25, -3.5][i]))


def p_zero_dim_tensor_python_scalar_mixing():
    def f(x, k, flag):
        a = torch.tensor(3) + k          # int tensor + python float/int
        b = torch.tensor(2.0) * x        # 0-d float with a 1-d
        c = torch.tensor([1, 2], dtype=torch.int32) + torch.tensor(1.5)  # 0-d float promotes
        d = torch.tensor(True) + 1
        e = torch.tensor(flag)
        taken = "yes" if e else "no"
        return a, a.dtype, b, c, c.dtype, d, d.dtype, taken, (x > 0).all().item() is True
    return P(f, lambda i: (t(2), [1, 2.5, -1, 0.0][i], [True, False, True, False][i]))


def p_item_tolist_in_control_flow_nested():
    def f(x, idx):
        rows = idx.tolist()
        out = []
        for r in rows:
            if r[0] > r[1]:
                out.append(x[r[0] % x.shape[0]])
            else:
                out.append(-x[r[1] % x.shape[0]])
        total = sum(v for row in rows for v in row)
        return torch.stack(out), rows, total, type(rows[0][0]).__name__
    return P(f, lambda i: (t(4), torch.randint(0, 6, (3, 2))))


def p_inplace_on_aliasing_inputs_views():
    def f(x, row, col):
        row.mul_(2)        # a view of x: x changes too
        col.add_(x.sum())  # reads x after the write, then writes another view
        x[0, 0] = -1.0
        return x.clone(), row.clone(), col.clone()

    def inputs(i):
        x = t(3, 3)
        return (x, x[[0, 1, 2][i % 3]], x[:, 1])
    return P(f, inputs)


def p_hooks_on_submodule_added_between_calls_with_kwargs_return():
    log = []
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    handles = []

    def pre(mod, args, kwargs):
        log.append(("pre", len(args), sorted(kwargs)))
        return (args[0] * 2,), kwargs

    def post(mod, args, out):
        log.append(("post", tuple(out.shape)))
        return out + 1 if len(log) % 2 else None

    def f(x):
        return net(x)

    def mutate(i):
        if i == 0:
            handles.append(net[0].register_forward_pre_hook(pre, with_kwargs=True))
        elif i == 1:
            handles.append(net[2].register_forward_hook(post))
        else:
            while handles:
                handles.pop().remove()
    return P(f, lambda i: (t(2, 3),), mutate, state=lambda: list(log), aot=True)


def p_training_flag_and_requires_grad_flips():
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.0), torch.nn.BatchNorm1d(3))

    def f(x):
        y = net(x)
        mode = "train" if net.training else "eval"
        grads = [p.requires_grad for p in net.parameters()]
        return y, mode, grads, y.requires_grad

    def mutate(i):
        if i == 0:
            net.eval()
        elif i == 1:
            net[0].weight.requires_grad_(False)
        else:
            net.train()
            net[0].weight.requires_grad_(True)
    return P(f, lambda i: (t(4, 3),), mutate)


def p_reversed_and_dict_protocols_of_input_objects():
    class Trail:
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

        def __reversed__(self):
            return iter(["rev"] + self.items[::-1])

        def __len__(self):
            return len(self.items)

    class Table:  # a mapping by keys() and __getitem__, not a dict
        def __init__(self, n):
            self.n = n

        def keys(self):
            return [f"k{i}" for i in range(self.n)]

        def __getitem__(self, k):
            return int(k[1:]) * 10

        def __iter__(self):
            return iter(["not", "these"])

    def f(x, trail, table):
        back = list(reversed(trail))
        d = dict(table)
        merged = {**table}
        return x * len(back), back, d, merged
    return P(f, lambda i: (t(2), Trail(list(range([2, 3, 0, 2][i]))), Table([2, 1, 3, 2][i])))


def p_dataclass_asdict_copies_tensors():
    @dataclasses.dataclass
    class State:
        w: torch.Tensor
        hist: list

    st = State(torch.zeros(3), [1])

    def f(x):
        d = dataclasses.asdict(st)  # deep copies: the tensor and the list are new objects
        d["w"].add_(x)
        d["hist"].append(2)
        tup = dataclasses.astuple(st)
        tup[0].mul_(0)
        return d["w"] * 1, st.w * 1, list(st.hist), d["hist"], d["w"] is st.w
    return P(f, lambda i: (t(3),), state=lambda: (st.w.clone(), list(st.hist)))


def p_copy_protocols_user_copy_and_deepcopy():
    import copy as _copy

    class Cfg:
        def __init__(self, scale, tags):
            self.scale, self.tags = scale, tags
            self.copies = 0

        def __copy__(self):
            new = Cfg(self.scale * 10, self.tags)
            new.copies = self.copies + 1
            return new

        def __deepcopy__(self, memo):
            return Cfg(-self.scale, list(self.tags) + ["deep"])

    def f(x, cfg):
        a = _copy.copy(cfg)
        b = _copy.deepcopy(cfg)
        a.tags.append("shared")
        return x * a.scale + b.scale, a.copies, list(a.tags), list(b.tags), a.tags is cfg.tags
    return P(f, lambda i: (t(2), Cfg([1.0, 2.0, 0.5, 1.0][i], ["t"])))


def p_reflected_operators_with_tensor_on_left():
    class Offset:
        def __init__(self, v):
            self.v = v

        def __radd__(self, other):
            return other + self.v

        def __rmul__(self, other):
            return other * (self.v + 1)

        def __rmatmul__(self, other):
            return other.sum() * self.v

    def f(x, k):
        o = Offset(k)
        return x + o, x * o, x @ o, 3 + o
    return P(f, lambda i: (t(3), [1, 2, -1, 0][i]))


def p_torch_size_comparisons_and_types():
    def f(x):
        s = x.shape
        checks = (s == (2, 3), s == [2, 3], s[1:] == (3,), type(s[1:]).__name__, type(s + (1,)).__name__,
                  s + (1,), list(reversed(s)), s.numel(), x.size()[::-1], tuple(s) == s, s.index(3) if 3 in s else -1)
        return x.sum(), checks
    return P(f, lambda i: (t(*[(2, 3), (3, 2), (2, 3), (1, 3)][i]),))


def p_except_name_unbound_after_block():
    def f(x, k):
        try:
            if k:
                raise KeyError(k)
        except KeyError as err:
            msg = repr(err)
        try:
            return x, msg, err  # `err` is deleted at the end of the except block
        except NameError as e:
            return x * 2, msg if k else "", str(e)
    return P(f, lambda i: (t(2), [1, 0, 2, 1][i]))


def p_eval_and_exec_inside():
    scale = 3

    def f(x, expr):
        y = eval(expr, {"x": x, "scale": scale})
        ns = {}
        exec("z = x.sum() * 2", {"x": y}, ns)
        return y, ns["z"]
    return P(f, lambda i: (t(2), ["x * scale", "x + 1", "x * scale", "-x"][i]))


def p_old_sequence_protocol_iteration_and_in():
    class Squares:
        def __init__(self, n):
            self.n = n
            self.reads = []

        def __getitem__(self, i):
            self.reads.append(i)
            if i >= self.n:
                raise IndexError(i)
            return i * i

    def f(x, sq):
        found = 4 in sq
        reads_after_in = list(sq.reads)
        vals = list(sq)
        return x + sum(vals), found, reads_after_in, vals, list(sq.reads)
    return P(f, lambda i: (t(2), Squares([3, 1, 5, 0][i])))


def p_itertools_lazy_over_generators_and_user_iterators():
    log = []

    def gen(n, tag):
        for i in range(n):
            log.append(f"{tag}{i}")
            yield i

    def f(x, n):
        c = itertools.chain(gen(n, "a"), _Ticker(n, log))
        head = list(itertools.islice(c, 2))
        pw = next(itertools.pairwise(gen(n, "p")), None)
        zl = list(itertools.zip_longest(gen(n, "z"), _Ticker(1, log), fillvalue=-1))
        acc = list(itertools.islice(itertools.accumulate(gen(n, "s")), 2))
        sm = next(itertools.starmap(operator.mul, zip(gen(n, "m"), gen(n, "k"))), None)
        found = 1 in gen(n, "in")
        return x * len(head), head, pw, zl, acc, sm, found, next(c, "end")
    return P(f, lambda i: (t(2), [3, 0, 1, 4][i]), state=lambda: list(log))


# -- sixth round: state changed between calls read through closures, defaults, class and
# -- instance attributes, descriptors, slots, dataclasses, enums, functools, globals shadowing
# -- builtins, 0-dim tensors converted to Python numbers -----------------------------------------
G6_LIMIT = 4
G6_WEIGHTS = {"a": 1.0, "b": 2.0, "c": 3.0}
G6_ACT = torch.relu
G6_NAMES = ("a", "b")
G6_TYPES = (int,)
G6_SIZES = {2, 3}
G6_TAG = "x"


def p_nonlocal_set_by_sibling_closure_read_in_nested():
    def make():
        k = 1

        def setk(v):
            nonlocal k
            k = v

        def apply(x):
            def inner(y):
                return y * k
            return inner(x) + k
        return setk, apply
    setk, apply = make()

    def f(x):
        return apply(x)

    def mutate(i):
        setk([2, -3, 0.5][i])
    return P(f, lambda i: (t(2),), mutate)


def p_helper_defaults_dict_item_changed():
    def helper(x, opts={"scale": 2, "shift": 0}):
        return x * opts["scale"] + opts["shift"]

    def f(x):
        return helper(x), helper(x, {"scale": 1, "shift": len(helper.__defaults__[0])})

    def mutate(i):
        helper.__defaults__[0]["scale"] = [3, -1, 5][i]
        if i == 1:
            helper.__defaults__[0]["extra"] = 1
    return P(f, lambda i: (t(2),), mutate)


def p_helper_kwdefaults_replaced():
    def helper(x, *, p=2, q=1):
        return x ** p + q

    def f(x):
        return helper(x), helper(x, q=0)

    def mutate(i):
        helper.__kwdefaults__ = [{"p": 1, "q": 5}, {"p": 3, "q": 1}, {"p": 2, "q": -1}][i]
    return P(f, lambda i: (t(2),), mutate)


def p_class_attr_deleted_falls_to_base():
    class Base:
        factor = 2

    class Child(Base):
        factor = 5

    def f(x):
        c = Child()
        return x * c.factor + type(c).factor

    def mutate(i):
        if i == 0:
            del Child.factor
        elif i == 1:
            Base.factor = 7
        else:
            Child.factor = -1
    return P(f, lambda i: (t(2),), mutate)


def p_global_shadows_builtin_between_calls():
    def f(x, lst):
        return x * len(lst) + max(lst)

    def mutate(i):
        g = globals()
        if i == 0:
            g["len"] = lambda s: 10
        elif i == 1:
            g["max"] = lambda s: -100
            del g["len"]
        else:
            g.pop("max", None)
    return P(f, lambda i: (t(2), [1, 2, 3]), mutate)


def p_global_function_alias_rebound():
    def f(x):
        return G6_ACT(x - 0.1) * 2

    def mutate(i):
        global G6_ACT
        G6_ACT = [torch.tanh, torch.sigmoid, torch.relu][i]
    return P(f, lambda i: (t(4),), mutate, aot=True)


def p_captured_list_sorted_and_set_mutated():
    order = [3, 1, 2]
    seen = {1}

    def f(x):
        out = x
        for k in order:
            if k in seen:
                out = out * k
            else:
                out = out + k
        return out, list(order)

    def mutate(i):
        order.sort(reverse=(i % 2 == 0))
        seen.add([3, 2, 9][i])
        if i == 2:
            seen.discard(1)
    return P(f, lambda i: (t(2),), mutate)


def p_captured_dict_tensor_value_reshaped():
    store = {"w": torch.ones(3), "b": 0.5}

    def f(x):
        return x * store["w"] + store["b"], len(store)

    def mutate(i):
        store["w"] = [torch.ones(1) * 2, torch.arange(3.0), torch.ones(3)][i]
        store["b"] = [1, 0.25, -2.0][i]
        if i == 1:
            store["extra"] = None
    return P(f, lambda i: (t(3),), mutate)


def p_property_getter_reads_global_and_replaced():
    class Obj:
        @property
        def limit(self):
            return G6_LIMIT * 2

    obj = Obj()

    def f(x):
        return x.clamp(max=obj.limit / 10)

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [1, 3, 2][i]
        if i == 1:
            Obj.limit = property(lambda self: -G6_LIMIT)
        if i == 2:
            Obj.limit = 0.3
    return P(f, lambda i: (t(4),), mutate)


def p_instance_dict_shadows_nondata_descriptor_added_later():
    class Obj:
        def scale(self):
            return 2

    obj = Obj()

    def f(x):
        return x * obj.scale()

    def mutate(i):
        if i == 0:
            obj.scale = lambda: 7
        elif i == 1:
            del obj.scale
        else:
            Obj.scale = lambda self: -1
    return P(f, lambda i: (t(2),), mutate)


def p_custom_descriptor_with_state():
    class Counted:
        def __init__(self):
            self.mult = 1

        def __get__(self, obj, owner):
            if obj is None:
                return self
            return obj.base * self.mult

    class Obj:
        val = Counted()

        def __init__(self):
            self.base = 2

    obj = Obj()

    def f(x):
        return x + obj.val

    def mutate(i):
        Obj.__dict__["val"].mult = [3, -2, 0][i]
        obj.base = [1, 4, 2][i]
    return P(f, lambda i: (t(2),), mutate)


def p_slots_value_changed_and_deleted():
    class S:
        __slots__ = ("a", "b")

        def __init__(self):
            self.a = 1
            self.b = 2

    s = S()

    def f(x):
        try:
            b = s.b
        except AttributeError:
            b = -5
        return x * s.a + b

    def mutate(i):
        if i == 0:
            s.a = 3
        elif i == 1:
            del s.b
        else:
            s.b = 10
    return P(f, lambda i: (t(2),), mutate)


@dataclasses.dataclass(frozen=True)
class _Cfg6:
    scale: float = 1.0
    names: tuple = ("a",)
    extra: list = dataclasses.field(default_factory=list)


G6_CFG = _Cfg6()


def p_frozen_dataclass_replaced_global():
    def f(x):
        c = G6_CFG
        out = x * c.scale
        for n in c.names:
            out = out + len(n)
        return out + len(c.extra), dataclasses.astuple(c)[0]

    def mutate(i):
        global G6_CFG
        G6_CFG = [dataclasses.replace(G6_CFG, scale=2.0), _Cfg6(names=("ab", "c")), G6_CFG][i]
        G6_CFG.extra.append(i)
    return P(f, lambda i: (t(2),), mutate)


def p_dataclass_field_default_and_eq():
    @dataclasses.dataclass
    class Opt:
        lr: float = 0.1
        steps: int = 2

    base = Opt()

    def f(x, o):
        out = x
        for _ in range(o.steps):
            out = out - o.lr * out
        return out, o == base, o == Opt()

    def mutate(i):
        base.lr = [0.5, 0.1, 0.2][i]
    return P(f, lambda i: (t(2), [Opt(), Opt(lr=0.5), Opt(steps=3), Opt(0.2)][i]), mutate)


class _Mode6(enum.Enum):
    FAST = 1
    SLOW = 2

    def factor(self):
        return self.value * 10


def p_enum_by_value_and_method():
    def f(x, v):
        m = _Mode6(v)
        if m is _Mode6.FAST:
            return x + m.factor(), m.name
        return x - m.factor(), m.name
    return P(f, lambda i: (t(2), [1, 2, 2, 1][i]))


def p_enum_missing_and_flag_combination():
    class Perm(enum.Flag):
        R = 1
        W = 2
        X = 4

    def f(x, bits):
        p = Perm(bits)
        out = x
        if Perm.R in p:
            out = out + 1
        if p & Perm.W:
            out = out * 2
        return out, p.value, [m.name for m in Perm if m in p]
    return P(f, lambda i: (t(2), [1, 3, 6, 7][i]))


def p_lru_cache_maxsize_one_args_vary():
    calls = []

    @functools.lru_cache(maxsize=1)
    def table(n):
        calls.append(n)
        return [k * k for k in range(n)]

    def f(x, n):
        return x + sum(table(n)), len(calls)
    return P(f, lambda i: (t(2), [3, 4, 3, 3][i]), state=lambda: list(calls))


def p_wraps_decorator_with_state():
    def counting(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            wrapper.count += 1
            return fn(*a, **k) * wrapper.scale
        wrapper.count = 0
        wrapper.scale = 1
        return wrapper

    @counting
    def g(x):
        """doc"""
        return x + 1

    def f(x):
        return g(x), g.__name__, g.__doc__, g.__wrapped__(x)

    def mutate(i):
        g.scale = [2, -1, 3][i]
    return P(f, lambda i: (t(2),), mutate, state=lambda: g.count)


def p_partial_global_rebound_with_tensor():
    def f(x):
        return PART6(x)

    def mutate(i):
        global PART6
        PART6 = [functools.partial(torch.add, other=torch.ones(2) * 3),
                 functools.partial(torch.mul, other=torch.full((2,), -2.0)),
                 functools.partial(torch.add, alpha=2, other=torch.ones(2))][i]
    return P(f, lambda i: (t(2),), mutate)


PART6 = functools.partial(torch.add, other=torch.ones(2))


def p_try_finally_return_mutates_returned_list():
    log = []

    def g(x, k):
        out = [x]
        try:
            if k > 1:
                return out
            out.append(x * 2)
        finally:
            out.append(x + k)
            log.append(len(out))
        return out

    def f(x, k):
        r = g(x, k)
        return r, len(r)
    return P(f, lambda i: (t(2), [0, 2, 1, 5][i]), state=lambda: list(log))


def p_user_cm_exit_swallow_flag_changed():
    class CM:
        def __init__(self):
            self.swallow = False
            self.entered = 0

        def __enter__(self):
            self.entered += 1
            return self.entered

        def __exit__(self, *exc):
            return self.swallow

    cm = CM()

    def f(x, bad):
        r = x
        try:
            with cm as n:
                r = x * n
                if bad:
                    raise ValueError("bad")
                r = r + 1
        except ValueError:
            return r - 100, "caught"
        return r, "ok"

    def mutate(i):
        cm.swallow = not cm.swallow
    return P(f, lambda i: (t(2), [True, True, False, True][i]), mutate, state=lambda: cm.entered)


def p_walrus_in_while_over_shapes():
    def f(x, lim):
        steps = 0
        while (n := x.shape[0]) > lim:
            x = x[: n // 2]
            steps += 1
        return x, steps, n
    return P(f, lambda i: (t([16, 9, 16, 5][i], 2), [2, 3, 5, 1][i]), dynamic=True)


def p_match_on_shapes_and_global_tag():
    def f(x):
        match (x.dim(), G6_TAG):
            case (1, "x"):
                return x + 1
            case (2, tag) if tag.startswith("y"):
                return x.sum(0)
            case (_, "z"):
                return x * 0
            case _:
                return x - 1

    def mutate(i):
        global G6_TAG
        G6_TAG = ["y1", "z", "x"][i]
    return P(f, lambda i: (t(*[(3,), (2, 3), (3,), (2, 2)][i]),), mutate)


def p_match_class_pattern_match_args_changed():
    class Pt:
        __match_args__ = ("a", "b")

        def __init__(self, a, b):
            self.a, self.b = a, b

    def f(x, p):
        match p:
            case Pt(1, y):
                return x + y
            case Pt(a=0):
                return x * 0
            case _:
                return x

    def mutate(i):
        Pt.__match_args__ = [("b", "a"), ("a", "b"), ("b", "a")][i]
    return P(f, lambda i: (t(2), Pt(*[(1, 5), (1, 5), (0, 1), (5, 1)][i])), mutate)


def p_fstrings_with_shapes_and_specs():
    def f(x):
        s = f"{x.shape[0]:>4}|{x.shape!r}|{x.dtype}|{tuple(x.shape)}|{x.dim():03d}|{x.numel():x}"
        return x * len(s), s
    return P(f, lambda i: (t(*[(3,), (2, 5), (11,), (3,)][i]),), dynamic=True)


def p_sorted_key_reads_global_weights():
    def f(x):
        keys = sorted(G6_WEIGHTS, key=lambda k: G6_WEIGHTS[k])
        out = x
        for i, k in enumerate(keys):
            out = out * (i + 1) + G6_WEIGHTS[k]
        return out, keys

    def mutate(i):
        G6_WEIGHTS[["a", "b", "c"][i]] = [10.0, -1.0, 2.5][i]
    return P(f, lambda i: (t(2),), mutate)


def p_string_methods_on_shapes():
    def f(x):
        s = "x".join(map(str, x.shape))
        parts = s.split("x")
        tag = str(x.shape).count(",") + s.find("x") + len(s.zfill(6))
        return x * tag, s, parts, s.upper().startswith("2")
    return P(f, lambda i: (t(*[(2, 3), (12, 1), (2, 3), (4,)][i]),))


def p_genexpr_condition_reads_global():
    def f(x):
        total = sum(v for v in range(6) if v < G6_LIMIT)
        picked = [x * v for v in range(4) if v in G6_SIZES]
        return x + total, picked

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [2, 6, 0][i]
        G6_SIZES.add(i)
    return P(f, lambda i: (t(2),), mutate)


def p_closure_factory_cells_mutated_after_return():
    def make(scale):
        state = {"calls": 0}

        def fn(x):
            state["calls"] += 1
            return x * scale + state["calls"]
        return fn, state

    fn, st = make(3)

    def f(x):
        g, _ = make(2)
        return fn(x), g(x), g(x), st["calls"]

    def mutate(i):
        st["calls"] = [10, 0, -5][i]
    return P(f, lambda i: (t(2),), mutate, state=lambda: dict(st))


def p_recursion_depth_from_shape_and_global():
    def rec(x, n):
        if n <= 0 or n > G6_LIMIT + 3:
            return x
        return rec(x * 2, n - 1) + 1

    def f(x):
        return rec(x, x.shape[0])

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [0, 4, -2][i]
    return P(f, lambda i: (t([3, 3, 5, 2][i]),), mutate)


def p_keyerror_caught_depends_on_captured_dict():
    table = {"a": 1}

    def f(x, key):
        try:
            v = table[key]
        except KeyError as e:
            return x - 1, f"missing {e}"
        return x * v, "hit"

    def mutate(i):
        table[["b", "z", "c"][i]] = i + 2
        if i == 1:
            del table["a"]
    return P(f, lambda i: (t(2), ["a", "b", "a", "c"][i]), mutate)


def p_del_local_then_unbound_caught():
    def f(x, k):
        y = x * 2
        if k:
            del y
        try:
            return y + 1, "bound"
        except UnboundLocalError as e:
            return x - 1, type(e).__name__
    return P(f, lambda i: (t(2), [0, 1, 1, 0][i]))


def p_star_unpacking_shapes_and_lists():
    def f(x, lst):
        first, *mid, last = x.shape
        a, *rest = lst
        *init, z = rest or [0]
        return x.reshape(first, -1) * last, mid, a, init, z
    return P(f, lambda i: (t(*[(2, 3, 4), (6, 2), (2, 3, 4), (1, 2, 2, 2)][i]), [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]][i]))


def p_chained_comparison_shapes_against_global():
    def f(x):
        n = x.shape[0]
        if 0 < n <= G6_LIMIT < 10:
            return x + n
        if n > G6_LIMIT == 2:
            return x - n
        return x * 0

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [2, 12, 5][i]
    return P(f, lambda i: (t([3, 3, 3, 5][i]),), mutate, dynamic=True)


def p_zero_dim_tensor_to_int_index_and_range():
    def f(x, k):
        n = int(k)
        items = ["a", "b", "c", "d"]
        picked = items[k]
        total = 0
        for j in range(k):
            total += j
        return x * n + total, picked, operator.index(k), items[-k:]
    return P(f, lambda i: (t(2), torch.tensor([1, 3, 0, 2][i])))


def p_zero_dim_tensor_float_bool_math():
    def f(x):
        m = x.mean()
        a = math.floor(m)
        b = math.isfinite(m)
        c = float(x.max()) * 2
        d = f"{x.sum():.2f}"
        e = bool(x.min() > -0.5)
        g = abs(float(m))
        return x + a, a, b, round(c, 5), d, e, round(g, 5)
    return P(f, lambda i: (t(3) * 2,), calls=5)


def p_zero_dim_tensor_truth_and_while():
    def f(x, s):
        steps = 0
        while s > 0:
            s = s - 1
            steps += 1
        if x.sum():
            return x * steps, steps
        return x - steps, steps
    return P(f, lambda i: (torch.tensor([0.0, 1.0, 0.0, -1.0][i:i + 2]), torch.tensor([2, 0, 5, 1][i])))


def p_zero_dim_tensor_as_dict_key_and_list_mult():
    def f(x, k):
        d = {0: "zero", 1: "one", 2: "two"}
        n = int(k)
        return x * n, d[n], [7] * n, "ab" * int(k), divmod(n, 2)
    return P(f, lambda i: (t(2), torch.tensor([2, 0, 1, 2][i])))


def p_isinstance_against_global_tuple_rebound():
    def f(x, v):
        if isinstance(v, G6_TYPES):
            return x + 1
        return x - 1

    def mutate(i):
        global G6_TYPES
        G6_TYPES = [(float,), (int, float), (str,)][i]
    return P(f, lambda i: (t(2), [1, 1.5, 2, "s"][i]), mutate)


def p_getattr_by_global_name_rebound():
    class Obj:
        a = 1
        b = 2

    def f(x):
        out = x
        for name in G6_NAMES:
            out = out * getattr(Obj, name, 10)
        return out

    def mutate(i):
        global G6_NAMES
        G6_NAMES = [("b",), ("a", "zz"), ("a", "b", "a")][i]
    return P(f, lambda i: (t(2),), mutate)


def p_hasattr_instance_attr_added_removed():
    class Obj:
        pass

    obj = Obj()

    def f(x):
        if hasattr(obj, "bias"):
            return x + obj.bias
        return x

    def mutate(i):
        if i == 1:
            del obj.bias
        else:
            obj.bias = [2.0, None, -3.0][i]
    return P(f, lambda i: (t(2),), mutate)


def p_attrgetter_nested_path_changed():
    class Inner:
        def __init__(self):
            self.v = 2

    class Outer:
        def __init__(self):
            self.inner = Inner()

    o = Outer()
    get = operator.attrgetter("inner.v")

    def f(x):
        return x * get(o)

    def mutate(i):
        if i == 1:
            o.inner = Inner()
        else:
            o.inner.v = [5, 0, -1][i]
    return P(f, lambda i: (t(2),), mutate)


def p_object_class_reassigned_between_calls():
    class A:
        def go(self, x):
            return x + 1

    class B:
        def go(self, x):
            return x * 10

    obj = A()

    def f(x):
        return obj.go(x), type(obj).__name__

    def mutate(i):
        obj.__class__ = [B, A, B][i]
    return P(f, lambda i: (t(2),), mutate)


def p_obj_dict_updated_and_class_call_replaced():
    class Fn:
        def __init__(self):
            self.k = 1

        def __call__(self, x):
            return x * self.k

    fn = Fn()

    def f(x):
        return fn(x)

    def mutate(i):
        if i == 0:
            fn.__dict__.update(k=4)
        elif i == 1:
            Fn.__call__ = lambda self, x: x - self.k
        else:
            fn.__dict__.clear()
            fn.k = 0.5
    return P(f, lambda i: (t(2),), mutate)


def p_global_class_rebound_to_subclass():
    class Base:
        def scale(self):
            return 2

    class Sub(Base):
        def scale(self):
            return super().scale() * 3

    def f(x):
        obj = CLS6()
        return x * obj.scale(), isinstance(obj, Sub)

    def mutate(i):
        global CLS6
        CLS6 = [Sub, Base, Sub][i]
    globals()["CLS6"] = Base
    return P(f, lambda i: (t(2),), mutate)


def p_cached_property_invalidated_between_calls():
    class Obj:
        def __init__(self):
            self.n = 2
            self.computed = 0

        @functools.cached_property
        def table(self):
            self.computed += 1
            return [k * self.n for k in range(3)]

    obj = Obj()

    def f(x):
        return x + sum(obj.table)

    def mutate(i):
        obj.n = [5, 1, 3][i]
        if i != 1:
            del obj.table
    return P(f, lambda i: (t(2),), mutate, state=lambda: obj.computed)


def p_namedtuple_global_replaced_and_method():
    Pt = collections.namedtuple("Pt", "x y")

    class Holder:
        pt = Pt(1, 2)

    def f(x):
        p = Holder.pt
        return x * p.x + p.y, p._asdict(), p._replace(y=0)

    def mutate(i):
        Holder.pt = Holder.pt._replace(**[{"x": 3}, {"y": -1}, {"x": 0, "y": 0}][i])
    return P(f, lambda i: (t(2),), mutate)


def p_generator_reads_global_between_yields():
    def gen(n):
        for k in range(n):
            yield k * G6_LIMIT

    def f(x):
        return x + sum(gen(3)), list(gen(2))

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [7, -1, 0][i]
    return P(f, lambda i: (t(2),), mutate)


def p_str_format_with_global_dict_and_membership():
    def f(x):
        msg = "{a}-{b:.1f}".format(**G6_WEIGHTS)
        n = x.shape[0]
        return x * (n in G6_SIZES), msg

    def mutate(i):
        G6_WEIGHTS["b"] = [0.25, 1.75, 3.0][i]
        if i == 0:
            G6_SIZES.add(5)
        if i == 1:
            G6_SIZES.discard(3)
    return P(f, lambda i: (t([3, 5, 3, 2][i]),), mutate)


def p_static_method_replaced_and_classmethod_state():
    class Ops:
        base = 1

        @staticmethod
        def act(x):
            return x + 1

        @classmethod
        def scale(cls, x):
            return x * cls.base

    def f(x):
        return Ops.scale(Ops.act(x)), Ops().scale(x)

    def mutate(i):
        if i == 0:
            Ops.act = staticmethod(lambda x: x * 0)
        elif i == 1:
            Ops.base = 4
        else:
            Ops.scale = classmethod(lambda cls, x: x - cls.base)
    return P(f, lambda i: (t(2),), mutate)


def p_tolist_values_in_python_control():
    def f(x):
        vals = x.tolist()
        pos = [v for v in vals if v > 0]
        return x * len(pos), len(pos), sorted(vals)[0] > -1
    return P(f, lambda i: (t(4),), calls=5)


def p_break_inside_loop_over_user_iterator_made_inside_then_reused():
    log = []

    def f(x, n, stop):
        it = _Ticker(n, log)
        out = x * 2
        for v in it:
            out = out + v
            print("step", v)  # a graph break inside the loop over a user iterator
            if v == stop:
                break
        rest = list(it)  # the same object, where the loop left it
        return out, it.i, rest
    return P(f, lambda i: (t(2), [3, 4, 0, 3][i], [2, 9, 1, 3][i]), state=lambda: list(log))


def p_break_inside_loop_over_input_user_iterator_with_enumerate_body():
    def f(x, it):
        out = x
        for v in it:
            out = out * v
            if out.abs().max() > 4:  # data-dependent
                out = out / 4
            it.log.append(f"body{v}")
        return out, it.i, list(it.log)
    return P(f, lambda i: (torch.full((2,), [0.5, 3.0, -2.0, 1.0][i]), _Ticker([3, 2, 4, 0][i], [])))


def p_itertools_takewhile_dropwhile_compress_tee_over_generators():
    log = []

    def gen(n, tag):
        for i in range(n):
            log.append(f"{tag}{i}")
            yield i

    def pred(v):
        log.append(f"p{v}")
        return v < 2

    def f(x, n):
        tw = itertools.takewhile(pred, gen(n, "t"))
        head = next(tw, None)
        dw = itertools.dropwhile(pred, gen(n, "d"))
        d1 = next(dw, "none")
        cp = list(itertools.compress(gen(n, "c"), _Ticker(n - 1, log)))
        a, b = itertools.tee(gen(n, "e"), 2)
        ta = [next(a, None), next(a, None)]
        tb = list(b)
        return x * len(cp), head, d1, cp, ta, tb, list(tw), list(dw)
    return P(f, lambda i: (t(2), [3, 0, 1, 4][i]), state=lambda: list(log))


def p_break_inside_loops_over_enumerate_zip_map_of_user_iterators():
    log = []

    def f(x, n):
        it = _Ticker(n, log)
        y = x * 1.5
        for k, v in enumerate(it, 2):
            y = y + k * v
            print("kv", k, v)
            if v == 2:
                break
        rest = list(it)
        for a, b in zip(_Ticker(n, log), ["p", "q", "r"]):
            y = y + a
            print("ab", a, b)
        total = 0
        for m in map(lambda q: q * 3, _Ticker(n, log)):
            total += m
            if y.sum() > 5:  # data-dependent
                y = y / 2
        return y, rest, total, it.i
    return P(f, lambda i: (t(2), [3, 0, 4, 1][i]), state=lambda: list(log))


class _Stateful6:
    """A user object whose every protocol reads its mutable state."""

    def __init__(self):
        self.k = 2
        self.items = [1, 2]

    def __len__(self):
        return len(self.items)

    def __bool__(self):
        return self.k > 0

    def __getitem__(self, i):
        return self.items[i] * self.k

    def __contains__(self, v):
        return v in self.items

    def __call__(self, x):
        return x * self.k

    def __iter__(self):
        for v in self.items:
            yield v + self.k

    def __add__(self, other):
        return other + self.k

    def __radd__(self, other):
        return other - self.k

    def __repr__(self):
        return f"S({self.k})"

    def __format__(self, spec):
        return format(self.k, spec)

    def __hash__(self):
        return self.k

    def __eq__(self, other):
        return isinstance(other, _Stateful6) and other.k == self.k

    def __index__(self):
        return self.k


def p_user_object_protocols_read_state_changed_between_calls():
    obj = _Stateful6()

    def f(x):
        a = len(obj)
        b = bool(obj)
        c = obj[0]
        d = 2 in obj
        e = obj(x)
        g = list(obj)
        h = obj + 1
        k = 10 + obj
        r = repr(obj) + str(obj) + f"{obj:>3}"
        lst = [0, 1, 2, 3, 4, 5][obj]
        return e + a + c + h + k, b, d, g, r, lst

    def mutate(i):
        obj.k = [3, 0, 1][i]
        obj.items.append(i + 2)
    return P(f, lambda i: (t(2),), mutate)


def p_user_object_as_dict_key_hash_changes():
    obj = _Stateful6()
    table = {2: "two", 3: "three"}

    def f(x):
        name = table.get(hash(obj), "none")
        return x * hash(obj), name, obj == _Stateful6()

    def mutate(i):
        obj.k = [3, 5, 2][i]
    return P(f, lambda i: (t(2),), mutate)


def p_runtime_checkable_protocol_attr_added():
    @typing.runtime_checkable
    class HasScale(typing.Protocol):
        def scale(self):
            ...

    class Obj:
        pass

    obj = Obj()

    def f(x):
        if isinstance(obj, HasScale):
            return x * obj.scale()
        return x

    def mutate(i):
        if i == 1:
            del obj.scale
        else:
            obj.scale = [lambda: 3, None, lambda: -2][i]
    return P(f, lambda i: (t(2),), mutate)


def p_callable_after_call_added_to_class():
    class Obj:
        pass

    obj = Obj()

    def f(x):
        if callable(obj):
            return obj(x)
        return x - 1

    def mutate(i):
        if i == 0:
            Obj.__call__ = lambda self, x: x * 4
        elif i == 1:
            del Obj.__call__
        else:
            Obj.__call__ = lambda self, x: x + 9
    return P(f, lambda i: (t(2),), mutate)


def p_instance_dict_replaced_wholesale():
    class Obj:
        def __init__(self):
            self.a = 1

    obj = Obj()

    def f(x):
        return x * getattr(obj, "a", 0) + getattr(obj, "b", 0)

    def mutate(i):
        obj.__dict__ = [{"a": 3}, {"b": 5}, {"a": 2, "b": 1}][i]
    return P(f, lambda i: (t(2),), mutate)


def p_enum_member_attribute_set_between_calls():
    class Mode(enum.Enum):
        A = "a"
        B = "b"

    Mode.A.scale = 1

    def f(x, m):
        return x * getattr(m, "scale", 0)

    def mutate(i):
        Mode.A.scale = [2, 5, -1][i]
        if i == 1:
            Mode.B.scale = 7
    return P(f, lambda i: (t(2), [Mode.A, Mode.A, Mode.B, Mode.B][i]), mutate)


def p_simplenamespace_global_attr_changed():
    def f(x):
        cfg = NS6
        out = x * cfg.scale
        if cfg.use_bias:
            out = out + cfg.bias
        return out, vars(cfg).get("tag")

    def mutate(i):
        NS6.scale = [2, 3, 1][i]
        NS6.use_bias = [True, False, True][i]
        if i == 2:
            NS6.tag = "t"
    return P(f, lambda i: (t(2),), mutate)


NS6 = types.SimpleNamespace(scale=1, use_bias=False, bias=0.5)


def p_dispatch_table_keyed_by_global_string():
    def f(x):
        return DISPATCH6[G6_TAG](x), G6_TAG

    def mutate(i):
        global G6_TAG
        G6_TAG = ["y", "x", "z"][i]
        if i == 1:
            DISPATCH6["x"] = torch.cos
    return P(f, lambda i: (t(2),), mutate)


DISPATCH6 = {"x": torch.sin, "y": torch.tanh, "z": torch.exp}


def p_inner_closure_sees_outer_rebinding_late():
    def f(x, k):
        scale = 1

        def inner(y):
            return y * scale

        first = inner(x)
        scale = k
        second = inner(x)
        fns = [lambda y, j=j: y + j for j in range(k)]
        return first, second, [g(x) for g in fns]
    return P(f, lambda i: (t(2), [2, 3, 0, 2][i]))


def p_defaults_tuple_of_tensors_replaced_shape():
    def helper(x, w=torch.ones(2)):
        return x * w

    def f(x):
        return helper(x)

    def mutate(i):
        helper.__defaults__ = ([torch.ones(1) * 3, torch.arange(2.0), torch.ones(2) * -1][i],)
    return P(f, lambda i: (t(2),), mutate)


def p_global_list_of_tensors_appended():
    def f(x):
        out = x
        for w in TENSORS6:
            out = out * w
        return out, len(TENSORS6)

    def mutate(i):
        TENSORS6.append(torch.full((2,), float(i + 2)))
        if i == 1:
            TENSORS6[0] = torch.zeros(2)
    return P(f, lambda i: (t(2),), mutate)


TENSORS6 = [torch.ones(2)]


def p_class_attr_via_dunder_class_and_super():
    class Base:
        k = 1

        def get(self):
            return self.__class__.k

    class Child(Base):
        k = 2

        def get(self):
            return super().get() * 10 + super().k

    c = Child()

    def f(x):
        return x * c.get()

    def mutate(i):
        if i == 0:
            Child.k = 3
        elif i == 1:
            Base.k = 5
        else:
            c.__class__ = Base
    return P(f, lambda i: (t(2),), mutate)


def p_frozen_dataclass_object_setattr_inside():
    @dataclasses.dataclass(frozen=True)
    class Box:
        v: int = 1

    def f(x, b):
        try:
            b.v = 5
            err = ""
        except dataclasses.FrozenInstanceError as e:
            err = type(e).__name__
        object.__setattr__(b, "v", b.v + 1)
        return x * b.v, err, b
    return P(f, lambda i: (t(2), Box([1, 2, 3, 1][i])))


def p_metaclass_property_changed():
    class Meta(type):
        @property
        def size(cls):
            return cls._size

    class Cfg(metaclass=Meta):
        _size = 2

    def f(x):
        return x.repeat(Cfg.size)

    def mutate(i):
        Cfg._size = [3, 1, 2][i]
    return P(f, lambda i: (t(2),), mutate)


def p_module_via_sys_modules_attr():
    import sys

    def f(x):
        mod = sys.modules[__name__]
        return x * mod.G6_LIMIT

    def mutate(i):
        global G6_LIMIT
        G6_LIMIT = [9, -3, 0][i]
    return P(f, lambda i: (t(2),), mutate)


def p_function_code_replaced_in_place():
    def helper(x):
        return x + 1

    def other(x):
        return x * 10

    def third(x):
        return x - 3

    def f(x):
        return helper(x), helper.__name__

    def mutate(i):
        helper.__code__ = [other.__code__, third.__code__, other.__code__][i]
        if i == 1:
            helper.__name__ = "renamed"
    return P(f, lambda i: (t(2),), mutate)


def p_closure_cell_contents_assigned():
    def make():
        k = 2

        def g(x):
            return x * k
        return g
    g = make()

    def f(x):
        return g(x)

    def mutate(i):
        g.__closure__[0].cell_contents = [5, -1, 0.5][i]
    return P(f, lambda i: (t(2),), mutate)


def p_class_name_changed_read_inside():
    class Layer:
        pass

    obj = Layer()

    def f(x):
        name = type(obj).__name__
        return x * len(name), name, Layer.__qualname__.split(".")[-1]

    def mutate(i):
        Layer.__name__ = ["Dense", "Conv2dLayer", "L"][i]
        Layer.__qualname__ = Layer.__name__
    return P(f, lambda i: (t(2),), mutate)


@dataclasses.dataclass
class _DC6:
    a: int = 1
    b: list = dataclasses.field(default_factory=lambda: [1])


DC6 = _DC6()


def p_asdict_and_fields_of_global_dataclass_mutated():
    def f(x):
        d = dataclasses.asdict(DC6)
        return x * d["a"] + sum(d["b"]), d, [fl.name for fl in dataclasses.fields(DC6)]

    def mutate(i):
        DC6.a = [3, 0, 2][i]
        DC6.b.append(i)
    return P(f, lambda i: (t(2),), mutate)


def p_copy_of_global_object_attr_changed():
    import copy

    class Cfg:
        def __init__(self):
            self.k = 1
            self.names = ["a"]

    cfg = Cfg()

    def f(x):
        c = copy.copy(cfg)
        c.k += 1
        d = copy.deepcopy(cfg)
        d.names.append("z")
        return x * c.k + len(d.names), cfg.k, list(cfg.names)

    def mutate(i):
        cfg.k = [4, 0, 2][i]
        cfg.names.append(str(i))
    return P(f, lambda i: (t(2),), mutate)


def p_reduce_and_dict_copy_of_globals():
    def f(x):
        total = functools.reduce(operator.mul, G6_SIZES_LIST, 1)
        d = dict(G6_WEIGHTS)
        d["new"] = 0.0
        return x * total + d["a"], sorted(d), len(G6_WEIGHTS)

    def mutate(i):
        G6_SIZES_LIST.append(i + 2)
        G6_WEIGHTS["a"] = [5.0, -1.0, 0.5][i]
    return P(f, lambda i: (t(2),), mutate)


G6_SIZES_LIST = [2, 3]


def p_zero_dim_int_tensor_in_python_arith_and_compare():
    def f(x, k):
        n = k + 1  # a tensor
        m = int(k) * 2 + 1
        flag = k > 1
        if flag:
            return x * m, m, n
        return x - m, m, n
    return P(f, lambda i: (t(2), torch.tensor([0, 3, 2, 1][i])))


def p_module_int_attribute_used_as_range_changed():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.repeats = 2
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            for _ in range(self.repeats):
                x = self.lin(x)
            return x

    net = Net()

    def f(x):
        return net(x)

    def mutate(i):
        net.repeats = [3, 0, 1][i]
    return P(f, lambda i: (t(2),), mutate)
