"""Small ordinary Python programs for the differential harness (test_python_programs.py).

This module is loaded twice per program, as two fresh module objects: one world runs eagerly,
the other through `ember.compile`, so globals, classes and closures never leak between them.
Each `p_*` function builds a program and returns a `P`: the function, the inputs of call `i`,
an optional `mutate(i)` run between calls (the external state changes that guards must see)
and an optional `state()` snapshot compared after every call.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import operator
import random
import typing

import torch


@dataclasses.dataclass
class P:
    fn: typing.Callable
    inputs: typing.Callable[[int], tuple]
    mutate: typing.Callable[[int], None] | None = None
    state: typing.Callable[[], object] | None = None
    calls: int = 4
    aot: bool = False  # also run with backend="aot_eager"


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


def p_decorated_inner_functions():
    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            wrapper.n += 1
            return fn(*a, **k)
        wrapper.n = 0
        return wrapper

    @logged
    def g(v, scale=1.0):
        return v * scale

    @torch.no_grad()
    def h(v):
        return v * 3

    def f(x):
        return g(x, scale=2.0), h(x), g.n, g.__name__
    return P(f, lambda i: (t(2).requires_grad_(i % 2 == 0),), state=lambda: g.n)


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
