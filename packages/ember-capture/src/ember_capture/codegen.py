"""Turning a finished trace into a cache entry: one generated function per entry.

An entry checks its guards, calls the compiled graph with the lifted inputs, replays side
effects, and rebuilds the frame's result (or, at a graph break, its stack and locals) from
the graph outputs, constants and sources::

    def __entry(L, args, kwargs):
        try:
            X = _s0 = L[0]
            if not (type(X) is _c1 and X.dtype is _c2 and ...): return _MISS
            X = _s1 = _s0._parameters['weight']
            ...
        except Exception:
            return _MISS
        __o = __compiled(_s0, _s1)
        return __o[0]
"""
from __future__ import annotations

import collections
import math
import types

import torch

from .guards import narrow_native_outs
from .lazy import LazyVar
from .sizes import has_sym, python_code
from .variables import (
    NULL, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, IterVar, ListVar, MethodVar, NewObjVar, ObjVar, SetVar,
    TensorVar, TupleVar,
    Var,
)

MISS = object()
RUNTIME_NULL = object()  # stands for CPython's NULL in a rebuilt stack
_LITERALS = (int, float, bool, str, type(None))


def is_literal(value) -> bool:
    """Whether `repr(value)` is Python source for an equal value: not a float's `nan`, `inf`
    or `-inf`, which are names, not literals (those go through the namespace)."""
    return type(value) in _LITERALS and (type(value) is not float or math.isfinite(value))


class CannotRebuild(Exception):
    pass


def collect_tensors(vars_, out: dict):
    """TensorVars reachable from vars_, keyed by node (graph outputs, deduplicated)."""
    for v in vars_:
        if type(v) is LazyVar:
            v = v.var
        if isinstance(v, TensorVar):
            out.setdefault(v.node, v)
        elif isinstance(v, (ListVar, TupleVar, SetVar)):
            collect_tensors(v.items, out)
        elif isinstance(v, DictVar):
            collect_tensors(v.items.values(), out)
        elif isinstance(v, DictViewVar):
            collect_tensors([v.dict], out)
        elif isinstance(v, IterVar):
            collect_tensors(v.items[v.pos:], out)
        elif isinstance(v, NewObjVar):
            collect_tensors(list(v.attrs.values()) + ([v.storage] if v.storage is not None else []), out)
        elif isinstance(v, MethodVar):
            collect_tensors([v.receiver], out)
        elif isinstance(v, BoundVar):
            collect_tensors([v.self_var], out)
        elif isinstance(v, FunctionVar):
            collect_tensors(list(v.defaults) + list(v.kwdefaults.values()) + list(v.closure or ()), out)
        elif isinstance(v, CellVar) and getattr(v, "real_cell", None) is None and v.contents is not None:
            collect_tensors([v.contents], out)
    return out


