"""Python builtins (and a few stdlib callables) on symbolic values: one entry per callable."""
from __future__ import annotations

import abc
import collections
import functools
import itertools
import inspect
import math
import operator
import types

import sympy
import torch

from . import semantics as S
from .attributes import _ABSENT, class_lookup, generic_getattr, guard_mro, module_store_attr, newobj_generic_getattr
from .builder import wrap
from .calls import call, module_call_impl
from .config import Unsupported
from .frame import TracedRaise
from .ops_build import BINARY_OPS, COMPARE_OPS
from .protocol import CALLABLE, LEN, describe
from .queries import STABLE_TEXT, hasattr_var, python_type
from .sizes import SYM_TYPES, concrete, note_float
from .tables import registrar
from .variables import (
    AutocastVar, BoundVar, ConstVar, DictVar, GradModeVar, IterVar, ListVar, NewObjVar, ObjVar, PartialVar, SetVar,
    SuperVar, TensorVar, TupleVar,
)

BUILTINS = {}
builtin = registrar(BUILTINS)


def _consts(args):
    return [S.const_value(a) for a in args]


@builtin(len)
def _len(fr, args, kwargs):
    (v,) = args
    return LEN.lookup(type(v))(fr, v)


@builtin(object.__dict__["__setattr__"])
def _object_setattr(fr, args, kwargs):
    obj, name, value = args
    if not isinstance(obj, NewObjVar):
        raise Unsupported("side_effect", f"object.__setattr__ on {S.describe(obj)}")
    S.object_setattr(fr, obj, S.const_value(name), value)
    return ConstVar(None)


@builtin(object.__dict__["__init__"])
def _object_init(fr, args, kwargs):
    if len(args) > 1 or kwargs:
        raise Unsupported("trace_error", "object.__init__() takes exactly one argument")
    return ConstVar(None)


@builtin(isinstance)
def _isinstance(fr, args, kwargs):
    v, cls = args
    classinfo = S.const_value(cls)
    if isinstance(v, (ObjVar, NewObjVar)) and any(_instance_dependent(c) for c in _flat_classes(classinfo)):
        raise Unsupported("unsupported_call", f"isinstance() against {_flat_classes(classinfo)}, whose metaclass's "
                          "__instancecheck__ reads the object (a runtime-checkable Protocol)")
    return ConstVar(_subclass_check(fr, python_type(v), classinfo))


def _flat_classes(classinfo) -> list:
    if isinstance(classinfo, tuple):
        return [c for item in classinfo for c in _flat_classes(item)]
    return [classinfo]


def _instance_dependent(cls) -> bool:
    """Whether `isinstance(obj, cls)` may depend on `obj`'s own state, not only its type: a
    metaclass whose `__instancecheck__` is neither type's nor ABCMeta's (which asks the type).
    typing's runtime-checkable Protocols look for the protocol's attributes on the object."""
    if (type(cls).__module__ or "").startswith("torch"):  # nn.Parameter's: a tensor flag, else the type
        return False
    check = getattr(type(cls), "__instancecheck__", None)
    return check is not None and check not in (type.__instancecheck__, abc.ABCMeta.__instancecheck__)


@builtin(issubclass)
def _issubclass(fr, args, kwargs):
    return ConstVar(_subclass_check(fr, *_consts(args)))


def _subclass_check(fr, cls, classinfo) -> bool:
    """issubclass, answered now and guarded on the MRO that answered it (a class whose
    `__bases__` is assigned between calls answers differently)."""
    if isinstance(cls, type):
        guard_mro(fr.tr, cls)
    infos = classinfo if isinstance(classinfo, tuple) else (classinfo,)
    if any(isinstance(c, abc.ABCMeta) for c in infos):
        # an ABC answers from its registry: ABC.register() between calls changes the answer,
        # and bumps the global cache token
        token = abc.get_cache_token()
        fr.tr.guards.add(fr.tr.ns.ref(abc.get_cache_token), f"X() == {token!r}", "no ABC registered since")
    return issubclass(cls, classinfo)


@builtin(type)
def _type(fr, args, kwargs):
    if len(args) != 1:
        raise Unsupported("unsupported_call", "type() with 3 arguments")
    return ObjVar(python_type(args[0]))


