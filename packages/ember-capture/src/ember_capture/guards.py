"""Guards: the conditions under which a compiled entry may be reused.

Each guard is a Python boolean expression over one source (Note [Sources]); an entry's
guards and its graph call are generated as one small function so that a cache hit is a
handful of attribute checks and one call.
"""
from __future__ import annotations

import bisect
import math
import re

import torch
import torch.nn.modules.module as _module_mod

from .guard_program import Program
from .native import HookBatch, SourceProgram, TensorBatch
from .sizes import tensor_guard

_MIN_NATIVE = 8  # fewer sources read natively: the Python guards alone
_HELD = re.compile(r"^_c\d+$")
_OTHER_SOURCE = re.compile(r"\bL\[|\b_s\d")  # a check that reads another source
# A module's own hooks, over the guarded value X (a module with hooks runs through Module.__call__).
MODULE_HOOKS = "X._forward_hooks or X._forward_pre_hooks or X._backward_hooks or X._backward_pre_hooks"
# The checks that a module has no hooks of some kinds, and the hook dicts each reads: an entry
# checks them for all its modules in one batch (Note [Native guards] in native.py).
NO_MODULE_HOOKS = f"not ({MODULE_HOOKS})"
NO_FORWARD_HOOKS = "not (X._forward_hooks or X._forward_pre_hooks)"
NO_OTHER_HOOKS = "not (X._backward_hooks or X._backward_pre_hooks or getattr(X, '_forward_hooks_always_called', None))"
# The hook dicts of torch.nn.modules.module, over X = that module: with any of them non-empty,
# every module's call must go through Module.__call__.
NO_GLOBAL_HOOKS = ("not (X._global_forward_hooks or X._global_forward_pre_hooks or X._global_backward_hooks "
                   "or X._global_backward_pre_hooks)")
_HOOK_DICTS = {
    NO_MODULE_HOOKS: ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"),
    NO_FORWARD_HOOKS: ("_forward_hooks", "_forward_pre_hooks"),
    NO_OTHER_HOOKS: ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks_always_called"),
}
# Tensor types whose metadata the native check reads as Python does (a subclass may override it).
_NATIVE_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
_PLAIN_EQ = (int, float, str, bytes, complex)
_IDENTITY_CONST = (type(None), bool, type(Ellipsis), type(NotImplemented))


def global_module_hooks() -> bool:
    """Whether a global module hook is registered (NO_GLOBAL_HOOKS is false)."""
    return bool(_module_mod._global_forward_hooks or _module_mod._global_forward_pre_hooks
                or _module_mod._global_backward_hooks or _module_mod._global_backward_pre_hooks)


