"""FX graphs for the warm-start cache: a fingerprint (part of a key) and a plain-data form.

`fingerprint(gm)` is the SHA-256 of a canonical text of the graph: per node its op, target
(by qualified name), arguments, and `meta["val"]` as shape, stride, dtype, device; the output
node's `ember_*` metadata (what one layer tells the next, ARCHITECTURE.md). Anything that would
print differently in two processes for the same program (an object's address) makes the graph
uncacheable (None) rather than risk two graphs sharing a key.

`to_data(gm)` / `from_data(data)` carry a functional graph between processes: nodes, targets,
arguments, `meta["val"]` (rebuilt as fake tensors on their devices) and the plain metadata
(`stack_trace` and `ember_grad_reach` of any node, the output node's `ember_*` entries).
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import types
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ember.cache_store import Uncacheable

_ADDRESS = re.compile(r" at 0x[0-9a-f]+|<lambda>|<locals>")
_PLAIN = (str, int, float, bool, type(None))
# metadata of any node that is carried: the user's line, and ember_autograd's outputs reaching the
# autograd node that computed a gradient (Note [gradients eager computes from no tangent])
_NODE_META = frozenset({"stack_trace", "ember_grad_reach"})


def describe(value: Any) -> str:
    """A value's cache-relevant description: a tensor's metadata, a number's value."""
    if isinstance(value, torch.Tensor):
        return (f"T({tuple(value.shape)},{tuple(value.stride())},{value.storage_offset()},{value.dtype},"
                f"{value.device},{value.requires_grad},{type(value).__name__})")
    if isinstance(value, (list, tuple)):
        inner = ",".join(describe(v) for v in value)
        return f"{type(value).__name__}({inner})"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.fx.Node):
        return f"%{value.name}"
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Uncacheable("a symbolic size")
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        # An op of another library (a user's torch.library op) has Python kernels the key cannot see.
        if str(value).split(".")[0].split("::")[0] not in _OWN_OPS:
            raise Uncacheable(f"{value} is not an aten or ember_prims op")
        return str(value)
    if callable(value) and hasattr(value, "__qualname__"):
        module = getattr(value, "__module__", None) or ""
        name = f"{module}.{value.__qualname__}"
        owner = getattr(value, "__self__", None)  # a method bound to a class (Function.apply) or object
        if owner is not None and not isinstance(owner, types.ModuleType):
            klass = owner if isinstance(owner, type) else type(owner)
            module, name = klass.__module__, f"{klass.__module__}.{klass.__qualname__}.{value.__name__}"
        if module.split(".")[0] in _STABLE_MODULES:
            return name
        return f"{name}#{_code_digest(value)}"  # a user's function: its code is part of the key
    text = repr(value)
    if _ADDRESS.search(text):
        raise Uncacheable(f"{type(value).__name__} has no stable description")
    return f"{type(value).__name__}:{text}"


def describe_fields(obj: Any, skip: frozenset = frozenset()) -> str:
    """A dataclass's fields as text, sets sorted (a frozenset's repr follows string hashing,
    which differs between processes)."""
    def canon(v: Any) -> str:
        if isinstance(v, (set, frozenset)):
            return "{" + ",".join(sorted(map(repr, v))) + "}"
        return repr(v)

    return ";".join(f"{f.name}={canon(getattr(obj, f.name))}" for f in dataclasses.fields(obj) if f.name not in skip)


# Modules whose functions change only with the versions in the key (warm_start.code_version).
_STABLE_MODULES = frozenset({"torch", "_operator", "operator", "builtins", "math", "ember_prims",
                             "ember_autograd", "ember_inductor", "ember_capture"})
_OWN_OPS = frozenset({"aten", "prims", "ember_prims"})


def _code_digest(fn: Any) -> str:
    """A hash of the code of a user's function, or of every function of a class it is bound to
    (an autograd.Function's apply: its forward and backward)."""
    codes = []
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if klass.__module__.split(".")[0] not in _STABLE_MODULES:
                codes += [v.__code__ for v in vars(klass).values() if hasattr(v, "__code__")]
                codes += [v.__func__.__code__ for v in vars(klass).values() if hasattr(v, "__func__")]
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        codes.append(code)
    if not codes:
        raise Uncacheable(f"{fn!r} has no Python code to key on")
    return hashlib.sha256(repr([(c.co_code, c.co_consts, c.co_names) for c in codes]).encode()).hexdigest()[:16]