@builtin(inspect.signature)
def _signature(fr, args, kwargs):
    """The signature of a Python function or of a method bound to a traced object: computed at
    trace time (a Signature is immutable, and the function is held by reference)."""
    (f,) = args
    if kwargs:
        raise Unsupported("unsupported_call", "inspect.signature with options")
    if isinstance(f, BoundVar) and isinstance(f.func, ObjVar) and isinstance(f.func.value, types.FunctionType):
        sig = inspect.signature(types.MethodType(f.func.value, object()))  # without `self`
    elif isinstance(f, ObjVar) and isinstance(f.value, (types.FunctionType, types.MethodType, type)):
        sig = inspect.signature(f.value)
    else:
        raise Unsupported("unsupported_call", f"inspect.signature of {S.describe(f)}")
    return wrap(fr.tr, sig, None)


@builtin(getattr)
def _getattr(fr, args, kwargs):
    obj, name = args[0], S.const_value(args[1])
    if len(args) == 3 and not hasattr_var(fr, obj, name):
        return args[2]
    return S.getattr_var(fr, obj, name)


@builtin(hasattr)
def _hasattr_builtin(fr, args, kwargs):
    return ConstVar(hasattr_var(fr, args[0], S.const_value(args[1])))


# Called explicitly (`super().__call__(x)` in a class that overrides __call__, or
# `super().__getattr__(name)` in one that overrides __getattr__): Module's own behaviour.
@builtin(torch.nn.Module.__call__, torch.nn.Module._call_impl)
def _module_call(fr, args, kwargs):
    if not (args and isinstance(args[0], ObjVar) and isinstance(args[0].value, torch.nn.Module)):
        raise Unsupported("unsupported_call", "Module.__call__ on a non-module")
    return module_call_impl(fr, args[0], args[1:], kwargs)


@builtin(object.__getattribute__)
def _object_getattribute(fr, args, kwargs):
    if len(args) == 2 and isinstance(args[0], NewObjVar):
        return newobj_generic_getattr(fr, args[0], S.const_value(args[1]))
    if not (len(args) == 2 and isinstance(args[0], ObjVar)):
        raise Unsupported("unsupported_call", "object.__getattribute__ on a value built in the trace")
    return generic_getattr(fr, args[0], S.const_value(args[1]))


@builtin(torch.nn.Module.__getattr__)
def _module_getattr(fr, args, kwargs):
    if not (len(args) == 2 and isinstance(args[0], ObjVar) and isinstance(args[0].value, torch.nn.Module)):
        raise Unsupported("unsupported_call", "Module.__getattr__ on a non-module")
    return module_store_attr(fr, args[0], S.const_value(args[1]))


@builtin(callable)
def _callable(fr, args, kwargs):
    v = args[0]
    if isinstance(v, (ObjVar, NewObjVar)):
        # what CPython's callable() asks: whether the type defines __call__, guarded along its
        # MRO (a class given or losing `__call__` between calls answers differently)
        cls = v.cls if isinstance(v, NewObjVar) else type(v.value)
        return ConstVar(class_lookup(fr.tr, cls, "__call__") is not _ABSENT)
    return ConstVar(CALLABLE.lookup(type(v))(v))


@builtin(range)
def _range(fr, args, kwargs):
    return ConstVar(range(*_consts(args)))


def _user_iters(fr, args) -> list:
    """The arguments, a user object among them replaced by its iterator (its ``__iter__`` is
    called once, when the builtin is called, as in Python), so that a user iterator is
    consumed lazily like a generator (Note [User iterators])."""
    return [S.iterate(fr, a) if isinstance(a, (ObjVar, NewObjVar)) and S.user_iter_class(a) else a
            for a in args]


def _is_lazy(v) -> bool:
    return isinstance(v, IterVar) and v.pull is not None


@builtin(enumerate)
def _enumerate(fr, args, kwargs):
    start = S.const_value(args[1]) if len(args) > 1 else S.const_value(kwargs.get("start", ConstVar(0)))
    args = _user_iters(fr, args[:1]) + list(args[1:])
    if not _is_lazy(args[0]):
        return IterVar([TupleVar([ConstVar(i + start), v]) for i, v in enumerate(S.unpack(fr, args[0]))],
                       py_type=enumerate)
    count = {"next": start}

    def step(values):
        count["next"] += 1
        return [TupleVar([ConstVar(count["next"] - 1), values[0]])]
    return _lazy(fr, [args[0]], step, enumerate, remake=(enumerate, [], lambda: [count["next"]]))


@builtin(zip)
def _zip(fr, args, kwargs):
    if kwargs.get("strict") is not None and S.const_value(kwargs["strict"]):
        lists = [S.unpack(fr, a) for a in args]
        if len({len(x) for x in lists}) > 1:
            raise Unsupported("trace_error", "zip(strict=True) of different lengths")
    args = _user_iters(fr, args)
    if not any(_is_lazy(a) for a in args):
        return IterVar([TupleVar(list(t)) for t in zip(*[S.unpack(fr, a) for a in args])], py_type=zip)
    return _lazy(fr, args, lambda values: [TupleVar(values)], zip, remake=(zip, [], lambda: []))