class Guards:
    def __init__(self, namespace):
        self.ns = namespace  # shared with the entry's generated code
        self.items: dict[str, list[str]] = {}  # source -> checks over "X"
        self.notes: list[str] = []  # readable form for the "guards" log
        # source -> the immutable value its checks pin (Note [Immutable constants by identity])
        self.pinned: dict[str, object] = {}
        self._unbound: set[int] = set()  # locals a hit may leave unbound (folded subtrees)
        # source -> (check, record) of a static tensor guard the native check can run
        self.tensor_records: dict[str, tuple[str, tuple]] = {}

    def add(self, source: str | None, check: str, note: str | None = None):
        if source is None or (_HELD.match(source) and check in (f"X is {source}", f"id(X) == {id(self.ns[source])}")):
            return  # an object held by reference is that object
        checks = self.items.setdefault(source, [])
        if check not in checks:
            checks.append(check)
            self.notes.append(note or check.replace("X", source))

    def const(self, source, value):
        self.pin(source, value)
        t = type(value)
        if isinstance(value, _IDENTITY_CONST):
            self.add(source, f"X is {value!r}")
        elif isinstance(value, _PLAIN_EQ):  # numpy.float64 too: by type and value, not identity
            name = t.__name__ if t in _PLAIN_EQ else self.ns.ref(t)
            self.add(source, f"type(X) is {name} and {self._equal(value)}")
        elif isinstance(value, torch.dtype) or isinstance(value, type) or callable(value):
            self.add(source, f"X is {self.ns.ref(value)}")
        elif isinstance(value, (tuple, torch.Size, range, torch.device, slice, frozenset)):
            self.add(source, f"type(X) is {self.ns.ref(t)} and X == {self.ns.ref(value)}")
        else:
            self.add(source, f"X is {self.ns.ref(value)}")

    def _equal(self, value) -> str:
        """A check that X is `value` as a float: `==` says nothing about NaN (never equal, so a
        NaN is checked as a NaN) and cannot tell 0.0 from -0.0 (whose sign `1 / x`, `atan2` and
        `copysign` see), so a zero's sign is checked too."""
        if isinstance(value, (float, complex)) and value != value:
            return "X != X"
        if isinstance(value, float) and value == 0:
            return f"X == 0 and {self.ns.ref(math.copysign)}(1.0, X) == {math.copysign(1.0, value)!r}"
        return f"X == {self.ns.ref(value)}"

    def tensor(self, source, t: torch.Tensor):
        ns = self.ns
        check = (f"type(X) is {ns.ref(type(t))} and X.dtype is {ns.ref(t.dtype)} and {_device_check(ns, t.device)}"
                 f" and X.shape == {tuple(t.shape)!r}{_stride_check(t)}"
                 f" and X.requires_grad is {t.requires_grad}")
        if type(t) in _NATIVE_TENSOR_TYPES and t.layout == torch.strided and source is not None:
            self.tensor_records[source] = (check, (type(t), (t.dtype, t.device, tuple(t.shape), tuple(t.stride()),
                                                             t.requires_grad)))
        self.add(
            source,
            check,
            f"{source}: {type(t).__name__} {t.dtype} {t.device} shape={tuple(t.shape)} "
            f"stride={tuple(t.stride())} requires_grad={t.requires_grad}",
        )

    def symbolic_tensor(self, source, t: torch.Tensor, fake: torch.Tensor):
        """A tensor input with symbolic dimensions (Note [Dynamic shapes in capture])."""
        check, note = tensor_guard(self.ns, t, fake, _device_check(self.ns, t.device))
        self.add(source, check, note.format(source))

    def pin(self, source, value):
        """Record that `source`'s checks, with those of the sources read from it, pin `value`
        where it is deeply immutable (Note [Immutable constants by identity])."""
        if source is not None and not _HELD.match(source) and _immutable(value):
            self.pinned[source] = value

    def identity(self, source, obj):
        """`source` is `obj`, of the class the trace saw: `obj.__class__ = Other` after the trace
        keeps the object but changes every method and attribute lookup the trace made."""
        self.add(source, f"id(X) == {id(obj)}", f"{source} is <{type(obj).__name__} at {id(obj):#x}>")
        self.type_is(source, obj)

    def type_is(self, source, obj):
        if _HELD.match(source):
            return
        self.add(source, f"type(X) is {self.ns.ref(type(obj))}", f"type({source}) is {type(obj).__qualname__}")

    def lines(self, keep=(), distinct=()) -> list[str]:
        """Statements of a function body that return MISS when a guard fails.

        Each source's value is kept in a local (`_s<i>`), and a later source that extends an
        earlier one (`L[0]._modules['stem']._modules['0']` after `L[0]._modules['stem']`) is
        read from that local: a model's guards walk each module path once, not once per
        parameter (resnet50 has about 1,500 guarded sources). A pinned immutable value is
        checked by identity first, its own checks and its subtree's only when that fails
        (Note [Immutable constants by identity]); `keep` are sources whose locals the entry
        reads after the guards (graph inputs): their subtrees are not folded. The tensor and
        "no hooks" checks are gathered into batches run after the rest (Note [Native guards]).
        `distinct` are sources (tensor arguments) that must hold pairwise distinct objects.
        In front of all this, a native program reads the sources and runs the checks it can
        (Note [Native source reads] in native_guards.cpp)."""
        sources = list(self.items)
        keep = set(keep)
        done = set()
        batches = _Batches(_parents(sources))
        groups = []  # (local, its read, checks left in place, folded subtree lines or None, tensor, source)
        subtree_of = _later_extensions(sources)
        for i, source in enumerate(sources):
            if i in done:
                continue
            subtree = subtree_of(i)
            folded = [source] + [sources[j] for j in subtree]
            read = self.rewrite(source, allowed=lambda k, i=i: k < i)
            if not all(self._foldable(s, keep) for s in folded):
                n_tensors = len(batches.tensors)
                checks = batches.take(self, source, f"_s{i}")
                tensor = batches.tensors[-1] if len(batches.tensors) > n_tensors else None
                groups.append((f"_s{i}", read, checks, None, tensor, source))
                continue
            inner = [f"    if not ({' and '.join(self.items[source])}): return _MISS"]
            bound = {i}
            for j in subtree:
                inner += ["    " + line for line in
                          self._check(j, sources[j], lambda k, i=i, bound=bound: k < i or k in bound)]
                bound.add(j)
            done.update(subtree)
            self._unbound.update(subtree)
            groups.append((f"_s{i}", read, [], inner, None, source))
        distinct = [self.local_of(s) for s in distinct]
        python = [line for group in groups for line in self._group_lines(group)] + batches.lines(self.ns)
        python += _distinct_lines(distinct)
        return self._native_lines(groups, batches, python, distinct)

    def _group_lines(self, group) -> list[str]:
        local, read, checks, folded, _, source = group
        out = [f"X = {local} = {read}"]
        if folded is not None:
            out.append(f"if X is not {self.ns.ref(self.pinned[source])}:")
            return out + folded
        if checks:
            out.append(f"if not ({' and '.join(checks)}): return _MISS")
        return out

    def _native_lines(self, groups, batches, python: list[str], distinct: list[str]) -> list[str]:
        """`python` behind a native program that reads the sources and runs the checks it can
        (Note [Native source reads] in native_guards.cpp): when the program answers, only the
        groups it could not run, and the batches, are left to Python."""
        program = Program(self.ns)
        native, rest, rest_tensors = [], [], []
        for group in groups:
            local, read, checks, folded, tensor, source = group
            pinned = None
            if folded is not None:  # its own checks, where no source is read from it
                pinned = (self.pinned[source], self.items[source] if len(folded) == 1 else None)
            tensor_record = None if tensor is None else (tensor[2][0], tensor[2][1])
            if program.add(local, read, checks, pinned, tensor_record):
                native.append(local)
                continue
            rest.extend(self._group_lines(group))
            if tensor is not None:
                rest_tensors.append(tensor)
        if len(native) < _MIN_NATIVE:
            return python
        prog = SourceProgram(program, native)
        batches.tensors = rest_tensors
        body = [f"{NATIVE_OUTS} = _r  # {' '.join(native)}"] + rest + batches.lines(self.ns)
        if not program.distinct(distinct):
            body += _distinct_lines(distinct)
        return ([f"_r = {self.ns.ref(prog)}.run(L)", "if _r is False: return _MISS", "if _r is not None:"]
                + ["    " + line for line in body] + ["else:"] + ["    " + line for line in python])

    def _foldable(self, source: str, keep) -> bool:
        """Pinned, not read after the guards, and checked over itself and constants only."""
        return (source in self.pinned and source not in keep
                and not any(_OTHER_SOURCE.search(c) for c in self.items[source]))

    def _check(self, i: int, source: str, allowed) -> list[str]:
        return [f"X = _s{i} = {self.rewrite(source, allowed=allowed)}",
                f"if not ({' and '.join(self.items[source])}): return _MISS"]

    def local_of(self, source: str) -> str:
        """The local a guarded source is read into (`_s<i>`; `lines` must keep it), else the
        source: its value when the guards ran. A symbolic int read from a list is read there
        once: the entry's write-back of that list (Note [Mutated input lists]) runs before the
        return value is rebuilt, and reading the list again would see the new items."""
        hit = self._index().get(source)
        return source if hit is None else f"_s{hit}"

    def rewrite(self, expr: str, limit: int | None = None, allowed=None) -> str:
        """`expr` read from the local of its longest guarded prefix (a source it extends by an
        attribute or a subscript) whose index passes `allowed` (or is below `limit`); by
        default, any local that is bound after the guards."""
        index = self._index()
        if allowed is None:
            allowed = (lambda k: k not in self._unbound) if limit is None else (lambda k: k < limit)
        hit = index.get(expr)
        if hit is not None and allowed(hit):
            return f"_s{hit}"
        for pos in range(len(expr) - 1, 0, -1):
            if expr[pos] in ".[":
                hit = index.get(expr[:pos])
                if hit is not None and allowed(hit):
                    return f"_s{hit}{expr[pos:]}"
        return expr

    def _index(self) -> dict[str, int]:
        if getattr(self, "_index_of", None) is None or len(self._index_of) != len(self.items):
            self._index_of = {source: i for i, source in enumerate(self.items)}
        return self._index_of


