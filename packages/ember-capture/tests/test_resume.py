"""Resume functions (Note [Resume functions]) on plain Python: restore stack and locals, jump."""
import dis
import sys
import types

from ember_capture.resume import parse_exception_table, resume_code


def _after_first_call(fn):
    insts = list(dis.get_instructions(fn))
    call = next(i for i in insts if i.opname == "CALL")
    return insts[insts.index(call) + 1].offset


def double(a):
    return a * 2


def fails(b):
    raise ValueError(b)


def with_try(x, y):
    a = x + 1
    try:
        b = double(a)
        c = fails(b)
    except ValueError:
        c = -100
    return a + c + y


def test_resume_inside_try_block_keeps_handlers():
    code = resume_code(with_try.__code__, _after_first_call(with_try), (False,), ("b", "c"))
    fn = types.FunctionType(code, globals(), "resumed")
    assert fn(1, 2, 2, None, None, 10) == with_try(1, 2) == -96
    assert len(parse_exception_table(code.co_exceptiontable)) == len(parse_exception_table(with_try.__code__.co_exceptiontable))


def make_closure():
    z = 5

    def inner(x):
        w = double(x)
        return w + z

    return inner


def test_resume_with_free_variables():
    inner = make_closure()
    code = resume_code(inner.__code__, _after_first_call(inner), (False,), ("w",))
    fn = types.FunctionType(code, globals(), "resumed", None, inner.__closure__)
    assert fn(3, None, 6) == inner(3) == 11


def nested_call(x):
    return max(double(x), 1) + x


def test_resume_restores_null_and_callable_on_stack():
    # Below the pending call's arguments CPython keeps NULL, max (3.11, 3.12) or max, NULL (3.13).
    null_mask = (False, True, False) if sys.version_info >= (3, 13) else (True, False, False)
    offset = _after_first_call(nested_call)
    code = resume_code(nested_call.__code__, offset, null_mask, ())
    fn = types.FunctionType(code, globals(), "resumed")
    assert fn(4, max, 8) == nested_call(4) == 12


def test_resume_of_resume_gets_fresh_stack_names():
    first = resume_code(nested_call.__code__, _after_first_call(nested_call), (True, False, False), ())
    second = resume_code(first, _after_first_call(nested_call) + 0, (True, False, False), ())
    assert len(set(second.co_varnames)) == len(second.co_varnames)
