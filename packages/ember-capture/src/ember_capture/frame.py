"""One symbolic frame: stack, locals, cells, and the loop that dispatches opcode handlers.

Opcode handlers live in tables keyed by CPython version (``HANDLERS[(3, 11)]``), filled by the
``@op`` decorator in the ``ops_*`` modules; a handler that exists in several versions is
registered once for all of them, and a version's differences are separate handlers.

Note [One handler per version]: each handler names the versions it serves (``since((3, 12))``,
``until((3, 12))``, or a tuple); registering a second handler for the same opcode and version
raises, so no handler wins silently by import order. A CPython version not in
``SUPPORTED_VERSIONS`` is never traced: ``ember_capture.api`` runs the function eagerly with
one warning naming the version.
"""
from __future__ import annotations

import dis
import os
import sys

from .config import Unsupported
from .lazy import PASS_THROUGH, materialize_stack, unpack_lazy
from .resume import parse_exception_table
from .variables import CellVar, ConstVar, Var

VERSION = sys.version_info[:2]
SUPPORTED_VERSIONS = ((3, 11), (3, 12), (3, 13))
HANDLERS: dict[tuple, dict] = {v: {} for v in SUPPORTED_VERSIONS}


def since(version: tuple) -> tuple:
    """The supported versions from ``version`` on (for ``@op(..., versions=since((3, 12)))``)."""
    return tuple(v for v in SUPPORTED_VERSIONS if v >= version)


def until(version: tuple) -> tuple:
    """The supported versions up to and including ``version``."""
    return tuple(v for v in SUPPORTED_VERSIONS if v <= version)
CO_GENERATOR = 0x20
CO_ASYNC = 0x80 | 0x100 | 0x200  # coroutine, iterable coroutine, async generator


def op(*names, versions=SUPPORTED_VERSIONS):
    """Register the decorated function as the handler of opcodes ``names``. A version has one
    handler per opcode: registering a second one is a bug (Note [One handler per version])."""
    def deco(fn):
        for v in versions:
            for n in names:
                if n in HANDLERS[v]:
                    raise AssertionError(f"two handlers for {n} on {v}: {HANDLERS[v][n].__name__}, {fn.__name__}")
                HANDLERS[v][n] = fn
        return fn
    return deco


class CodeInfo:
    """Decoded instructions of a code object, with offset -> index."""

    _cache: dict = {}

    def __init__(self, code):
        self.code = code
        self.insts = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        self.index = {inst.offset: k for k, inst in enumerate(self.insts)}
        self.loops = [(i.argval, i.offset) for i in self.insts
                      if i.opcode in dis.hasjrel and isinstance(i.argval, int) and i.argval < i.offset]
        # (start, end, target, depth, lasti) in byte offsets: where an exception at an offset goes
        self.handlers = [(2 * start, 2 * (start + length), 2 * target, dl >> 1, bool(dl & 1))
                         for start, length, target, dl in parse_exception_table(code.co_exceptiontable)]

    @classmethod
    def of(cls, code) -> "CodeInfo":
        info = cls._cache.get(code)
        if info is None:
            info = cls._cache[code] = cls(code)
        return info

    def in_loop(self, offset) -> bool:
        return any(start <= offset <= end for start, end in self.loops)