class _Batches:
    """The checks of one entry that run in batches (Note [Native guards]): a static tensor guard
    of an exact `Tensor`/`Parameter`, and the "no hooks" checks of modules. A source that other
    sources are read from keeps its checks in place, so that nothing is read from an object
    whose type was not checked first."""

    def __init__(self, parents: set):
        self.parents = parents
        self.tensors: list[tuple[str, str, tuple]] = []  # (local, check, record)
        self.hooks: dict[tuple, list[tuple[str, list]]] = {}  # hook dicts -> [(local, checks)]

    def take(self, guards: Guards, source: str, local: str) -> list[str]:
        """`source`'s checks, less those that this batch now runs."""
        checks = list(guards.items[source])
        hit = guards.tensor_records.get(source)
        if hit is not None and hit[0] in checks and source not in self.parents:
            checks.remove(hit[0])
            self.tensors.append((local, hit[0], hit[1]))
        hooks = [c for c in checks if c in _HOOK_DICTS]
        if hooks:
            names = tuple(dict.fromkeys(n for c in hooks for n in _HOOK_DICTS[c]))
            self.hooks.setdefault(names, []).append((local, hooks))
            checks = [c for c in checks if c not in _HOOK_DICTS]
        return checks

    def lines(self, ns) -> list[str]:
        out = []
        if self.tensors:
            py = _python_batch(ns, [check for _, check, _ in self.tensors])
            batch = TensorBatch(py, tuple(r[0] for _, _, r in self.tensors), [r[1] for _, _, r in self.tensors])
            out.append(f"if not {ns.ref(batch)}.check(({''.join(local + ', ' for local, _, _ in self.tensors)})): "
                       "return _MISS")
        for names, modules in self.hooks.items():
            py = _python_batch(ns, [" and ".join(checks) for _, checks in modules])
            batch = HookBatch(py, names)
            out.append(f"if not {ns.ref(batch)}.check(({''.join(local + ', ' for local, _ in modules)})): "
                       "return _MISS")
        return out