@builtin(reversed)
def _reversed(fr, args, kwargs):
    seq = args[0]
    if isinstance(seq, (ObjVar, NewObjVar)) and S.class_dunder(seq, "__reversed__") is not None:
        result = S.call_dunder(fr, seq, "__reversed__", [])  # a user class's own, traced
        if result is S.NO_DUNDER:
            raise Unsupported("unsupported_call", f"reversed() of {describe(seq)}: its __reversed__ is not Python")
        return S.iterate(fr, result)
    if isinstance(seq, (ObjVar, NewObjVar)) and S.class_dunder(seq, "__getitem__") is not None:
        # the sequence protocol, as Python's reversed() uses it: len(), then seq[n-1] .. seq[0]
        n = S.const_value(BUILTINS[len](fr, [seq], {}))
        return IterVar([S.getitem(fr, seq, ConstVar(i)) for i in reversed(range(n))], py_type=reversed)
    return IterVar(list(reversed(S.unpack(fr, seq))), py_type=type(reversed([])))


@builtin(iter)
def _iter(fr, args, kwargs):
    if len(args) == 1 and isinstance(args[0], (ObjVar, NewObjVar)):
        it = S.user_iter(fr, args[0], keep_object=True)  # Note [User iterators]
        if it is not S.NO_DUNDER:
            return it
    return S.iterate(fr, args[0])


@builtin(next)
def _next(fr, args, kwargs):
    it = args[0]
    if isinstance(it, IterVar):
        if it.more():
            return it.take()
        if len(args) > 1:  # the default only for an iterator known to be exhausted
            return args[1]
    elif len(args) == 1 and isinstance(it, (ObjVar, NewObjVar)):  # a user class's __next__, traced
        result = S.call_dunder(fr, it, "__next__", [])
        if result is not S.NO_DUNDER:
            return result
    raise Unsupported("unsupported_call", f"next() on an exhausted or unknown iterator ({describe(it)})")


@builtin(list)
def _list(fr, args, kwargs):
    return ListVar(S.unpack(fr, args[0]) if args else [])


@builtin(tuple)
def _tuple(fr, args, kwargs):
    return TupleVar(S.unpack(fr, args[0]) if args else [])


@builtin(set)
def _set(fr, args, kwargs):
    return SetVar(S.dedupe(S.unpack(fr, args[0]) if args else []))


@builtin(frozenset)
def _frozenset(fr, args, kwargs):
    """A frozenset is immutable, of its own type: a constant (a SetVar is a set)."""
    items = S.dedupe(S.unpack(fr, args[0]) if args else [])
    return ConstVar(frozenset(S.const_key(v) for v in items))


@builtin(dict)
def _dict(fr, args, kwargs):
    items = {}
    if args:
        src = args[0]
        if isinstance(src, DictVar):
            items.update(src.items)
        elif isinstance(src, (ObjVar, NewObjVar)) and S.class_dunder(src, "keys") is not None:
            # a mapping by its keys() and [] (what dict() asks of any object with keys())
            for k in S.unpack(fr, call(fr, S.getattr_var(fr, src, "keys"), [], {})):
                items[S.const_key(k)] = S.getitem(fr, src, k)
        else:
            for pair in S.unpack(fr, src):
                k, v = S.unpack(fr, pair)
                items[S.const_key(k)] = v
    items.update(kwargs)
    return DictVar(items)


@builtin(collections.defaultdict)
def _defaultdict(fr, args, kwargs):
    d = _dict(fr, list(args[1:]), kwargs)
    d.cls = collections.defaultdict
    d.default_factory = args[0] if args else ConstVar(None)
    return d


# itertools: each builds the whole sequence at trace time, as zip() and enumerate() do.
@builtin(itertools.product)
def _product(fr, args, kwargs):
    repeat = S.const_value(kwargs.get("repeat", ConstVar(1)))
    return IterVar([TupleVar(list(t)) for t in itertools.product(*[S.unpack(fr, a) for a in args], repeat=repeat)])


def _items(it):
    """A symbolic iterator's items, one per step."""
    while it.more():
        yield it.take()


def _made(py_type, steps, lazy: bool) -> IterVar:
    """An iterator whose items the Python generator ``steps`` (over symbolic iterators) yields.
    Over a generator or a user iterator (``lazy``) one item is made per ``next()``, as the C
    implementation does, so the inputs' side effects happen only for what is consumed (Note
    [lazy iterators]); over containers, all at once (such an iterator is rebuilt at a break)."""
    if not lazy:
        return IterVar(list(steps), py_type=py_type)

    def pull(out):
        item = next(steps, _DONE)
        if item is _DONE:
            return False
        out.items.append(item)
        return True
    return IterVar([], live=True, pull=pull, py_type=py_type)