class Rebuilder:
    """Python expressions that rebuild symbolic values from ``__o`` (graph outputs) and ``L``."""

    def __init__(self, ns, output_index: dict, has_graph: bool, mutated=(), size_names=None):
        self.ns = ns
        self.size_names = size_names or {}  # symbol -> the runtime expression it was read from
        self.output_index = output_index  # node -> position in the graph's output tuple
        self.has_graph = has_graph
        self.prelude: list[str] = []  # statements binding mutable values built once
        self._temps: dict[int, str] = {}
        self._reads: dict[str, str] = {}  # source -> the name it is bound to
        self.mutated = set(mutated)  # ids of input lists and dicts the trace changed

    def read(self, source: str) -> str:
        """The value ``source`` names at entry. An entry that writes containers back binds it
        before the first write-back (``del d[k]`` would change what ``d[k]`` reads later)."""
        if not self.mutated:
            return source
        name = self._reads.get(source)
        if name is None:
            name = self._reads[source] = f"__r{len(self._reads)}"
            self.prelude.append(f"{name} = {source}")
        return name

    def expr(self, v: Var) -> str:
        if type(v) is LazyVar:  # Note [Lazy locals]: unused by the trace, the same object
            if v.var is None:
                return self.read(v.source)
            v = v.var
        if isinstance(v, (ListVar, TupleVar, DictVar, SetVar)) and v.source is not None:
            # A container from the inputs is not changed by a trace (that is a break), except a
            # list or a dict written back after the graph (Note [Mutated input lists], Note
            # [Mutated input dicts]): either way the real object equals it: pass the object
            # itself, keeping its identity (a mutated one read from its source once).
            if id(v) not in self.mutated:
                return self.read(v.source)
            name = self._temps.get(id(v))
            if name is None:
                name = self._temps[id(v)] = f"__t{len(self._temps)}"
                self.prelude.append(f"{name} = {v.source}")
            return name
        if isinstance(v, CellVar) and getattr(v, "real_cell", None) is not None:
            return v.cell_source  # a cell the frame was given: the same cell object
        if isinstance(v, IterVar) and v.source is not None:
            return self.read(v.source)  # Note [Iterators from the inputs]: the same object, its position written back
        if isinstance(v, (ListVar, DictVar, SetVar, NewObjVar, CellVar, IterVar)):
            # One real object per symbolic one: a list on the stack and in a local stays shared.
            name = self._temps.get(id(v))
            if name is None:
                name = self._temps[id(v)] = f"__t{len(self._temps)}"
                self.prelude.append(f"{name} = {self._expr(v)}")
            return name
        return self._expr(v)

    def items_expr(self, v: ListVar) -> str:
        """A new list of ``v``'s current items (the contents of a mutated input list)."""
        return "[" + "".join(self.expr(i) + ", " for i in v.items) + "]"

    def dict_writeback(self, v: DictVar, before: dict) -> list[str]:
        """Statements that turn the dict ``v`` read from the inputs, whose items were ``before``,
        into its current items in place (Note [Mutated input dicts]). The longest prefix of the
        new keys that keeps their old order stays; every other old key is deleted, and the
        keys after that prefix are set in order, so the keys end in the new order (a key
        deleted and set again, or moved to the end, comes last), as eager's did."""
        target = self.expr(v)
        old, new = list(before), list(v.items)
        at = {k: i for i, k in enumerate(old)}
        kept, last = 0, -1
        for k in new:
            if k not in at or at[k] < last:
                break
            kept, last = kept + 1, at[k]
        stay = set(new[:kept])
        lines = [f"del {target}[{self._key(k)}]" for k in old if k not in stay]
        lines += [f"{target}[{self._key(k)}] = {self.expr(v.items[k])}" for i, k in enumerate(new)
                  if i >= kept or v.items[k] is not before[k]]
        return lines

    def _key(self, k) -> str:
        if is_literal(k):
            return repr(k)
        return self.ns.ref(k)

    def _expr(self, v: Var) -> str:
        if isinstance(v, TensorVar):
            if self.has_graph:
                return f"__o[{self.output_index[v.node]}]"
            return self.read(v.source)
        if isinstance(v, ConstVar):
            if has_sym(v.value):  # Note [Dynamic shapes in capture]: computed from the inputs
                try:
                    return python_code(v.value, self.size_names, self.ns.ref(torch.Size))
                except ValueError as exc:
                    raise CannotRebuild(str(exc)) from None
            if is_literal(v.value):
                return repr(v.value)
            return self.ns.ref(v.value)
        if isinstance(v, ObjVar):
            return self.read(v.source) if v.source is not None else self.ns.ref(v.value)
        if isinstance(v, ListVar):
            return self.items_expr(v)
        if isinstance(v, TupleVar):
            inner = "(" + "".join(self.expr(i) + ", " for i in v.items) + ")"
            if v.cls is tuple:
                return inner
            if hasattr(v.cls, "_fields"):
                return f"{self.ns.ref(v.cls)}(*{inner})"
            return f"{self.ns.ref(v.cls)}({inner})"
        if isinstance(v, DictVar):
            literal = "{" + "".join(f"{self.ns.ref(k)}: {self.expr(i)}, " for k, i in v.items.items()) + "}"
            factory = getattr(v, "default_factory", None)
            if factory is not None:
                return f"{self.ns.ref(v.cls)}({self.expr(factory)}, {literal})"
            if v.cls in (dict, collections.OrderedDict):
                return literal if v.cls is dict else f"{self.ns.ref(v.cls)}({literal})"
            # a subclass of dict: made without its own __init__, its items set by dict's methods
            return f"{self.ns.ref(_new_object)}({self.ns.ref(v.cls)}, {{}}, {self.ns.ref(dict)}, {literal})"
        if isinstance(v, SetVar):
            return "{" + "".join(self.expr(i) + ", " for i in v.items) + "}" if v.items else "set()"
        if isinstance(v, DictViewVar):
            return f"{self.expr(v.dict)}.{v.kind}()"
        if isinstance(v, BoundVar):
            return f"{self.ns.ref(types.MethodType)}({self.expr(v.func)}, {self.expr(v.self_var)})"
        if isinstance(v, NewObjVar):
            attrs = "{" + "".join(f"{k!r}: {self.expr(i)}, " for k, i in v.attrs.items()) + "}"
            if v.storage is None:
                return f"{self.ns.ref(_new_object)}({self.ns.ref(v.cls)}, {attrs})"
            return (f"{self.ns.ref(_new_object)}({self.ns.ref(v.cls)}, {attrs}, {self.ns.ref(v.base)}, "
                    f"{self._expr(v.storage)})")
        if isinstance(v, CellVar):  # a cell of the traced frame: one real cell, shared by its users
            if v.contents is None:
                return f"{self.ns.ref(types.CellType)}()"
            return f"{self.ns.ref(types.CellType)}({self.expr(v.contents)})"
        if isinstance(v, FunctionVar):
            defaults = "(" + "".join(self.expr(d) + ", " for d in v.defaults) + ")"
            kwdefaults = "{" + "".join(f"{k!r}: {self.expr(d)}, " for k, d in v.kwdefaults.items()) + "}"
            closure = "(" + "".join(self.expr(c) + ", " for c in v.closure) + ")" if v.closure else "None"
            return (f"{self.ns.ref(_make_function)}({self.ns.ref(v.code)}, {self.ns.ref(v.globals)}, "
                    f"{defaults}, {kwdefaults}, {closure})")
        if isinstance(v, MethodVar) and isinstance(v.receiver, (TensorVar, ConstVar, ListVar, DictVar, SetVar, TupleVar)):
            return f"{self.expr(v.receiver)}.{v.name}"
        if isinstance(v, ExitVar) and v.context is None:
            return f"{self.ns.ref(GradModeExit)}({v.restore})"
        if isinstance(v, ExitVar):  # Note [Breaks in autocast blocks]
            return f"{self.ns.ref(AutocastExit)}({self.ns.ref(v.node.args)})"
        if isinstance(v, IterVar):  # a loop's iterator at a break inside the loop (Note [Breaks in loops])
            over_object = getattr(v, "over_object", None)
            if over_object is not None and v.pos == len(v.items) and (
                    not isinstance(over_object, ObjVar) or over_object.source is not None):
                # Note [User iterators]: the object whose __next__ makes the items, in the state
                # the trace left it (its attribute writes are replayed): next() natively goes on
                return self.expr(over_object)
            remake = getattr(v, "remake", None)
            if remake is not None and v.pull is not None and v.pos == len(v.items):
                # enumerate/zip/map/filter over lazy inputs: the builtin again, over the inputs
                # rebuilt where they are (Note [lazy iterators]), each only advanced by next()
                fn, lead, inputs, tail = remake
                parts = [self.expr(a) for a in lead] + [f"{self.ns.ref(_NextOnly)}({self.expr(i)})" for i in inputs]
                return f"{self.ns.ref(fn)}({', '.join(parts + [repr(c) for c in tail()])})"
            if v.pull is not None:
                raise CannotRebuild(f"cannot rebuild a {v.py_type.__name__} iterator outside the graph")
            if v.check is not None and v.check() is not None:  # its next() raises: run the frame eagerly
                raise CannotRebuild("an iterator over a dict that changed size")
            over_dict = getattr(v, "over_dict", None)
            if over_dict is not None:  # a real dict iterator: its native next() sees later changes
                return f"{self.ns.ref(_dict_iterator)}({self.expr(over_dict)}, {v.pos})"
            over = getattr(v, "over", None)
            if over is not None:  # a list iterator sees the list's later appends
                return f"{self.ns.ref(_list_iterator)}({self.expr(over)}, {v.pos})"
            return "iter([" + "".join(self.expr(i) + ", " for i in v.items[v.pos:]) + "])"
        if v is NULL:
            return "_NULL"
        raise CannotRebuild(f"cannot rebuild a {type(v).__name__} outside the graph")


