"""Python-visible state of a tensor that its guards do not check.

Note [Tensor state outside the guards]: a tensor input is guarded by its type, dtype, device,
sizes, strides and requires_grad (Note [Native guards]), and its fake tensor answers every
metadata question the trace asks. Some answers depend on more than that: where the tensor
starts in its storage (`storage_offset()`), whether it is a view (`_is_view()`), its lazy conjugate and negative bits (`is_conj()`,
`is_neg()`, set by `x.conj()` on a complex tensor), whether it was made under inference mode
(`is_inference()`), whether its storage is shared or pinned, whether it is an autograd leaf
(`is_leaf`, for a non-leaf input that requires grad). The fake answered them for the first
call's tensor, and the next call's tensor, equal in everything guarded, reused that answer.

Such a question about an input is answered by the real tensor and guarded (`X.storage_offset()
== 2`), on that input only, so code that never asks pays nothing. About a tensor made in the
trace, the fake's answer follows the inputs' (a view's offset and conjugate bit are its base's):
the inputs' answers are guarded and the fake answers; where the fake cannot follow (inference,
shared or pinned storage) the question is a graph break.
"""
from __future__ import annotations

import torch

from .config import Unsupported
from .variables import ConstVar, TensorVar

# Methods (no arguments) and torch functions asking about state outside the guards.
STATE_METHODS = frozenset({"storage_offset", "is_conj", "is_neg", "is_inference", "is_shared", "is_pinned", "_is_view"})
STATE_FUNCTIONS = {torch.is_conj: "is_conj", torch.is_neg: "is_neg", torch.is_inference: "is_inference"}
# Those whose answer for a tensor made in the trace the fake derives: from the inputs' answers
# (True: those are guarded), or from the op that made it alone (False: a view op makes a view).
_FAKE_FOLLOWS = {"storage_offset": True, "is_conj": True, "is_neg": True, "_is_view": False}
STATE_ATTRS = frozenset({"is_leaf"})  # the fake of a tensor made in the trace answers right


def _guard(tr, source: str, name: str, value, call: str = "()"):
    tr.guards.add(source, f"X.{name}{call} == {value!r}", f"{source}.{name}{call} == {value!r}")


def tensor_state(fr, t: TensorVar, name: str) -> ConstVar:
    """``t.name()`` for a name in STATE_METHODS: Note [Tensor state outside the guards]."""
    tr = fr.tr
    if t.source is not None:
        value = getattr(tr.eval_source(t.source), name)()
        _guard(tr, t.source, name, value)
        return ConstVar(value)
    if name not in _FAKE_FOLLOWS:
        raise Unsupported("unsupported_op", f"Tensor.{name}() of a tensor made in the graph")
    for source, real in tr.graph.inputs if _FAKE_FOLLOWS[name] else ():
        if isinstance(real, torch.Tensor):
            _guard(tr, source, name, getattr(real, name)())
    return ConstVar(getattr(t.fake, name)())


def tensor_state_attr(fr, t: TensorVar, name: str) -> ConstVar:
    """``t.is_leaf``: the fake answers (an input's fake is a leaf as the input is, and one that an
    in-place op with a tensor that requires grad made a non-leaf in the trace is not); an input's
    answer at entry is guarded, for the next call's input. A tensor made in the trace is a leaf
    as its fake is (its inputs' requires_grad is guarded)."""
    if t.source is not None:
        _guard(fr.tr, t.source, name, getattr(fr.tr.eval_source(t.source), name), call="")
    return ConstVar(getattr(t.fake, name))