_DONE = object()


def _any_lazy(fr, its) -> bool:
    return any(_is_lazy(a) or (isinstance(a, (ObjVar, NewObjVar)) and S.user_iter_class(a)) for a in its)


@builtin(itertools.chain)
def _chain(fr, args, kwargs):
    def steps():  # chain calls iter() on each argument when it reaches it
        for a in args:
            yield from _items(S.iterate(fr, a))
    return _made(itertools.chain, steps(), _any_lazy(fr, args))


@builtin(itertools.chain.from_iterable)
def _chain_from_iterable(fr, args, kwargs):
    outer = args[0]
    inner = outer.items if isinstance(outer, (ListVar, TupleVar)) else []

    def steps():
        for a in _items(S.iterate(fr, outer)):
            yield from _items(S.iterate(fr, a))
    return _made(itertools.chain, steps(), _any_lazy(fr, [outer, *inner]) or not isinstance(outer, (ListVar, TupleVar, ConstVar)))


@builtin(itertools.zip_longest)
def _zip_longest(fr, args, kwargs):
    fill = kwargs.get("fillvalue", ConstVar(None))
    iters = [S.iterate(fr, a) for a in args]

    def steps():  # as CPython's zip_longest_next: stop as soon as the last active input ends
        active = [True] * len(iters)
        while iters:
            values = []
            for k, it in enumerate(iters):
                if active[k] and it.more():
                    values.append(it.take())
                    continue
                if active[k]:
                    active[k] = False
                    if not any(active):
                        return
                values.append(fill)
            yield TupleVar(values)
    return _made(itertools.zip_longest, steps(), _any_lazy(fr, iters))


@builtin(itertools.accumulate)
def _accumulate(fr, args, kwargs):
    it = S.iterate(fr, args[0])
    func = args[1] if len(args) > 1 else kwargs.get("func")
    initial = kwargs.get("initial")
    plain = func is None or S.is_same(func, ConstVar(None))

    def steps():
        total = None if initial is None or S.is_same(initial, ConstVar(None)) else initial
        if total is not None:
            yield total
        for v in _items(it):
            if total is None:
                total = v
            elif plain:
                total = S.binary(fr, operator.add, total, v)
            else:
                total = call(fr, func, [total, v], {})
            yield total
    return _made(itertools.accumulate, steps(), _any_lazy(fr, [it]) or (not plain and _calls_python(func)))


@builtin(itertools.islice)
def _islice(fr, args, kwargs):
    it, = _user_iters(fr, args[:1])
    window = slice(*_consts(args[1:]))
    if not _is_lazy(it):
        return IterVar(S.unpack(fr, it)[window])
    # A generator or a user iterator: its items are made when asked for, and only as many as
    # CPython's islice_next takes (it skips to the next index, then checks the stop).
    stop, step = window.stop, window.step or 1
    count = {"taken": 0, "next": window.start or 0}

    def pull(out):
        while count["taken"] < count["next"]:
            if not it.more():
                return False
            it.take()
            count["taken"] += 1
        if (stop is not None and count["taken"] >= stop) or not it.more():
            return False
        out.items.append(it.take())
        count["taken"] += 1
        count["next"] = count["next"] + step if stop is None else min(count["next"] + step, stop)
        return True

    return IterVar([], live=True, pull=pull, py_type=itertools.islice)


@builtin(itertools.starmap)
def _starmap(fr, args, kwargs):
    it = S.iterate(fr, args[1])
    steps = (call(fr, args[0], S.unpack(fr, t), {}) for t in _items(it))
    return _made(itertools.starmap, steps, _any_lazy(fr, [it]) or _calls_python(args[0]))


@builtin(itertools.repeat)
def _repeat(fr, args, kwargs):
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        raise Unsupported("unsupported_call", "itertools.repeat without times (endless)")
    return IterVar([args[0]] * S.const_value(times))


if hasattr(itertools, "pairwise"):
    @builtin(itertools.pairwise)
    def _pairwise(fr, args, kwargs):
        it = S.iterate(fr, args[0])

        def steps():  # the first item made takes two from the input
            if not it.more():
                return
            prev = it.take()
            for v in _items(it):
                yield TupleVar([prev, v])
                prev = v
        return _made(itertools.pairwise, steps(), _any_lazy(fr, [it]))


