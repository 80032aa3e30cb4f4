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
    """Why the frame cannot split at ``inst`` (None: it can): a break needs a native rule for
    the instruction. A break inside a loop resumes inside the loop (Note [Breaks in loops])."""
    if inst.opname not in NATIVE:
        return f"{inst.opname} cannot run natively at a break"
    return None


_SCALARS = (bool, int, float)
_PURE_SCALAR_OPS = frozenset({"COMPARE_OP", "BINARY_OP", "CONTAINS_OP", "UNARY_NOT", "UNARY_NEGATIVE", "TO_BOOL"})


class _Step:
    """One more instruction run natively after the breaking one."""

    def __init__(self, action, inst, next_offset):
        self.inst, self.next_offset, self.state, self.kw_names = inst, next_offset, action.state, ()


class Bounce:
    """The next resume function to call, handed back to the frame that started the chain."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, args):
        self.fn = fn
        self.args = args


class BreakAction:
    """Runs the breaking instruction natively and continues in the resume function.

    Note [Breaks in loops]: every resume function is made from the frame's *original* code
    (a break in a resume function maps its offsets back by the prologue's length, and drops the
    stack slots the prologue had as locals), so a break that a loop reaches on every iteration
    resumes in the same few functions, compiled once each while their guards hold. The loop's
    iterator is a live stack value: rebuilt as a real iterator at the break, it is an opaque
    object in the resume function, whose FOR_ITER is a break of its own (``next()`` natively,
    the item passed on the stack). Resume functions do not call each other: a break in one
    returns a ``Bounce`` to the original frame's break, which calls the next one in a loop, so
    a loop of any length runs at a constant Python stack depth."""

    def __init__(self, state, frame, inst, reason):
        info = CodeInfo.of(frame.code)
        self.state = state
        self.root = state.origin or state
        self.shift = state.shift  # resume prologue's length: offsets in the original code
        self.bounce = state.origin is not None
        self.inst = inst
        self.reason = reason
        self.kw_names = frame.kw_names
        self.next_offset = info.insts[info.index[inst.offset] + 1].offset
        root_code = self.root.code
        self.n_locals = len(root_code.co_varnames)
        # The original frame's locals, by slot (a resume code names a cell argument's slot anew).
        self.unbound = tuple(root_name for root_name, name in zip(root_code.co_varnames, frame.code.co_varnames)
                             if name not in frame.locals and root_name not in root_code.co_cellvars)
        self.handler = NATIVE[inst.opname]
        self.info = info
        self.bound = {n: i for i, n in enumerate(frame.code.co_varnames) if n in frame.locals}
        self.except_handler = next(((target, depth, lasti) for start, end, target, depth, lasti in info.handlers
                                    if start <= inst.offset < end), None)

    def __call__(self, stack, locals_, cells=()):
        before = list(stack) if self.except_handler is not None else None
        try:
            target = self.handler(self, stack, RUNTIME_NULL)
        except Exception as exc:
            if before is None:
                raise
            target = self.unwind(exc, stack, before)
        else:
            if stack and type(stack[-1]) in _SCALARS:
                target = self.continue_natively(target, stack, locals_)
        null_mask = tuple(v is RUNTIME_NULL for v in stack)
        fn = self.root.resume_function(target - self.shift, null_mask, self.unbound)
        args = (*cells, *locals_[:self.n_locals], *[v for v in stack if v is not RUNTIME_NULL])
        if self.bounce:  # Note [Breaks in loops]
            return Bounce(fn, args)
        result = fn(*args)
        while type(result) is Bounce:
            result = result.fn(*result.args)
        return result

    def unwind(self, exc, stack, before) -> int:
        """Note [Exceptions at a break]: the breaking instruction, run natively, raised inside a
        ``try`` (or a ``with`` block) of the frame: as CPython does, the stack is cut to the
        handler's depth (the offset of the raising instruction pushed where the handler wants
        it), the exception pushed, and the frame resumes at the handler, so the user's
        ``except``, ``finally`` and ``__exit__`` run on the exception."""
        target, depth, lasti = self.except_handler
        stack[:] = before[:depth]
        if lasti:
            stack.append(self.inst.offset - self.shift)
        stack.append(exc)
        return target

    def continue_natively(self, target, stack, locals_):
        """Note [Scalar conditions at a break]: ``while x.sum().item() < limit:`` breaks at
        ``.item()``; resuming right after it would pass the float to the resume function, which
        specializes on it (a new compile for every value, so a loop soon runs eagerly). Instead the
        instructions that only compute on Python scalars (constants, bound locals holding
        scalars, comparisons, arithmetic) up to the conditional jump that consumes them run
        natively too, and the resume function starts at the branch taken."""
        info = self.info
        while target in info.index:
            inst = info.insts[info.index[target]]
            name = inst.opname
            if name == "LOAD_CONST" and type(inst.argval) in _SCALARS:
                stack.append(inst.argval)
            elif name == "LOAD_FAST" and inst.argval in self.bound \
                    and type(locals_[self.bound[inst.argval]]) in _SCALARS:
                stack.append(locals_[self.bound[inst.argval]])
            elif name in _PURE_SCALAR_OPS and all(type(v) in _SCALARS for v in stack[-2:]):
                NATIVE[name](_Step(self, inst, info.insts[info.index[target] + 1].offset), stack, RUNTIME_NULL)
            elif "POP_JUMP" in name and "NONE" not in name and type(stack[-1]) in _SCALARS:
                return NATIVE[name](_Step(self, inst, info.insts[info.index[target] + 1].offset), stack,
                                    RUNTIME_NULL)
            else:
                return target
            target = info.insts[info.index[target] + 1].offset
        return target


def _callee(first, second, null):
    """(callable, self or ``null``) of the two values below a call's arguments: 3.11/3.12 keep
    ``NULL, callable`` or ``method, self``; 3.13 keeps ``callable, NULL`` or ``method, self``.
    A self of None is an argument (a with-block's ``__exit__(None, None, None)`` is called with
    the exit in the method slot and None as "self"), so "no self" is ``null``, not None."""
    if VERSION >= (3, 13):
        return first, second
    return (second, null) if first is null else (first, second)


@native("CALL")
def _call(action, stack, null, kw_names=None):
    argc = action.inst.arg
    args = stack[len(stack) - argc:]
    del stack[len(stack) - argc:]
    fn, self_ = _callee(*stack[-2:], null)
    del stack[-2:]
    if self_ is not null:
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


@native("FOR_ITER")
def _for_iter(action, stack, null):
    """The next item of an iterator the trace could not see into (Note [Breaks in loops])."""
    try:
        stack.append(next(stack[-1]))
        return action.next_offset
    except StopIteration:
        if VERSION >= (3, 12):
            stack.append(null)  # the END_FOR at the target pops the iterator and this
        else:
            stack.pop()
        return action.inst.argval


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


