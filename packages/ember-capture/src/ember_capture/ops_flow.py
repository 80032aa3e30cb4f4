"""Opcode handlers: jumps, loops, ``with`` blocks, ``raise``.

Only the normal path is traced: exception handlers are reached through the exception
table, which the interpreter never takes; an exception while tracing stops the capture.
"""
from __future__ import annotations

import sys
import types

from . import semantics as S
from .config import Unsupported
from .contexts import is_noop_context
from .frame import TracedRaise, op, since
from .guards import _HELD as _HELD_REF  # an object the trace holds by reference
from .variables import NULL, AutocastVar, BoundVar, ConstVar, ExitVar, GradModeVar, IterVar, ObjVar

V311 = ((3, 11),)
V312 = ((3, 12),)
V312_UP = since((3, 12))


@op("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT")
def _jump(fr, inst):
    fr.jump(inst.argval)


def _cond_jump(test):
    def handler(fr, inst):
        if test(fr, fr.pop()):
            fr.jump(inst.argval)
    return handler


def _is_none(fr, v):
    return S.is_same(v, ConstVar(None))


for _names, _test, _versions in [
    (("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE"), lambda fr, v: S.truthy(fr, v), V311),
    (("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE"), lambda fr, v: not S.truthy(fr, v), V311),
    (("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE"), _is_none, V311),
    (("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"), lambda fr, v: not _is_none(fr, v), V311),
    (("POP_JUMP_IF_TRUE",), lambda fr, v: S.truthy(fr, v), V312_UP),
    (("POP_JUMP_IF_FALSE",), lambda fr, v: not S.truthy(fr, v), V312_UP),
    (("POP_JUMP_IF_NONE",), _is_none, V312_UP),
    (("POP_JUMP_IF_NOT_NONE",), lambda fr, v: not _is_none(fr, v), V312_UP),
]:
    op(*_names, versions=_versions)(_cond_jump(_test))


@op("JUMP_IF_TRUE_OR_POP", versions=V311)
def _jump_if_true_or_pop(fr, inst):
    if S.truthy(fr, fr.stack[-1]):
        fr.jump(inst.argval)
    else:
        fr.pop()


@op("JUMP_IF_FALSE_OR_POP", versions=V311)
def _jump_if_false_or_pop(fr, inst):
    if not S.truthy(fr, fr.stack[-1]):
        fr.jump(inst.argval)
    else:
        fr.pop()


@op("GET_ITER")
def _get_iter(fr, inst):
    fr.push(S.iterate(fr, fr.pop()))


@op("FOR_ITER")
def _for_iter(fr, inst):
    it = fr.stack[-1]
    if not isinstance(it, IterVar):
        raise Unsupported("unsupported_iter", f"iterating over {S.describe(it)}")
    if it.more():
        fr.push(it.take())
        return
    _FOR_ITER_EXHAUSTED[fr.tr.version](fr, inst)


def _exhausted_311(fr, inst):
    fr.pop()
    fr.jump(inst.argval)


def _exhausted_312(fr, inst):
    # 3.12 jumps to an END_FOR that pops two values: the iterator and the next value; 3.13's
    # END_FOR pops one (the NULL pushed here) and the POP_TOP after it pops the iterator.
    fr.push(NULL)
    fr.jump(inst.argval)


_FOR_ITER_EXHAUSTED = {(3, 11): _exhausted_311, (3, 12): _exhausted_312, (3, 13): _exhausted_312}


@op("END_FOR", versions=V312)
def _end_for(fr, inst):
    fr.popn(2)


@op("BEFORE_WITH")
def _before_with(fr, inst):
    ctx = fr.pop()
    if isinstance(ctx, AutocastVar):
        fr.push(fr.tr.graph.enter_autocast(ctx.args, fr.tr))
        fr.push(ConstVar(None))
        return
    if is_noop_context(ctx):  # Note [Profiler contexts]
        fr.push(ExitVar())
        fr.push(ctx)
        return
    enter, exit_ = S.class_dunder(ctx, "__enter__"), S.class_dunder(ctx, "__exit__")
    if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
        # A context manager written in Python: its __exit__ is called at the end of the block
        # (the normal path; an exception inside the block is not traced).
        fr.push(BoundVar(ObjVar(exit_), ctx))
        fr.push(S.call_dunder(fr, ctx, "__enter__", []))
        return
    if not isinstance(ctx, GradModeVar):
        raise Unsupported("unsupported_context", f"with-block over {S.describe(ctx)}")
    graph = fr.tr.graph
    previous = getattr(ctx, "previous", None)  # set by set_grad_enabled(), which applies at once
    if previous is None:
        previous = graph.grad_enabled
        if ctx.enabled != previous:
            graph.set_grad_enabled(ctx.enabled)
    fr.push(ExitVar(previous))
    fr.push(ConstVar(None))


@op("RETURN_GENERATOR")
def _return_generator(fr, inst):
    if fr.yields is None or fr.parent is None:
        raise Unsupported("generator", "generator at the top of a capture")
    fr.push(ConstVar(None))  # what the first resume of the generator receives (and pops)


@op("YIELD_VALUE")
def _yield_value(fr, inst):
    if fr.yields is None:
        raise Unsupported("generator", "yield outside a generator")
    fr.yields.append(fr.pop())
    fr.push(ConstVar(None))  # the value sent back into the generator
    fr.paused = True  # Note [lazy iterators]: the consumer resumes the frame for the next item