class Frame:
    def __init__(self, tr, code, globals_, locals_: dict, freevars: dict, parent=None, self_var=None):
        if code.co_flags & CO_ASYNC:
            raise Unsupported("generator", f"{code.co_name} is a coroutine")
        # A generator's frame runs up to each yield when its next item is asked for, and
        # pauses there (Note [lazy iterators]); its yields are kept in a list.
        self.yields = [] if code.co_flags & CO_GENERATOR else None
        self.paused = False
        self.tr = tr
        self.code = code
        self.info = CodeInfo.of(code)
        self.globals = globals_
        self.locals: dict[str, Var] = locals_
        self.cells: dict[str, CellVar] = dict(freevars)
        for name in code.co_cellvars:
            self.cells[name] = CellVar(self.locals.pop(name, None))
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.self_var = self_var  # first argument, for zero-argument super()
        self.stack: list[Var] = []
        self.ip = 0
        self.inst = None
        self.kw_names = ()
        self.lineno = code.co_firstlineno
        self.result = None
        self.done = False

    # -- stack ----------------------------------------------------------------------------
    def push(self, v: Var):
        self.stack.append(v)

    def pop(self) -> Var:
        return self.stack.pop()

    def popn(self, n: int) -> list[Var]:
        if n == 0:
            return []
        vals = self.stack[-n:]
        del self.stack[-n:]
        return vals

    def jump(self, offset: int):
        self.ip = self.info.index[offset]

    def user_stack(self) -> list[tuple[str, int, str]]:
        """(filename, line, function) of this frame and the frames that inlined it, outermost first."""
        out, fr = [], self
        while fr is not None:
            out.append((fr.code.co_filename, fr.lineno, fr.code.co_name))
            fr = fr.parent
        return out[::-1]

    def return_(self, v: Var):
        self.result = v
        self.done = True

    # -- loop -----------------------------------------------------------------------------
    def run(self) -> Var:
        table = HANDLERS[VERSION]
        insts = self.info.insts
        tr = self.tr
        is_root = self.parent is None
        lazy = is_root and tr.lazy_locals
        while not self.done:
            inst = insts[self.ip]
            self.inst = inst
            lineno = inst.positions.lineno if inst.positions else None
            if lineno is not None:
                self.lineno = lineno
            tr.graph.location = self
            if is_root and inst.offset in tr.break_offsets:
                raise StopAtBreak(self, inst)
            if lazy and inst.opname not in PASS_THROUGH:  # Note [Lazy locals]
                if inst.opname == "UNPACK_SEQUENCE" and unpack_lazy(self, inst):
                    self.ip += 1
                    continue
                materialize_stack(self.stack)
            self.ip += 1
            handler = table.get(inst.opname)
            try:
                if handler is None:
                    raise Unsupported("unsupported_opcode", f"opcode {inst.opname} is not supported")
                handler(self, inst)
            except Unsupported as e:
                raise e.with_location(self.code.co_filename, lineno, self.code.co_qualname)
            except StopAtBreak:
                raise
            except TracedRaise as e:
                if not self.unwind(e):
                    if self.parent is None or self.yields is not None:
                        # Not caught in the traced frames (or escaping a generator, which runs
                        # to completion when called): the raise is not traced.
                        raise Unsupported("raise", f"{type(e.exc).__name__} raised and not caught in the traced "
                                          "code").with_location(self.code.co_filename, lineno) from None
                    raise
            except RecursionError:
                raise Unsupported("recursion", "recursion too deep while tracing").with_location(
                    self.code.co_filename, lineno, self.code.co_qualname) from None
            except Exception as e:  # a bug in a handler, or an error the user's code raises
                if raised_by_capture(e):  # Note [internal errors] (config.py)
                    if tr.config.raise_internal:
                        raise
                    raise Unsupported("internal", f"{type(e).__name__} in ember_capture while tracing "
                                      f"{inst.opname}: {e}").with_location(self.code.co_filename, lineno) from e
                raise Unsupported("trace_error", f"{type(e).__name__} while tracing {inst.opname}: {e}").with_location(
                    self.code.co_filename, lineno, self.code.co_qualname) from e
            if self.paused:
                self.paused = False
                return None
        return self.result


    def unwind(self, e: "TracedRaise") -> bool:
        """Python's exception table: go to the handler that covers the current instruction."""
        offset = self.inst.offset
        for start, end, target, depth, lasti in self.info.handlers:
            if start <= offset < end:
                del self.stack[depth:]
                if lasti:
                    self.push(ConstVar(offset))
                self.push(ConstVar(e.exc))
                self.jump(target)
                return True
        return False


_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def raised_by_capture(exc: BaseException) -> bool:
    """Whether capture's own code raised `exc` (a bug), rather than a function it called: the
    innermost frame of its traceback is in this package. Errors of the user's program reach
    the handlers from the functions they run (torch ops, user code run natively) or are turned
    into `Unsupported` by them (a constant operator that raises, a missing key)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename.startswith(_OWN_DIR)


class TracedRaise(Exception):
    """Note [Traced exceptions]: an exception that the traced code raises with ``raise`` (its
    condition is decided by guarded values, so it is raised on every call the entry serves).
    It unwinds through the exception tables of the traced frames, innermost first, to a
    handler (``except IndexError:``, the loop of ``Sequence.__iter__``); uncaught at the root,
    it is not traced (a graph break at the call that raised, or an eager frame). Exceptions of
    capture itself and of native trace-time calls are never caught by traced handlers."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class StopAtBreak(Exception):
    """The root frame reached an instruction marked as a graph break."""

    def __init__(self, frame, inst):
        self.frame = frame
        self.inst = inst


__all__ = ["Frame", "op", "since", "until", "HANDLERS", "StopAtBreak", "TracedRaise", "CodeInfo", "VERSION"]