def _distinct_lines(locals_: list[str]) -> list[str]:
    if len(locals_) < 2:
        return []
    return [f"if len({{id(_a) for _a in ({', '.join(locals_)}, )}}) != {len(locals_)}: return _MISS"]


# The line of an entry's guards that binds the native program's answer to locals, first with
# every local the program reads: `narrow_native_outs` keeps those that the entry uses later.
NATIVE_OUTS = "__native_outs__"
_LOCAL = re.compile(r"\b_s\d+\b")


def narrow_native_outs(lines: list[str], ns) -> list[str]:
    """`lines` (an entry's body) with the native program's answer narrowed to the locals read
    after it outside the Python guards it stands for (the `else:` block)."""
    at = next((k for k, line in enumerate(lines) if line.lstrip().startswith(NATIVE_OUTS + " = _r")), None)
    if at is None:
        return lines
    indent = len(lines[at - 1]) - len(lines[at - 1].lstrip())
    end = next(k for k in range(at + 1, len(lines))
               if lines[k].strip() == "else:" and len(lines[k]) - len(lines[k].lstrip()) == indent)
    stop = end + 1
    while stop < len(lines) and len(lines[stop]) - len(lines[stop].lstrip()) > indent:
        stop += 1
    used = set(_LOCAL.findall("\n".join(lines[at + 1:end] + lines[stop:])))
    line = lines[at]
    candidates = line.split("# ", 1)[1].split()
    outs = [local for local in candidates if local in used]
    program = ns[re.match(r"\s*_r = (_c\d+)\.run\(L\)$", lines[at - 3]).group(1)]
    program.narrow(outs)
    head = line[:len(line) - len(line.lstrip())]
    lines = list(lines)
    lines[at] = f"{head}{', '.join(outs)}, = _r" if outs else f"{head}pass"
    return lines


def _python_batch(ns, checks: list[str]):
    """A function of a tuple that is True when its i-th item passes `checks[i]` (over X)."""
    lines = ["def __batch(_t):"]
    for i, check in enumerate(checks):
        lines += [f"    X = _t[{i}]", f"    if not ({check}): return False"]
    lines.append("    return True")
    scope = {k: v for k, v in ns.items() if isinstance(k, str)}
    exec(compile("\n".join(lines), "<ember guard batch>", "exec"), scope)
    return scope["__batch"]