@op("GET_YIELD_FROM_ITER")
def _get_yield_from_iter(fr, inst):
    fr.push(S.iterate(fr, fr.pop()))


@op("SEND")
def _send(fr, inst):
    # ``yield from`` an iterator known at trace time, one item per SEND as in CPython: the item
    # goes on to YIELD_VALUE (the outer generator pauses, so a sub-generator's side effects
    # happen only for the items consumed); once exhausted, the sub-generator's return value is
    # the result of ``yield from`` and the loop exits.
    value = fr.pop()
    it = fr.stack[-1]
    if fr.yields is None or not isinstance(it, IterVar) or not S.is_same(value, ConstVar(None)):
        raise Unsupported("generator", "yield from / await on an unknown iterator")
    if it.more():
        fr.push(it.take())
        return
    _SEND_DONE[fr.tr.version](fr, it.returned())
    fr.jump(inst.argval)


def _send_done_311(fr, result):
    fr.pop()  # 3.11 pops the receiver too
    fr.push(result)


def _send_done_312(fr, result):
    fr.push(result)  # 3.12 keeps the receiver; END_SEND removes it


_SEND_DONE = {(3, 11): _send_done_311, (3, 12): _send_done_312, (3, 13): _send_done_312}


@op("END_SEND", versions=V312_UP)
def _end_send(fr, inst):
    del fr.stack[-2]


@op("RAISE_VARARGS")
def _raise_varargs(fr, inst):
    if inst.arg == 0:
        raise Unsupported("unsupported_opcode", "bare raise is not traced")
    cause = S.const_value(fr.pop(), "raise ... from") if inst.arg == 2 else _NO_CAUSE
    exc = _instance(_raised_value(fr.pop()))
    if cause is not _NO_CAUSE:  # `raise E from c`: E.__cause__ is c (None: suppressed context)
        exc.__cause__ = None if cause is None else _instance(cause)
    if fr.tr.handling and fr.tr.handling[-1] not in (None, exc):  # raised while handling: the implicit context
        exc.__context__ = fr.tr.handling[-1]
    raise TracedRaise(exc)  # Note [Traced exceptions]


_NO_CAUSE = object()


def _raised_value(v):
    """The exception a raise raises. One read from the inputs (an argument, a global, an exception
    a native call raised before a break) is another object on the next call, guarded by its type
    only: raised natively (a break), never baked into the trace as this call's object."""
    if isinstance(v, ObjVar) and v.source is not None and not _HELD_REF.match(v.source):
        raise Unsupported("unsupported_opcode", "raising an exception object read from the inputs")
    return S.const_value(v, "raise")


def _instance(exc):
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    if not isinstance(exc, BaseException):
        raise Unsupported("trace_error", f"exceptions must derive from BaseException, not {type(exc).__name__}")
    return exc


@op("RERAISE")
def _reraise(fr, inst):
    exc = _raised_value(fr.pop())
    if inst.arg:
        fr.pop()  # the saved offset (lasti)
    raise TracedRaise(exc)


# The stack slot PUSH_EXC_INFO fills with the exception handled before (none is traced). While
# it is on a frame's stack, the frame is inside an `except` block: Note [Breaks in except blocks].
NO_PREVIOUS_EXCEPTION = ConstVar(None)


@op("PUSH_EXC_INFO")
def _push_exc_info(fr, inst):
    exc = fr.pop()
    fr.push(NO_PREVIOUS_EXCEPTION)
    fr.push(exc)
    fr.tr.handling.append(exc.value if isinstance(exc, ConstVar) else None)


def in_except_block(fr) -> bool:
    """Note [Breaks in except blocks]: a traced handler's exception is symbolic; natively,
    nothing is being handled (`sys.exc_info()` is empty). A resume function that starts inside
    the block would find no active exception for a bare `raise`, `sys.exc_info()` or the
    implicit `__context__` of a new exception, so the frame does not split there."""
    return any(v is NO_PREVIOUS_EXCEPTION for v in fr.stack)


@op("POP_EXCEPT")
def _pop_except(fr, inst):
    fr.pop()
    if fr.tr.handling:
        fr.tr.handling.pop()


@op("CHECK_EXC_MATCH")
def _check_exc_match(fr, inst):
    cls = S.const_value(fr.pop(), "except")
    fr.push(ConstVar(isinstance(S.const_value(fr.stack[-1]), cls)))


@op("WITH_EXCEPT_START", "SETUP_ANNOTATIONS", "IMPORT_STAR", "GET_AWAITABLE", "LOAD_BUILD_CLASS")
def _unsupported_flow(fr, inst):
    what = {"RAISE_VARARGS": "raise statement", "YIELD_VALUE": "yield"}.get(inst.opname, inst.opname)
    raise Unsupported("unsupported_opcode", f"{what} is not traced")


@op("IMPORT_NAME")
def _import_name(fr, inst):
    fromlist = S.const_value(fr.pop())
    level = S.const_value(fr.pop())
    name = inst.argval
    if level != 0 or name not in sys.modules:
        raise Unsupported("import", f"import of {name!r} (not yet imported)")
    top = sys.modules[name] if fromlist else sys.modules[name.split(".")[0]]
    fr.push(ObjVar(top))


@op("IMPORT_FROM")
def _import_from(fr, inst):
    fr.push(S.getattr_var(fr, fr.stack[-1], inst.argval))
