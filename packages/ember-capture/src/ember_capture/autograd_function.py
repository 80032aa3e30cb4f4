"""``torch.autograd.Function`` subclasses called in traced code: ``MyFn.apply(*args)``.

Note [autograd.Function]: a call ``MyFn.apply(x, ...)`` is recorded as one graph node whose
target calls ``MyFn.apply`` (``applier``). When the graph runs, torch's own Function machinery runs the user's
``forward`` and records the user's ``backward`` for autograd, exactly as eager does; a backend
that traces the graph to ATen (ember's default) traces through that forward, and its joint
forward+backward trace (``torch.autograd.grad`` over the traced forward) calls the user's
``backward``, so a custom gradient (a straight-through estimator, a fused GELU's formula) is kept
rather than re-derived from the forward's ops. The node's example value comes from running
``apply`` on the trace's fake tensors, so a forward that needs tensor data is a graph break.
The class is guarded by identity and its ``forward``, ``backward``, ``setup_context`` and
``apply`` through its class dicts (a method replaced after compiling recompiles). A forward that
marks an input dirty (``ctx.mark_dirty``: an in-place update of an input) is a graph break:
capture does not model the mutation that node would make.
"""
from __future__ import annotations

import types
import weakref

import torch

from .attributes import class_lookup
from .builtins_table import builtin
from .config import Unsupported
from .variables import ObjVar

_APPLY = torch.autograd.Function.apply.__func__
_METHODS = ("forward", "backward", "setup_context", "apply", "vjp", "jvp")


def _names_used(fn) -> set:
    code = getattr(fn, "__code__", None)
    if code is None:
        return set()
    names = set(code.co_names)
    for const in code.co_consts:  # nested functions and comprehensions
        if isinstance(const, types.CodeType):
            names |= set(const.co_names)
    return names


@builtin(_APPLY)
def _function_apply(fr, args, kwargs):
    if not args or not isinstance(args[0], ObjVar) or not isinstance(args[0].value, type):
        raise Unsupported("unsupported_call", "autograd.Function.apply without its class")
    cls = args[0].value
    if not issubclass(cls, torch.autograd.Function):
        raise Unsupported("unsupported_call", f"Function.apply on {cls.__qualname__}")
    methods = {name: class_lookup(fr.tr, cls, name) for name in _METHODS}  # guarded per class dict
    forward = methods["forward"]
    forward = getattr(forward, "__func__", forward)
    if "mark_dirty" in _names_used(forward):
        raise Unsupported("unsupported_call", f"{cls.__qualname__}.forward marks an input dirty (an in-place update)")
    return fr.tr.graph.call("call_function", applier(cls), list(args[1:]), dict(kwargs))


_APPLIERS = weakref.WeakKeyDictionary()


def applier(cls):
    """The graph node's target for ``cls.apply``: a function of this module (FX names a target
    by its module, and a class's bound ``apply`` would be printed as ``torch.autograd.function.apply``)."""
    fn = _APPLIERS.get(cls)
    if fn is None:
        def fn(*args, **kwargs):
            return cls.apply(*args, **kwargs)
        fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
        fn.autograd_function = cls
        _APPLIERS[cls] = fn
    return fn
