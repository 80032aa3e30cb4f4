"""Context managers that capture treats as no-ops: profiler annotations.

Note [Profiler contexts]: ``torch.profiler.record_function(name)`` labels a region for the
profiler; it computes nothing. Inside captured code it is a no-op, as TorchDynamo makes it
(its enter/exit ops would be opaque calls in a graph), in both of its forms: as a context
manager (``with record_function("block"):``) and as a decorator (``ContextDecorator``'s wrapper,
inlined from contextlib, enters the same object). The region is neither a graph break nor
traced; a graph break inside it resumes inside it like any block (its ``__exit__`` is a no-op).
"""
from __future__ import annotations

import torch

from .builtins_table import builtin
from .variables import NoOpContextVar, ObjVar, Var

NOOP_CONTEXTS = (torch.autograd.profiler.record_function,)


def is_noop_context(ctx: Var) -> bool:
    return isinstance(ctx, NoOpContextVar) or (isinstance(ctx, ObjVar) and isinstance(ctx.value, NOOP_CONTEXTS))


for _cls in NOOP_CONTEXTS:
    builtin(_cls)(lambda fr, args, kwargs, _cls=_cls: NoOpContextVar(_cls))
