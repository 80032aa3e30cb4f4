"""An entry's source reads and simple checks as one native program (Note [Native source reads]
in native_guards.cpp): `Program.add` takes a guarded source (as the entry reads it, from the
locals of its prefixes) with its checks, and says whether the program can run them exactly as
the generated Python does; what it cannot stays in Python.
"""
from __future__ import annotations

import ast
import re
import struct

GETATTR, GETITEM, CONST, ID, IS, PIN, NOT_IN_DICT, NOT_IN, GET_IS, LIST_EQ, TENSOR, TYPE, DISTINCT, EQ = range(1, 15)

_BASE = re.compile(r"^(L|_s\d+|_c\d+)")
_ATTR = re.compile(r"^\.([A-Za-z_]\w*)")
_STR_KEY = re.compile(r"^\['([A-Za-z0-9_.]*)'\]")
_INT_KEY = re.compile(r"^\[(-?\d+)\]")
_CONST = r"(_c\d+|None|True|False)"
_CHECKS = [  # (pattern over one check, op): the checks whose meaning the native ops reproduce
    (re.compile(rf"^X is {_CONST}$"), IS),
    (re.compile(r"^type\(X\) is (_c\d+)$"), TYPE),
    (re.compile(r"^id\(X\) == (\d+)$"), ID),
    (re.compile(r"^'([A-Za-z_]\w*)' not in X\.__dict__$"), NOT_IN_DICT),
    (re.compile(r"^'([A-Za-z_]\w*)' not in X$"), NOT_IN),
    (re.compile(rf"^X\.get\('([A-Za-z_]\w*)'\) is {_CONST}$"), GET_IS),
    (re.compile(r"^list\(X\) == (\[[^\]]*\])$"), LIST_EQ),
    # an exact int, str or float by value (a float's NaN and zeros have checks of their own)
    (re.compile(r"^type\(X\) is (int|str|float) and X == (_c\d+)$"), EQ),
]


class Program:
    """The native part of an entry's guards: ops over registers (register 0 is L)."""

    def __init__(self, ns):
        self.ns = ns
        self.code: list[int] = []
        self.consts: list = []
        self._const_index: dict = {}
        self.regs: dict[str, int] = {"L": 0}  # a local or an intermediate expression -> register
        self.tensors: list[tuple[int, object, tuple]] = []  # (code position, type, record)

    def const(self, obj) -> int:
        key = (type(obj), obj) if isinstance(obj, (str, int)) and type(obj) in (str, int) else ("id", id(obj))
        i = self._const_index.get(key)
        if i is None:
            i = self._const_index[key] = len(self.consts)
            self.consts.append(obj)
        return i

    def _value(self, name: str):
        return {"None": None, "True": True, "False": False}[name] if name in ("None", "True", "False") else self.ns[name]

    def read_ops(self, local: str, expr: str) -> list | None:
        """Ops reading `expr` (a base local or constant, then attributes and subscripts) into a
        new register for `local`; None when the expression has another form."""
        m = _BASE.match(expr)
        if m is None:
            return None
        base, rest, ops, regs = m.group(1), expr[m.end():], [], dict(self.regs)
        if base.startswith("_c"):
            if base not in self.ns:
                return None
            if base not in regs:
                regs[base] = len(regs)
                ops.append((CONST, regs[base], ("const", self.ns[base]), 0))
        elif base not in regs:
            return None  # a local the program does not hold
        prefix = base
        while rest:
            for pattern, op, convert in ((_ATTR, GETATTR, str), (_STR_KEY, GETITEM, str), (_INT_KEY, GETITEM, int)):
                m = pattern.match(rest)
                if m:
                    break
            else:
                return None
            step, rest = m.group(0), rest[m.end():]
            src = regs[prefix]
            prefix += step
            if prefix in regs and rest:
                continue  # an intermediate read once (`_s9._parameters` for its weight and bias)
            dst = regs.setdefault(prefix if rest else local, len(regs))
            ops.append((op, dst, src, ("const", convert(m.group(1)))))
        if base.startswith("_c") and expr == base:
            regs[local] = regs[base]
        self.regs = regs
        return ops

    def check_ops(self, reg: int, checks: list[str]) -> list | None:
        ops, absent = [], {NOT_IN_DICT: [], NOT_IN: []}  # absent names: one op each, the dict read once
        for check in checks:
            for pattern, op in _CHECKS:
                m = pattern.match(check)
                if m:
                    break
            else:
                return None
            arg = m.group(1)
            if op == ID:
                ops.append((ID, reg, int(arg), 0))
            elif op == EQ:  # the op compares exact types: the constant must be of the named one
                value = self._value(m.group(2))
                if type(value).__name__ != arg or type(value) not in (int, str, float):
                    return None
                ops.append((EQ, reg, ("const", value), 0))
            elif op in (IS, TYPE):
                ops.append((op, reg, ("const", self._value(arg)), 0))
            elif op in (NOT_IN_DICT, NOT_IN):
                absent[op].append(arg)
            elif op == GET_IS:
                ops.append((GET_IS, reg, ("const", arg), ("const", self._value(m.group(2)))))
            else:
                ops.append((LIST_EQ, reg, ("const", ast.literal_eval(arg)), 0))
        return ops + [(op, reg, ("const", tuple(names)), 0) for op, names in absent.items() if names]

    def distinct(self, locals_: list[str]) -> bool:
        """Check that the locals hold pairwise distinct objects; False if one is not held here."""
        if not all(local in self.regs for local in locals_):
            return False
        regs = [self.regs[local] for local in locals_]
        self.code += [DISTINCT, 0, len(regs), 0] + regs + [0] * (-len(regs) % 4)
        return True

    def add(self, local: str, expr: str, checks: list[str], pinned=None, tensor=None) -> bool:
        """Read `expr` into `local` and check it (`pinned`: (a held immutable value whose identity
        stands for the checks, the checks or None where sources read from it are checked too:
        undecided when it is not that object); `tensor`: a (type, record) static tensor guard).
        False, with nothing added, when some part has no native op."""
        saved = dict(self.regs)
        ops = self.read_ops(local, expr)
        reg = self.regs.get(local)
        if ops is not None and reg is not None:
            checks_ops = self.check_ops(reg, checks)
            if pinned:
                own = None if pinned[1] is None else self.check_ops(reg, pinned[1])
                checks_ops = [(PIN, reg, ("const", pinned[0]), len(own or ()))] + (own or [])
            if checks_ops is not None:
                for op in ops + checks_ops:
                    self._emit(*op)
                if tensor is not None:
                    self.tensors.append((len(self.code), tensor[0], tensor[1]))
                    self._emit(TENSOR, reg, ("const", tensor[0]), 0)
                return True
        self.regs = saved
        return False

    def _emit(self, op, a, b, c):
        self.code += [op, a, *(self.const(x[1]) if isinstance(x, tuple) else x for x in (b, c))]

    def build(self, outs: list[str], make_spec):
        """The program's arguments for `run_program`, answering the registers of `outs`."""
        records = [record for _, _, record in self.tensors]
        offset = 0
        for (pos, _, record) in self.tensors:  # each record: 5 + 2 * ndim int64s
            self.code[pos + 3] = offset
            offset += 5 + 2 * len(record[2])
        spec = make_spec(records) if records else b""
        pack = lambda xs: struct.pack(f"{len(xs)}q", *xs)  # noqa: E731
        return (pack(self.code), tuple(self.consts), spec, len(self.regs), pack([self.regs[o] for o in outs]))