def _parents(sources) -> set:
    """The sources that another source extends (by an attribute or a subscript)."""
    known, out = set(sources), set()
    for source in sources:
        for pos in range(len(source) - 1, 0, -1):
            if source[pos] in ".[" and source[:pos] in known:
                out.add(source[:pos])
    return out


def _later_extensions(sources: list[str]):
    """i -> the positions j > i (ascending) of the sources that extend sources[i]. The sources
    extending a prefix are neighbours in sorted order, so each lookup reads only those: a scan
    of every later source for each one was quadratic (densenet121's ~2,800 sources: 3.9 million
    `_extends` calls, 2.6 s of a cold first call on the H200's host)."""
    order = sorted(range(len(sources)), key=sources.__getitem__)
    keys = [sources[k] for k in order]

    def of(i: int) -> list[int]:
        prefix, out = sources[i], []
        pos = bisect.bisect_right(keys, prefix)
        while pos < len(keys) and keys[pos].startswith(prefix):
            if order[pos] > i and _extends(keys[pos], prefix):
                out.append(order[pos])
            pos += 1
        return sorted(out)

    return of


def _extends(source: str, prefix: str) -> bool:
    return len(source) > len(prefix) and source.startswith(prefix) and source[len(prefix)] in ".["


# Note [Immutable constants by identity]: most of a model's guarded sources are its modules'
# configuration: `conv.stride` (a tuple, guarded by type and length) and its items (each an
# int, guarded by type and value), `bn.eps`, `bn.momentum`, `act.inplace`... (resnet50: about
# 700 of 1,300 sources). Such a value is deeply immutable (an exact int, float, str, bytes,
# complex, bool or None, or a tuple or frozenset of those), and a check over an immutable
# object and the entry's constants answers the same on every call. So the entry holds the
# object the trace saw, and when the source yields that very object (`X is _c`: it usually
# does, a module keeps it in its __dict__) its checks and those of every source read from it
# are implied and skipped; otherwise they run as before (an equal value assigned anew still
# hits). A subtree holding a graph input (a symbolic int) or a source not pinned so is never
# folded: its locals are read after the guards.
_IMMUTABLE_LEAVES = (int, float, str, bytes, complex, bool, type(None))


def _immutable(value) -> bool:
    t = type(value)
    if t in _IMMUTABLE_LEAVES:
        return True
    return t in (tuple, frozenset) and all(_immutable(v) for v in value)


# Note [Device guard]: `X.device == dev` builds a torch.device per call (about 110 ns, a fifth
# of a tensor's guard). For a device with no index the boolean property naming its type is
# exact and cheaper (`X.is_cpu` is true exactly when X.device is torch.device("cpu"));
# other devices keep the comparison, which also checks the index.
_DEVICE_FLAG = {"cpu": "X.is_cpu", "meta": "X.is_meta"}


def _device_check(ns, device: torch.device) -> str:
    if device.type == "cuda" and device.index is not None:
        return f"X.is_cuda and X.get_device() == {device.index}"
    flag = _DEVICE_FLAG.get(device.type) if device.index is None else None
    return flag or f"X.device == {ns.ref(device)}"


# Note [Stride guard]: `X.stride() == (...)` builds a tuple on every call (about a quarter of a
# tensor's guard). After the shape guard, the strides are implied where that is exact:
# - a 0-d tensor has no strides (nothing to check);
# - when every size is at least 2, `X.is_contiguous()` (no allocation) holds for exactly one
#   stride tuple, the row-major one, so it stands for the comparison with that tuple.
# A size of 0 or 1 leaves some strides free in torch's notion of contiguity: those tensors, and
# any other layout (channels-last, transposed), keep the comparison.
def _stride_check(t: torch.Tensor) -> str:
    shape, strides = tuple(t.shape), tuple(t.stride())
    if not shape:
        return ""
    if all(n >= 2 for n in shape) and strides == _row_major(shape):
        return " and X.is_contiguous()"
    return f" and X.stride() == {strides!r}"


def _row_major(shape: tuple) -> tuple:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


class Namespace(dict):
    """Names for objects referenced by generated code (constants, the compiled graph, ...)."""

    def ref(self, obj) -> str:
        key = ("ref", id(obj))
        name = self.get(key)
        if name is None:
            name = f"_c{len(self)}"
            self[key] = name
            self[name] = obj
        return name