def _calls_python(fn: Var) -> bool:
    """Whether calling ``fn`` may run Python with side effects (a lambda, a user function): an
    iterator that calls it per item makes its items one per ``next()``, as CPython does."""
    if isinstance(fn, ConstVar):
        return False
    return not (isinstance(fn, ObjVar) and isinstance(fn.value, types.BuiltinFunctionType))


@builtin(itertools.takewhile)
def _takewhile(fr, args, kwargs):
    pred, it = args[0], S.iterate(fr, args[1])

    def steps():  # once the predicate fails, the iterator stays exhausted
        for v in _items(it):
            if not S.truthy(fr, call(fr, pred, [v], {})):
                return
            yield v
    return _made(itertools.takewhile, steps(), _any_lazy(fr, [it]) or _calls_python(pred))


@builtin(itertools.dropwhile)
def _dropwhile(fr, args, kwargs):
    pred, it = args[0], S.iterate(fr, args[1])

    def steps():  # the predicate runs until it first fails, never after
        dropping = True
        for v in _items(it):
            if dropping and S.truthy(fr, call(fr, pred, [v], {})):
                continue
            dropping = False
            yield v
    return _made(itertools.dropwhile, steps(), _any_lazy(fr, [it]) or _calls_python(pred))


@builtin(itertools.compress)
def _compress(fr, args, kwargs):
    data = S.iterate(fr, args[0] if args else kwargs["data"])
    selectors = S.iterate(fr, args[1] if len(args) > 1 else kwargs["selectors"])

    def steps():  # as CPython's compress_next: a datum, then its selector; stop at either's end
        while data.more():
            datum = data.take()
            if not selectors.more():
                return
            if S.truthy(fr, selectors.take()):
                yield datum
    return _made(itertools.compress, steps(), _any_lazy(fr, [data, selectors]))


_TEE = type(itertools.tee(())[0]) if itertools.tee(()) else None


@builtin(itertools.tee)
def _tee(fr, args, kwargs):
    n = S.const_value(args[1]) if len(args) > 1 else 2
    source = S.iterate(fr, args[0])
    if getattr(source, "tee_buffers", None) is not None:  # tee of a tee copies it (not modelled)
        raise Unsupported("unsupported_call", "itertools.tee of a tee iterator")
    if not _any_lazy(fr, [source]):
        items = S.unpack(fr, source)
        return TupleVar([IterVar(items, py_type=_TEE) for _ in range(n)])
    # Over a generator or a user iterator: the copies share one buffer; an item is made from
    # the source when the copy furthest ahead asks for it (Note [lazy iterators]).
    buffers = [[] for _ in range(n)]

    def copy(k):
        def pull(out):
            if not buffers[k]:
                if not source.more():
                    return False
                v = source.take()
                for b in buffers:
                    b.append(v)
            out.items.append(buffers[k].pop(0))
            return True
        it = IterVar([], live=True, pull=pull, py_type=_TEE)
        it.tee_buffers = buffers
        return it
    return TupleVar([copy(k) for k in range(n)])


def _lazy(fr, its, step, py_type, remake=None):
    """An iterator whose items `step(values)` makes from the next value of each of `its`, when
    asked for (Note [lazy iterators]): map(f, gen) calls f once per item consumed. `remake`,
    (builtin, leading arguments, extra constants()), rebuilds it at a break as that builtin over
    the rebuilt inputs."""
    its = [S.iterate(fr, a) for a in its]

    def pull(out):
        values = []
        for it in its:  # as zip and map do: stop at the first exhausted iterator
            if not it.more():
                return False
            values.append(it.take())
        out.items.extend(step(values))
        return True

    out = IterVar([], live=True, pull=pull, py_type=py_type)
    if remake is not None:
        fn, lead, tail = remake
        out.remake = (fn, lead, its, tail)
    return out


@builtin(map)
def _map(fr, args, kwargs):
    fn, *its = args
    return _lazy(fr, its, lambda values: [call(fr, fn, values, {})], map, remake=(map, [fn], lambda: []))


@builtin(filter)
def _filter(fr, args, kwargs):
    fn, it = args
    remake = (filter, [fn], lambda: [])
    if isinstance(fn, ConstVar) and fn.value is None:
        return _lazy(fr, [it], lambda values: [v for v in values if S.truthy(fr, v)], filter, remake)
    return _lazy(fr, [it], lambda values: [v for v in values if S.truthy(fr, call(fr, fn, values, {}))], filter,
                 remake)


@builtin(sum)
def _sum(fr, args, kwargs):
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))
    for v in S.unpack(fr, args[0]):
        total = S.binary(fr, operator.add, total, v)
    return total