def fingerprint(gm: torch.fx.GraphModule) -> str | None:
    """The graph's fingerprint, or None if it has parts with no stable description."""
    lines = []
    try:
        for n in gm.graph.nodes:
            target = n.target if isinstance(n.target, str) else describe(n.target)
            if n.op in ("call_module", "get_attr"):
                owned = gm.get_submodule(n.target) if n.op == "call_module" else _attr(gm, n.target)
                if not isinstance(owned, torch.Tensor):
                    return None  # a submodule's code is not in the graph
                target += f"={hashlib.sha256(owned.detach().cpu().contiguous().numpy().tobytes()).hexdigest()}"
            meta = {k: v for k, v in n.meta.items() if n.op == "output" and k.startswith("ember_")}
            lines.append(f"{n.name}={n.op}[{target}]({describe(n.args)};{describe(n.kwargs)})"
                         f" val={describe(n.meta.get('val'))} {describe(meta)}")
    except (Uncacheable, TypeError, AttributeError, RuntimeError):
        return None
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _attr(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


# --- graphs as data --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Ref:
    name: str


@dataclasses.dataclass(frozen=True)
class _Val:
    shape: tuple
    stride: tuple
    offset: int
    dtype: torch.dtype
    device: str
    requires_grad: bool


def to_data(gm: torch.fx.GraphModule) -> dict[str, Any]:
    nodes = []
    for n in gm.graph.nodes:
        if n.op in ("call_module", "get_attr"):
            raise Uncacheable(f"a {n.op} node")
        if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace not in _OWN_OPS:
            # a user's torch.library op, or one ember_autograd generated in this process (Note
            # [auto-functionalization]): another process may not have it
            raise Uncacheable(f"{n.target} is not an aten or ember_prims op")
        meta = {k: v for k, v in n.meta.items()
                if k in _NODE_META or (n.op == "output" and k.startswith("ember_") and _plain(v))}
        if "val" in n.meta:
            meta["val"] = _val(n.meta["val"])
        nodes.append((n.name, n.op, n.target, _refs(n.args), _refs(n.kwargs), meta))
    return {"nodes": nodes}


def from_data(data: dict[str, Any], mode: FakeTensorMode | None = None) -> torch.fx.GraphModule:
    mode = mode or FakeTensorMode(allow_non_fake_inputs=True)
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for name, op, target, args, kwargs, meta in data["nodes"]:
        node = graph.create_node(op, target, _unrefs(args, env), _unrefs(kwargs, env), name)
        env[name] = node
        node.meta.update({k: (_fake(v, mode) if k == "val" else v) for k, v in meta.items()})
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _plain(v: Any) -> bool:
    return isinstance(v, _PLAIN) or (isinstance(v, (tuple, list)) and all(_plain(x) for x in v))


def _val(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return _Val(tuple(v.shape), tuple(v.stride()), v.storage_offset(), v.dtype, str(v.device), v.requires_grad)
    if isinstance(v, (tuple, list)):
        return type(v)(_val(x) for x in v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Uncacheable("a symbolic value")
    if isinstance(v, _PLAIN) or isinstance(v, (torch.dtype, torch.device)):
        return v
    raise Uncacheable(f"a meta['val'] of type {type(v).__name__}")


def _fake(v: Any, mode: FakeTensorMode) -> Any:
    if isinstance(v, _Val):
        # Built on the meta device and wrapped, not made by running factory ops under the mode:
        # a hundred times faster, and what a fake tensor is (metadata plus a device).
        size = v.offset + 1 + sum((s - 1) * st for s, st in zip(v.shape, v.stride)) if all(v.shape) else 0
        meta = torch.empty((max(size, 1),), dtype=v.dtype, device="meta").as_strided(v.shape, v.stride, v.offset)
        t = FakeTensor(mode, meta, torch.device(v.device))
        if v.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(v, (tuple, list)):
        return type(v)(_fake(x, mode) for x in v)
    return v


def _refs(value: Any) -> Any:
    return torch.fx.node.map_aggregate(value, lambda x: _Ref(x.name) if isinstance(x, torch.fx.Node) else x)


def _unrefs(value: Any, env: dict) -> Any:
    if isinstance(value, _Ref):
        return env[value.name]
    if isinstance(value, (tuple, list)):
        return type(value)(_unrefs(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _unrefs(v, env) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_unrefs(value.start, env), _unrefs(value.stop, env), _unrefs(value.step, env))
    return value
