"""The kinds of graph break: one enumeration, each kind with a hint the user can act on.

`Unsupported(kind, ...)` takes a member or its value (either spelling, ``data_dependent`` or
``data-dependent``); an unknown kind is a bug in capture and raises. The values are stable:
explain() reports them and tests key on them (a `BreakKind` equals its string value).
"""
from __future__ import annotations

import enum

REPORT = "please report it, with this message, on ember's issue tracker"


class BreakKind(enum.StrEnum):
    """Why capture stopped. ``kind.hint`` says what the user can do about it."""

    hint: str

    def __new__(cls, value: str, hint: str) -> "BreakKind":
        member = str.__new__(cls, value)
        member._value_ = value
        member.hint = hint
        return member

    DATA_DEPENDENT = ("data_dependent", "Python control flow or a Python value from a tensor's data: use "
                      "tensor ops (torch.where, masks) or move .item()/.tolist() out of the compiled code")
    PRINT = ("print", "print() runs natively between graphs; remove it from the hot path")
    SIDE_EFFECT = ("side_effect", "a side effect capture cannot replay; move it out of the compiled "
                   "function")
    UNSUPPORTED_CALL = ("unsupported_call", "a call capture cannot trace into; wrap the callee in "
                        "ember.disable, or compute it outside the compiled function")
    SKIPPED_FUNCTION = ("skipped_function", "library code is called natively, not inlined; nothing to "
                        "do unless it holds tensor math, then move that into your own function")
    DISABLED = ("disabled", "the callee is marked ember.disable; remove the mark to compile it")
    UNSUPPORTED_ATTR = ("unsupported_attr", "an attribute capture cannot model; read it outside the "
                        "compiled function and pass the value in")
    UNSUPPORTED_VALUE = ("unsupported_value", "a value capture cannot model here; pass a tensor or a "
                         "constant (int, float, bool, str, tuple) instead")
    UNSUPPORTED_OP = ("unsupported_op", "a torch op without a fake (meta) implementation or with a "
                      "non-tensor result; it runs natively")
    UNSUPPORTED_OPERATOR = ("unsupported_operator", "a Python operator on values capture cannot model; "
                            "convert the operands to tensors or constants first")
    UNSUPPORTED_OPCODE = ("unsupported_opcode", "a bytecode construct capture does not support yet "
                          "(async, a class body, an exception inside a with-block, ...); move it out of the compiled function")
    UNSUPPORTED_ITER = ("unsupported_iter", "iteration over an object capture cannot model; iterate over "
                        "a list, tuple, dict, range or tensor")
    UNSUPPORTED_SUBSCRIPT = ("unsupported_subscript", "indexing capture cannot model; index a list, "
                             "tuple, dict or tensor")
    UNSUPPORTED_CONTAINER = ("unsupported_container", "a container operation capture cannot model; "
                             "use a list, tuple or dict")
    UNSUPPORTED_CONTEXT = ("unsupported_context", "a with-block over a context manager capture does not "
                           "know; move the block out of the compiled function")
    UNSUPPORTED_INPUT = ("unsupported_input", "an input capture cannot lift into a graph (tensor "
                         "subclass, sparse layout); pass a plain dense tensor")
    UNSUPPORTED_ARG = ("unsupported_arg", "an argument a torch op cannot take in a graph; pass a tensor "
                       "or a constant")
    UNSUPPORTED_PYTHON = ("unsupported_python", "this CPython version's bytecode is not supported by "
                          "capture; run on a supported version (see ember-capture's README)")
    OPTIMIZER_STATE = ("optimizer_state", "optimizer state the step would replace or that is not "
                       "tensors runs natively (Note [optimizer steps]); keep state in tensors")
    OPTIMIZER_HOOKS = ("optimizer_hooks", "an optimizer with step hooks steps natively; remove the "
                       "hooks to capture its step")
    GENERATOR = ("generator", "generators and coroutines are run natively; return a list instead")
    UNBOUND_LOCAL = ("unbound_local", "a local variable read before it is assigned on this path")
    NAME_ERROR = ("name_error", "a name that is not defined when the function is compiled")
    IMPORT = ("import", "an import of a module not imported yet; import it at the top of the file")
    RAISE = ("raise", "an exception the traced code raises and does not catch: the call or operation "
             "that raises it runs natively (a graph break), and the exception reaches your code as in eager")
    RECURSION = ("recursion", "recursion too deep to inline; compile the recursive function's callers "
                 "only, or make it iterative")
    MODULE_HOOKS = ("module_hooks", "a module with hooks runs through Module.__call__; remove the hooks "
                    "to capture its forward")
    CANNOT_RESUME = ("cannot_resume", "capture could not continue after a break here (a value on the "
                     "stack or in a local that cannot be rebuilt, such as a generator); the function runs eagerly")
    TOO_MANY_BREAKS = ("too_many_breaks", "too many graph breaks in one function; remove the breaks "
                       "explain() lists")
    TRACE_ERROR = ("trace_error", "the code raised while capture traced it; check that it runs eagerly "
                   "with these inputs")
    INTERNAL = ("internal", f"a bug in ember, not in your code: {REPORT} (EMBER_RAISE_INTERNAL=1 "
                "raises it with ember's traceback)")

    @classmethod
    def of(cls, kind: "str | BreakKind") -> "BreakKind":
        """The member for `kind`, in either spelling; a ValueError for a kind not listed here."""
        if isinstance(kind, cls):
            return kind
        try:
            return cls(str(kind).replace("-", "_"))
        except ValueError:
            raise ValueError(f"unknown graph-break kind {kind!r}; ember_capture.kinds.BreakKind lists "
                             f"the valid ones") from None
