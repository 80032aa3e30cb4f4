"""Errors raised by ember_autograd. Each carries a stable `kind`, the op and the user's line."""
from __future__ import annotations

import enum


class ErrorKind(enum.StrEnum):
    """Why this layer could not lower a graph: one enumeration, each kind with a hint the user
    can act on. Spelled like ember_capture's graph-break kinds (``data_dependent``); the old
    spelling (``data-dependent``) is accepted by `ErrorKind.of`."""

    hint: str

    def __new__(cls, value: str, hint: str) -> "ErrorKind":
        member = str.__new__(cls, value)
        member._value_ = value
        member.hint = hint
        return member

    DATA_DEPENDENT = ("data_dependent", "an op whose result depends on tensor data; compute it outside "
                      "the compiled code or use an op with a static result")
    DYNAMIC_OUTPUT_SHAPE = ("dynamic_output_shape", "an op whose output shape depends on tensor data "
                            "(nonzero, boolean masks); use masks of static shape (torch.where)")
    NO_FAKE_KERNEL = ("no_fake_kernel", "a custom op without a fake (meta) kernel; register one with "
                      "torch.library.register_fake")
    ALIASED_MUTATED_INPUT = ("aliased_mutated_input", "an input mutated in place shares memory with another "
                             "input; pass independent tensors (clone one)")
    WRITTEN_SAVED_INPUT = ("written_saved_input", "an input with autograd history is written in place and "
                           "that history saved it (exp, sigmoid, scatter_reduce save their result); write a clone")
    STALE_INPUT_HISTORY = ("stale_input_history", "an input's autograd history saved a value that was "
                           "written in place since (eager raises if the loss reaches it); write a clone")
    OVERLAPPING_MUTATED_INPUT = ("overlapping_mutated_input", "an input whose elements share memory (an "
                                 "expanded tensor) is written in place; pass a tensor of its own (.clone())")
    ALIASED_ARGUMENTS = ("aliased_arguments", "an in-place op writes an argument that shares memory "
                         "with another of its arguments; pass independent tensors (clone one)")
    BAD_CALL = ("bad_call", "a call the graph cannot be traced through; check the captured graph")
    BAD_INPUT = ("bad_input", "an input of a type the lowering does not take; pass tensors or numbers")
    METADATA_MUTATION = ("metadata_mutation", "an in-place change of an input's shape or strides "
                         "(resize_, as_strided_, t_); return a new tensor instead")
    MUTATED_GRAD_INPUT = ("mutated_grad_input", "an in-place change of an input that requires grad; "
                          "mutate a copy, or do it under torch.no_grad()")
    MUTATION_THROUGH_VIEW = ("mutation_through_view", "an in-place change through a view that cannot be "
                             "replayed; mutate the base tensor")
    NO_FUNCTIONAL_VARIANT = ("no_functional_variant", "an in-place op with no out-of-place twin; use "
                             "the out-of-place op")
    RESIZING_MUTATION = ("resizing_mutation", "an in-place op that resizes its input; return a new tensor")
    STORAGE_LAYOUT = ("storage_layout", "as_strided of a computed tensor that the trace lays out in memory "
                      "otherwise than eager does; take it of a contiguous tensor (.contiguous() first)")
    TORCH_OP_FAILED = ("torch_op_failed", "a torch op raised while traced; check that the code runs "
                       "eagerly with these inputs")
    UNLIFTED_PARAMETER = ("unlifted_parameter", "a parameter read as a module attribute, not a graph "
                          "input; parameters must be lifted to placeholders")
    UNTRACKED_TENSOR = ("untracked_tensor", "a tensor made outside the traced graph and used in it; "
                        "pass it as an input")
    INFERENCE_ONLY = ("inference_only", "not an error: a graph that differentiates nothing updates "
                      "inputs that require grad under no_grad (an optimizer step); compiled for inference")
    NOT_FUNCTIONAL = ("not_functional", "a bug in ember: a lowered graph is not functional; please "
                      "report it with this message")

    @classmethod
    def of(cls, kind: "str | ErrorKind") -> "ErrorKind":
        """The member for `kind`, in either spelling; a ValueError for a kind not listed here."""
        if isinstance(kind, cls):
            return kind
        try:
            return cls(str(kind).replace("-", "_"))
        except ValueError:
            raise ValueError(f"unknown ember_autograd error kind {kind!r}; ErrorKind lists the valid "
                             "ones") from None


class AotError(Exception):
    """Base class. `kind` (an `ErrorKind`) is stable (the facade keys its fallback on it); `op`
    names the ATen or torch-level op; `stack_trace` is the user's source line when known."""

    def __init__(self, kind: ErrorKind | str, reason: str, *, op: object = None,
                 stack_trace: str | None = None):
        kind = self.kind = ErrorKind.of(kind)
        self.reason = reason
        self.op = op
        self.stack_trace = stack_trace
        where = f"\n  at user code:\n{_indent(stack_trace)}" if stack_trace else ""
        what = f" in {op}" if op is not None else ""
        super().__init__(f"[{kind}]{what}: {reason}{where}")


class AotTraceError(AotError):
    """An op the tracer cannot turn into a static functional ATen graph (data-dependent output,
    unsupported mutation, operator without a fake kernel...)."""


class SpecError(AotError, ValueError):
    """A graph broke the functional-graph contract (see `verify_functional`): this layer's
    boundary check (ARCHITECTURE.md, "Every boundary can be checked")."""


VerificationError = SpecError  # the former name


def _indent(text: str) -> str:
    lines = text.rstrip().splitlines()[-4:]
    return "\n".join("    " + line for line in lines)