class GradModeExit:
    """The ``__exit__`` of a grad-mode ``with`` block that a graph break split: a resume
    function calls it at the end of the block (or on an exception) to restore the mode."""

    def __init__(self, restore: bool):
        self.restore = restore

    def __call__(self, *exc_info):
        if self.restore is not None:  # None: a no-op context's exit (Note [Profiler contexts])
            torch._C._set_grad_enabled(self.restore)
        return None


class AutocastExit:
    """Note [Breaks in autocast blocks]: at a graph break inside ``with torch.autocast(...)``,
    the graph leaves the region it entered, and the entry enters a real autocast with the same
    arguments (made here) before the breaking instruction runs, so that the native part and the
    resume function run under it; the resume function calls this object where the block ends
    (a graph break: a native call) or on an exception, to leave it."""

    def __init__(self, args):
        device_type, dtype, enabled, cache_enabled = args
        self.context = torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        self.context.__enter__()

    def __call__(self, *exc_info):
        return self.context.__exit__(*(exc_info or (None, None, None)))


def _new_object(cls, attrs, base=None, contents=None):
    """An instance made without running its class's code: the builtin base's contents are
    written through the base's own C methods (a subclass's overrides are not called)."""
    if base is None:
        obj = object.__new__(cls)
    else:
        obj = base.__new__(cls)
        if isinstance(contents, dict):
            for k, v in contents.items():
                base.__setitem__(obj, k, v)
        else:
            base.extend(obj, contents)
    obj.__dict__.update(attrs)
    return obj