_TAKES_ITERABLE = frozenset({min, max, any, all, sorted})


def _fold(fn):
    def handler(fr, args, kwargs):
        if any(isinstance(a, TensorVar) for a in args):
            raise Unsupported("data_dependent", f"{fn.__name__}() on a tensor needs its value")
        if len(args) == 1 and not isinstance(args[0], ConstVar):
            if fn in _TAKES_ITERABLE:
                args = [TupleVar(S.unpack(fr, args[0]))]
            elif not (isinstance(args[0], ObjVar) and isinstance(args[0].value, STABLE_TEXT)):
                raise Unsupported("unsupported_call", f"{fn.__name__}() of {S.describe(args[0])}")
        values = _consts(args)
        _refuse_user_dunders(fn, values)
        try:
            result = fn(*values, **{k: S.const_value(v) for k, v in kwargs.items()})
        except (ValueError, TypeError, ArithmeticError, LookupError) as exc:
            # the builtin's own error on guarded constants (`int('')`): raised on every call
            # this entry serves, so the traced code's handlers may catch it
            raise TracedRaise(exc) from None
        return S.from_python(result)
    return handler


# The special methods a folded builtin may call on its arguments (or on their items: sorted, min).
_FOLD_DUNDERS = ("__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__hash__", "__str__", "__repr__",
                 "__format__", "__int__", "__float__", "__index__", "__bool__", "__len__", "__round__",
                 "__abs__", "__complex__", "__iter__")


def _refuse_user_dunders(fn, values):
    """Note [User operators] for builtins run on constant values (`sorted([a, b])`, `str(obj)`)."""
    for value in values:
        items = value if type(value) in (list, tuple) else (value,)
        for item in items:
            user = S.user_dunder(item, _FOLD_DUNDERS)
            if user is not None:
                raise Unsupported("unsupported_call", f"{fn.__name__}() of a {type(item).__name__} runs its "
                                  f"{user} (Note [User operators])")


def _symbolic_or_fold(fn, symbolic):
    """``fn`` on numbers, computed symbolically when a symbolic size is among them (``symbolic``:
    the numbers -> the result); any other use needs the numbers (guards) (Note [Dynamic shapes
    in capture])."""
    fold = _fold(fn)

    def handler(fr, args, kwargs):
        values = [a.value for a in args if isinstance(a, ConstVar)]
        if any(isinstance(v, SYM_TYPES) for v in values):
            if symbolic is not None and not kwargs and len(values) == len(args) and all(isinstance(v, _NUMBERS) for v in values):
                result = symbolic(*values)
                if result is not NotImplemented:
                    return ConstVar(note_float(symbolic, result, values))
            args = [ConstVar(concrete(a.value)) if isinstance(a, ConstVar) else a for a in args]
        return fold(fr, args, kwargs)
    return handler


_NUMBERS = (int, float) + SYM_TYPES


def _extreme(pick):
    """min/max return one of their arguments, unchanged: torch.sym_min of an int and a float is
    a float, so a mix of ints and floats is decided on the values (guarded) instead."""
    def compute(*values):
        if len({isinstance(v, (float, torch.SymFloat)) for v in values}) > 1:
            return NotImplemented
        out = values[0]
        for v in values[1:]:
            out = pick(out, v)
        return out
    return compute


def _int(value):
    """``int(n)``: a size is already one; a non-negative symbolic float rounds down (sympy's
    floor), any other its value (a guard)."""
    if not isinstance(value, torch.SymFloat):
        return value if isinstance(value, torch.SymInt) else int(value)
    node = value.node
    expr = node.expr.xreplace({f: sympy.Rational(float(f)) for f in node.expr.atoms(sympy.Float)})
    exact = all(r.q <= 1 << 20 for r in expr.atoms(sympy.Rational))  # 0.5, 0.25: exact in binary
    if exact and node.env.static_truth(expr >= 0) is True:
        return node.env.wrap(sympy.floor(expr), int)
    return int(concrete(value))


def _round(value, ndigits=None):
    """``round(n)`` symbolically; with ``ndigits`` on the values (a guard): torch's
    ``SymInt.__round__`` ignores ``ndigits`` (``round(n, -2)`` came back as ``n``)."""
    return round(value) if ndigits is None else NotImplemented


def _pow(base, exp, mod=None):
    """``pow(a, b)`` symbolically; ``pow(a, b, m)`` on the values (a guard)."""
    return operator.pow(base, exp) if mod is None else NotImplemented


