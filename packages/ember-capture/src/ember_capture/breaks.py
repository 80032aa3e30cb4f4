"""Graph breaks: which instructions may split a graph, and how each one runs natively.

At a break the entry has run the graph so far and rebuilt the frame's stack and locals as
real values; ``BreakAction`` then executes the breaking instruction in plain Python (a table
keyed by opname, like the interpreter's) and continues in the resume function for the
instruction that comes next (Note [Resume functions]).
"""
from __future__ import annotations


from .codegen import RUNTIME_NULL
from .frame import VERSION, CodeInfo
from .ops_313 import CONVERSIONS, compare_op_313
from .ops_build import BINARY_OPS, COMPARE_OPS
from .tables import registrar

NATIVE = {}
native = registrar(NATIVE)


def why_no_break(code, inst) -> str | None:
    """Why the frame cannot split at ``inst`` (None: it can). A break needs a native rule for
    the instruction, no loop around it (the resume would re-enter the loop)."""
    if inst.opname not in NATIVE:
        return f"{inst.opname} cannot run natively at a break"
    if CodeInfo.of(code).in_loop(inst.offset):
        return "it is inside a loop"
    return None


class BreakAction:
    def __init__(self, state, frame, inst, reason):
        info = CodeInfo.of(frame.code)
        self.state = state
        self.inst = inst
        self.reason = reason
        self.kw_names = frame.kw_names
        self.next_offset = info.insts[info.index[inst.offset] + 1].offset
        self.unbound = tuple(n for n in frame.code.co_varnames if n not in frame.locals)
        self.handler = NATIVE[inst.opname]

    def __call__(self, stack, locals_, cells=()):
        target = self.handler(self, stack, RUNTIME_NULL)
        null_mask = tuple(v is RUNTIME_NULL for v in stack)
        fn = self.state.resume_function(target, null_mask, self.unbound)
        return fn(*cells, *locals_, *[v for v in stack if v is not RUNTIME_NULL])


def _callee(first, second, null):
    """(callable, self or None) of the two values below a call's arguments: 3.11/3.12 keep
    ``NULL, callable`` or ``method, self``; 3.13 keeps ``callable, NULL`` or ``method, self``."""
    if VERSION >= (3, 13):
        return first, (None if second is null else second)
    return (second, None) if first is null else (first, second)


@native("CALL")
def _call(action, stack, null, kw_names=None):
    argc = action.inst.arg
    args = stack[len(stack) - argc:]
    del stack[len(stack) - argc:]
    fn, self_ = _callee(*stack[-2:], null)
    del stack[-2:]
    if self_ is not None:
        args = [self_] + args
    kw_names = action.kw_names if kw_names is None else kw_names
    kwargs = {}
    if kw_names:
        n = len(kw_names)
        kwargs = dict(zip(kw_names, args[len(args) - n:]))
        args = args[:len(args) - n]
    stack.append(action.state.call_native(fn, args, kwargs))
    return action.next_offset


@native("CALL_KW")
def _call_kw(action, stack, null):
    return _call(action, stack, null, kw_names=stack.pop())


@native("CALL_FUNCTION_EX")
def _call_ex(action, stack, null):
    kwargs = stack.pop() if action.inst.arg & 1 else {}
    args = stack.pop()
    fn, _ = _callee(*stack[-2:], null)
    del stack[-2:]
    stack.append(action.state.call_native(fn, list(args), dict(kwargs)))
    return action.next_offset


def _cond(test, pop=True):
    def handler(action, stack, null):
        value = stack[-1]
        jump = test(value)
        if pop or not jump:
            stack.pop()
        return action.inst.argval if jump else action.next_offset
    return handler


for _prefix in ("POP_JUMP_FORWARD_IF_", "POP_JUMP_BACKWARD_IF_", "POP_JUMP_IF_"):
    native(_prefix + "TRUE")(_cond(bool))
    native(_prefix + "FALSE")(_cond(lambda v: not v))
    native(_prefix + "NONE")(_cond(lambda v: v is None))
    native(_prefix + "NOT_NONE")(_cond(lambda v: v is not None))
native("JUMP_IF_TRUE_OR_POP")(_cond(bool, pop=False))
native("JUMP_IF_FALSE_OR_POP")(_cond(lambda v: not v, pop=False))


def _stack_op(n_in, fn):
    def handler(action, stack, null):
        args = stack[len(stack) - n_in:]
        del stack[len(stack) - n_in:]
        stack.append(fn(action.inst, *args))
        return action.next_offset
    return handler


native("BINARY_OP")(_stack_op(2, lambda inst, a, b: BINARY_OPS[inst.arg](a, b)))
native("COMPARE_OP")(_stack_op(2, lambda inst, a, b: _compare(inst, a, b)))
native("BINARY_SUBSCR")(_stack_op(2, lambda inst, a, b: a[b]))
native("CONTAINS_OP")(_stack_op(2, lambda inst, a, b: (a in b) != bool(inst.arg)))
native("UNARY_NEGATIVE")(_stack_op(1, lambda inst, a: -a))
native("UNARY_INVERT")(_stack_op(1, lambda inst, a: ~a))
native("UNARY_NOT")(_stack_op(1, lambda inst, a: not a))
native("FORMAT_VALUE")(lambda action, stack, null: _format_value(action, stack))
native("BINARY_SLICE")(_stack_op(3, lambda inst, a, start, stop: a[start:stop]))
native("TO_BOOL")(_stack_op(1, lambda inst, a: bool(a)))
native("CONVERT_VALUE")(_stack_op(1, lambda inst, a: CONVERSIONS[inst.arg](a)))
native("FORMAT_SIMPLE")(_stack_op(1, lambda inst, a: format(a, "")))
native("FORMAT_WITH_SPEC")(_stack_op(2, lambda inst, a, spec: format(a, spec)))


def _compare(inst, a, b):
    if VERSION < (3, 13):
        return COMPARE_OPS[inst.argval](a, b)
    fn, to_bool = compare_op_313(inst.arg)
    return bool(fn(a, b)) if to_bool else fn(a, b)


def _format_value(action, stack):
    spec = stack.pop() if action.inst.arg & 0x04 else ""
    value = stack.pop()
    conv = {0: None, 1: str, 2: repr, 3: ascii}[action.inst.arg & 0x03]
    stack.append(format(conv(value) if conv else value, spec))
    return action.next_offset


@native("STORE_SUBSCR")
def _store_subscr(action, stack, null):
    key = stack.pop()
    obj = stack.pop()
    value = stack.pop()
    obj[key] = value
    return action.next_offset


@native("STORE_ATTR")
def _store_attr(action, stack, null):
    obj = stack.pop()
    value = stack.pop()
    setattr(obj, action.inst.argval, value)
    return action.next_offset


@native("LOAD_METHOD")
def _load_method(action, stack, null):
    obj = stack.pop()
    stack.append(null)
    stack.append(getattr(obj, action.inst.argval))
    return action.next_offset


@native("LOAD_ATTR")
def _load_attr(action, stack, null):
    obj = stack.pop()
    method = VERSION >= (3, 12) and action.inst.arg & 1
    if method and VERSION == (3, 12):
        stack.append(null)
    stack.append(getattr(obj, action.inst.argval))
    if method and VERSION >= (3, 13):
        stack.append(null)
    return action.next_offset


