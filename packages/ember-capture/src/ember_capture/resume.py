"""Resume functions: a copy of a code object that restores a stack and locals, then jumps.

Note [Resume functions]: after a graph break at instruction I, execution continues in a
function whose arguments are every local of the original frame, then the live stack values.
Its code is the original bytecode with a prologue prepended::

    COPY_FREE_VARS n          (if the code has free variables)
    RESUME 0
    DELETE_FAST x             (for each local that was unbound at I)
    LOAD_FAST __stack0 / PUSH_NULL ...   (rebuild the value stack)
    EXTENDED_ARG, EXTENDED_ARG, JUMP_FORWARD -> I

Jumps in 3.11/3.12 bytecode are relative, so the original body is valid as is; the exception
table is shifted by the prologue's length and the line table gets "no location" entries for
the prologue. Free-variable opargs index "locals plus" and are renumbered for the new layout.

Note [Resuming with cells]: a frame with cell variables (captured by inner functions) resumes
with its cells as *free* variables: the resume code has ``co_freevars = cellvars + freevars``
and no cellvars, and its function is called with those cells passed first (``cells=True``), so
that inner functions made before the break and the resumed code share the same cells. The
cells of a cell-argument keep only their cell: the argument's own slot is renamed and unused.
"""
from __future__ import annotations

import dis
import sys
import types

_OP = dis.opmap
_DEREF_OPS = {_OP[n] for n in ("LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "DELETE_DEREF",
                               "LOAD_CLASSDEREF", "MAKE_CELL") if n in _OP}
CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08
_CELL_LOAD_OPS = {_OP["LOAD_FAST"]} if sys.version_info >= (3, 13) else set()
_CELL_PAIR_OPS = {_OP[n] for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST") if n in _OP}


def _names_cell(code, oparg: int, freevars: tuple) -> bool:
    return code._varname_from_oparg(oparg) in freevars


def _cell_in_pair(code, oparg: int, freevars: tuple) -> bool:
    return _names_cell(code, oparg >> 4, freevars) or _names_cell(code, oparg & 15, freevars)


STACK_PREFIX = "__stack"  # a resume function's arguments that carry the value stack


class CannotResume(Exception):
    pass


def resume_code(code: types.CodeType, target: int, null_mask: tuple, unbound: tuple) -> types.CodeType:
    varnames = code.co_varnames
    prefix = STACK_PREFIX
    while any(n.startswith(prefix) for n in varnames):
        prefix += "_"
    stack_names = tuple(f"{prefix}{i}" for i, is_null in enumerate(null_mask) if not is_null)
    freevars = code.co_cellvars + code.co_freevars  # Note [Resuming with cells]
    new_varnames = tuple(f"{prefix}cellarg_{n}" if n in code.co_cellvars else n for n in varnames) + stack_names
    ops = []
    if freevars:
        ops.append((_OP["COPY_FREE_VARS"], len(freevars)))
    ops.append((_OP["RESUME"], 0))
    for name in unbound:
        ops.append((_OP["DELETE_FAST"], varnames.index(name)))
    k = 0
    for is_null in null_mask:
        if is_null:
            ops.append((_OP["PUSH_NULL"], 0))
        else:
            idx = len(varnames) + k
            if idx > 255:
                raise CannotResume("too many locals")
            ops.append((_OP["LOAD_FAST"], idx))
            k += 1
    delta = target // 2  # the body starts right after the jump, so the jump skips `target` bytes
    ops += [(_OP["EXTENDED_ARG"], (delta >> 16) & 0xFF), (_OP["EXTENDED_ARG"], (delta >> 8) & 0xFF),
            (_OP["JUMP_FORWARD"], delta & 0xFF)]
    prologue = bytes(b for pair in ops for b in pair)
    body = _renumber_derefs(code, len(new_varnames), freevars)
    units = len(prologue) // 2
    return code.replace(
        co_code=prologue + body,
        co_varnames=new_varnames,
        co_cellvars=(),
        co_freevars=freevars,
        co_argcount=len(varnames) + len(stack_names),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_nlocals=len(varnames) + len(stack_names),
        co_flags=code.co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
        co_stacksize=code.co_stacksize + 2,
        co_linetable=_no_location(units) + code.co_linetable,
        co_exceptiontable=_shift_exception_table(code.co_exceptiontable, units),
        co_name=f"__resume_{code.co_name}_at_{target}",
        co_qualname=f"__resume_{code.co_qualname}_at_{target}",
    )


def _renumber_derefs(code: types.CodeType, n_locals: int, freevars: tuple) -> bytes:
    """Deref opargs index "locals plus": old index -> name -> its slot among the new free
    variables. MAKE_CELL (before any resume target) becomes a NOP. From 3.13 on, LOAD_FAST of
    a cell's slot stands for LOAD_CLOSURE and is renumbered the same way."""
    out = bytearray(code.co_code)
    for i in range(0, len(out), 2):
        if out[i] in _CELL_PAIR_OPS and _cell_in_pair(code, out[i + 1], freevars):
            raise CannotResume("a packed pair of locals names a cell")
        if out[i] not in _DEREF_OPS and not (out[i] in _CELL_LOAD_OPS
                                             and _names_cell(code, out[i + 1], freevars)):
            continue
        if i >= 2 and out[i - 2] == _OP["EXTENDED_ARG"]:
            raise CannotResume("free variable index too large")
        if out[i] == _OP.get("MAKE_CELL"):
            out[i], out[i + 1] = _OP["NOP"], 0
            continue
        new = n_locals + freevars.index(code._varname_from_oparg(out[i + 1]))
        if new > 255:
            raise CannotResume("free variable index too large")
        out[i + 1] = new
    return bytes(out)


def _no_location(units: int) -> bytes:
    out = bytearray()
    while units > 0:
        n = min(units, 8)
        out.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return bytes(out)


def _read_varint(data, i):
    b = data[i]
    value = b & 63
    while b & 64:
        i += 1
        b = data[i]
        value = (value << 6) | (b & 63)
    return value, i + 1


def _write_varint(value: int, first: bool) -> bytearray:
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(c | 64 for c in chunks[:-1]) + bytearray([chunks[-1]])
    if first:
        out[0] |= 128
    return out


def parse_exception_table(data: bytes):
    entries, i = [], 0
    while i < len(data):
        start, i = _read_varint(data, i)
        length, i = _read_varint(data, i)
        target, i = _read_varint(data, i)
        depth_lasti, i = _read_varint(data, i)
        entries.append((start, length, target, depth_lasti))
    return entries


def _shift_exception_table(data: bytes, units: int) -> bytes:
    out = bytearray()
    for start, length, target, depth_lasti in parse_exception_table(data):
        out += _write_varint(start + units, True)
        out += _write_varint(length, False)
        out += _write_varint(target + units, False)
        out += _write_varint(depth_lasti, False)
    return bytes(out)