_SYMBOLIC_BUILTINS = {
    min: _extreme(torch.sym_min), max: _extreme(torch.sym_max), int: _int, float: torch.sym_float,
    divmod: lambda a, b: (a // b, a % b), pow: _pow, round: _round,
    math.ceil: math.ceil, math.floor: math.floor, math.trunc: math.trunc,
}
for _f in (min, max, any, all, sorted, round, divmod, pow, str, repr, int, float, bool, complex,
           hash, chr, ord, format, ascii, bin, hex, oct):
    builtin(_f)(_symbolic_or_fold(_f, _SYMBOLIC_BUILTINS.get(_f)))
def _short_circuit(fn, stop: bool):
    """any()/all() of a lazy iterator (a generator) stop at the first item that decides them, as
    Python does: the generator's later items, and their side effects, are never produced (Note
    [lazy iterators])."""
    fold = _symbolic_or_fold(fn, None)

    def handler(fr, args, kwargs):
        if len(args) == 1 and not kwargs:
            args = _user_iters(fr, args)
        it = args[0] if len(args) == 1 and not kwargs else None
        if not _is_lazy(it):
            return fold(fr, args, kwargs)
        while it.more():
            if S.truthy(fr, it.take()) is stop:
                return ConstVar(stop)
        return ConstVar(not stop)
    return handler


builtin(any)(_short_circuit(any, True))
builtin(all)(_short_circuit(all, False))
for _name in dir(math):
    if callable(getattr(math, _name)) and not _name.startswith("_"):
        _f = getattr(math, _name)
        builtin(_f)(_symbolic_or_fold(_f, _SYMBOLIC_BUILTINS.get(_f)))


@builtin(abs)
def _abs(fr, args, kwargs):
    return S.unary(fr, operator.abs, args[0])


@builtin(print)
def _print(fr, args, kwargs):
    raise Unsupported("print", "print() has a side effect outside the graph")


@builtin(id)
def _id(fr, args, kwargs):
    """``id(obj)`` of a real object read from the inputs (``GradScaler`` keys its per-optimizer
    state by ``id(optimizer)``): a constant, guarded by the object's identity. The id of a
    value made or modelled by the trace (a tensor, a container) has no stable answer."""
    (v,) = args
    if not isinstance(v, ObjVar):
        raise Unsupported("unsupported_call", "id() of a traced value")
    source = v.source if v.source is not None else fr.tr.ns.ref(v.value)  # held: its id stays unique
    fr.tr.guards.identity(source, v.value)
    return ConstVar(id(v.value))


@builtin(slice)
def _slice(fr, args, kwargs):
    return S.make_slice(list(args))


@builtin(super)
def _super(fr, args, kwargs):
    if args:
        return SuperVar(S.const_value(args[0]), args[1])
    cell = fr.cells.get("__class__")
    if cell is None or cell.contents is None or fr.self_var is None:
        raise Unsupported("unsupported_call", "super() outside a method")
    return SuperVar(S.const_value(cell.contents), fr.self_var)


@builtin(functools.partial)
def _partial(fr, args, kwargs):
    return PartialVar(args[0], args[1:], kwargs)


@builtin(operator.getitem)
def _op_getitem(fr, args, kwargs):
    return S.getitem(fr, *args)


for _fn in set(BINARY_OPS) | set(COMPARE_OPS.values()):
    builtin(_fn)(lambda fr, args, kwargs, _fn=_fn: S.binary(fr, _fn, *args))
for _fn in (operator.neg, operator.pos, operator.invert):
    builtin(_fn)(lambda fr, args, kwargs, _fn=_fn: S.unary(fr, _fn, *args))
builtin(operator.not_)(lambda fr, args, kwargs: ConstVar(not S.truthy(fr, args[0])))
builtin(operator.truth)(lambda fr, args, kwargs: ConstVar(S.truthy(fr, args[0])))
builtin(operator.is_)(lambda fr, args, kwargs: ConstVar(S.is_same(*args)))
builtin(operator.is_not)(lambda fr, args, kwargs: ConstVar(not S.is_same(*args)))


builtin(torch.no_grad)(lambda fr, args, kwargs: GradModeVar(False))
builtin(torch.enable_grad)(lambda fr, args, kwargs: GradModeVar(True))


@builtin(torch.set_grad_enabled)
def _set_grad_enabled(fr, args, kwargs):
    mode = S.const_value(args[0] if args else kwargs["mode"])
    graph = fr.tr.graph
    ctx = GradModeVar(mode)
    ctx.previous = graph.grad_enabled  # set_grad_enabled(b) takes effect when called
    if graph.grad_enabled != mode:
        graph.set_grad_enabled(mode)
    return ctx


def _autocast(default_device):
    def handler(fr, args, kwargs):
        names = ("device_type", "dtype", "enabled", "cache_enabled")
        if default_device is not None:
            names = names[1:]
        values = dict(zip(names, [S.const_value(a) for a in args]))
        values.update({k: S.const_value(v) for k, v in kwargs.items()})
        device = values.get("device_type", default_device)
        dtype = values.get("dtype") or torch.get_autocast_dtype(device)
        return AutocastVar(device, dtype, values.get("enabled", True), values.get("cache_enabled", True))
    return handler


builtin(torch.autocast, torch.amp.autocast)(_autocast(None))
builtin(torch.cpu.amp.autocast)(_autocast("cpu"))


# Questions code asks about how it is run: capture answers as a compiler would.
builtin(torch.jit.is_scripting, torch.jit.is_tracing)(lambda fr, args, kwargs: ConstVar(False))
builtin(torch._C._get_tracing_state)(lambda fr, args, kwargs: ConstVar(None))
builtin(torch.compiler.is_compiling)(lambda fr, args, kwargs: ConstVar(True))
if hasattr(torch._utils, "is_compiling"):  # deprecated alias, still called by library code
    builtin(torch._utils.is_compiling)(lambda fr, args, kwargs: ConstVar(True))
if hasattr(torch.compiler, "is_exporting"):
    builtin(torch.compiler.is_exporting)(lambda fr, args, kwargs: ConstVar(False))
builtin(torch.backends.mha.get_fastpath_enabled)(
    lambda fr, args, kwargs: ConstVar(torch.backends.mha.get_fastpath_enabled()))
builtin(torch.overrides.has_torch_function, torch.overrides.has_torch_function_unary,
        torch.overrides.has_torch_function_variadic)(lambda fr, args, kwargs: ConstVar(False))
builtin(torch.is_autocast_enabled)(lambda fr, args, kwargs: ConstVar(torch.is_autocast_enabled(*_consts(args))))


@builtin(torch.is_grad_enabled)
def _is_grad_enabled(fr, args, kwargs):
    return ConstVar(fr.tr.graph.grad_enabled)


@builtin(torch.is_tensor)
def _is_tensor(fr, args, kwargs):
    return ConstVar(isinstance(args[0], TensorVar))


@builtin(torch.get_default_dtype)
def _default_dtype(fr, args, kwargs):
    return ConstVar(torch.get_default_dtype())


builtin(torch.finfo)(lambda fr, args, kwargs: ConstVar(torch.finfo(*_consts(args))))
builtin(torch.iinfo)(lambda fr, args, kwargs: ConstVar(torch.iinfo(*_consts(args))))


@builtin(torch.utils._python_dispatch._get_current_dispatch_mode_stack)
def _dispatch_mode_stack(fr, args, kwargs):
    # Code that asks (nn.MultiheadAttention's fast path) sees no dispatch modes, as in eager
    # without any; a mode active at trace time is not something capture models.
    if torch.utils._python_dispatch._get_current_dispatch_mode_stack():
        raise Unsupported("unsupported_call", "a TorchDispatchMode is active while tracing")
    return ConstVar([])


@builtin(torch._assert)
def _torch_assert(fr, args, kwargs):
    cond = args[0] if args else kwargs.get("condition")
    if isinstance(cond, ConstVar) and cond.value:
        return ConstVar(None)  # holds at trace time, and what it checks is guarded
    raise Unsupported("unsupported_call", "torch._assert on a value only known at run time")


# torch._check and its kinds: a condition known at trace time that holds is nothing to record (a
# symbolic one becomes a guard through bool()); one that fails, or one on tensor data, is run
# eagerly, where torch raises the user's message.
def _torch_check(fr, args, kwargs):
    cond = args[0] if args else kwargs.get("cond")
    if isinstance(cond, ConstVar) and not isinstance(cond.value, torch.Tensor):
        value = cond.value
        if bool(value) if isinstance(value, (bool, torch.SymBool)) else False:
            return ConstVar(None)
    raise Unsupported("unsupported_call", "torch._check on a condition that does not hold or is only known at run time")


for _check in ("_check", "_check_value", "_check_index", "_check_type", "_check_not_implemented"):
    if hasattr(torch, _check):
        builtin(getattr(torch, _check))(_torch_check)


@builtin(torch._check_is_size)
def _torch_check_is_size(fr, args, kwargs):
    size = args[0] if args else kwargs.get("i")
    if isinstance(size, ConstVar) and isinstance(size.value, (int, torch.SymInt)) and not isinstance(size.value, bool):
        if bool(size.value >= 0):
            return ConstVar(None)
    raise Unsupported("unsupported_call", "torch._check_is_size on a value that is negative or only known at run time")