def _dict_iterator(d, pos: int):
    it = iter(d)
    for _ in range(pos):
        next(it)
    return it


class _NextOnly:
    """An iterator rebuilt at a break, handed to a builtin (zip, enumerate, map) that calls
    ``iter()`` on its arguments: its ``__next__`` only, never the user's ``__iter__`` again."""

    __slots__ = ("it",)

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)


def _list_iterator(items: list, pos: int):
    it = iter(items)
    it.__setstate__(pos)
    return it


def _make_function(code, globals_, defaults, kwdefaults, closure=None):
    fn = types.FunctionType(code, globals_, code.co_name, defaults or None, closure)
    fn.__kwdefaults__ = kwdefaults or None
    return fn


def generate_entry(ns, guard_lines, input_sources, compiled, side_effects, tail: str, prelude=()):
    """Compile the entry function; ``tail`` is the statement that returns the result."""
    lines = ["def __entry(L, args, kwargs):", "    try:"]
    lines += ["        " + g for g in guard_lines] or ["        pass"]
    # Global state the trace depended on: grad and inference mode, autocast, the default dtype. Under an
    # autocast the caller entered, which devices it is on and their dtypes too (one check more,
    # only then: a trace made under bfloat16 autocast is wrong under float16).
    # With grad off, whether that is inference mode too (tensors made in it are inference
    # tensors, and is_inference() of them was answered at trace time).
    amp, grad = torch._C._is_any_autocast_enabled(), torch.is_grad_enabled()
    inference = "" if grad else f"_inference() is not {torch.is_inference_mode_enabled()} or "
    lines += [f"        if _grad() is not {grad} or {inference}_autocast() is not {amp} or "
              f"{'_amp() != _amp_state or ' if amp else ''}_dtype() is not _default_dtype: return _MISS",
              "    except Exception:", "        return _MISS"]
    if compiled is not None:
        lines.append(f"    __o = __compiled({''.join(s + ', ' for s in input_sources)})")
    lines += ["    " + s for s in list(prelude) + list(side_effects)]
    lines.append("    " + tail)
    source = "\n".join(narrow_native_outs(lines, ns))
    scope = {k: v for k, v in ns.items() if isinstance(k, str)}
    scope.update(_MISS=MISS, _grad=torch.is_grad_enabled, _autocast=torch._C._is_any_autocast_enabled,
                 _dtype=torch.get_default_dtype, _default_dtype=torch.get_default_dtype(),
                 _amp=autocast_state, _amp_state=autocast_state(), _inference=torch.is_inference_mode_enabled,
                 __compiled=compiled, _setattr=setattr)
    exec(compile(source, "<ember entry>", "exec"), scope)
    entry = scope["__entry"]
    entry.source = source
    # what the last guard line checks, for the recompiles log (Note [why a guard failed])
    entry.global_state = {name: read() for name, read in GLOBAL_STATE.items()}
    return entry


def _amp_devices():
    devices = []
    for device in ("cpu", "cuda", "xpu", "hpu", "mps", "mtia", "xla", "ipu"):
        try:
            torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)
        except (RuntimeError, ValueError, TypeError):
            continue
        devices.append(device)
    return tuple(devices)


_AMP_DEVICES = _amp_devices()


def autocast_state() -> tuple:
    """Which devices autocast is on for, with each one's dtype: what a trace made under the
    caller's autocast depends on."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in _AMP_DEVICES if torch.is_autocast_enabled(d))


# The global state every entry is guarded on, as the recompiles log names it.
GLOBAL_STATE = {
    "torch.is_grad_enabled()": torch.is_grad_enabled,
    "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled,
    "torch.is_autocast_enabled()": torch._C._is_any_autocast_enabled,  # on any device
    "autocast devices and dtypes": autocast_state,
    "torch.get_default_dtype()": torch.get_default_dtype,
}
