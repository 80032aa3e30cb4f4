"""Opcode handlers: stack shuffling, constants, locals, globals, cells, attributes."""
from __future__ import annotations

import builtins

from . import semantics as S
from .builder import wrap
from .config import Unsupported
from .frame import op, since, until
from .variables import NULL, ConstVar, ObjVar, SuperVar, Var


@op("NOP", "RESUME", "PRECALL", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS", "CACHE")
def _nop(fr, inst):
    pass


@op("POP_TOP")
def _pop_top(fr, inst):
    fr.pop()


@op("PUSH_NULL")
def _push_null(fr, inst):
    fr.push(NULL)


@op("COPY")
def _copy(fr, inst):
    fr.push(fr.stack[-inst.arg])


@op("SWAP")
def _swap(fr, inst):
    s = fr.stack
    s[-1], s[-inst.arg] = s[-inst.arg], s[-1]


@op("LOAD_CONST")
def _load_const(fr, inst):
    fr.push(ConstVar(inst.argval))


@op("RETURN_CONST", versions=since((3, 12)))
def _return_const(fr, inst):
    fr.return_(ConstVar(inst.argval))


@op("RETURN_VALUE")
def _return_value(fr, inst):
    fr.return_(fr.pop())


@op("LOAD_FAST", versions=until((3, 12)))
@op("LOAD_FAST_CHECK")
def _load_fast(fr, inst):
    try:
        fr.push(fr.locals[inst.argval])
    except KeyError:
        raise Unsupported("unbound_local", f"local variable {inst.argval!r} is unbound") from None


@op("LOAD_FAST_AND_CLEAR", versions=since((3, 12)))
def _load_fast_and_clear(fr, inst):
    fr.push(fr.locals.pop(inst.argval, NULL))


@op("STORE_FAST")
def _store_fast(fr, inst):
    v = fr.pop()
    if v is NULL:  # 3.12 comprehensions restore a local that was unbound
        fr.locals.pop(inst.argval, None)
    else:
        fr.locals[inst.argval] = v


@op("DELETE_FAST")
def _delete_fast(fr, inst):
    fr.locals.pop(inst.argval, None)


@op("LOAD_GLOBAL", versions=until((3, 12)))
def _load_global(fr, inst):
    if inst.arg & 1:
        fr.push(NULL)
    fr.push(load_global(fr, inst.argval))


def load_global(fr, name) -> Var:
    tr = fr.tr
    overlay = tr.global_writes.get((id(fr.globals), name))
    if overlay is not None:
        return overlay
    g = fr.globals
    tr.check_native(g, f"reading global {name!r}", refers=False)  # Note [Mutated input dicts]: `mod.__dict__[k] = v`
    if name in g:
        return wrap(tr, g[name], f"{tr.globals_ref(g)}[{name!r}]", name)
    if hasattr(builtins, name):
        # A global defined later would shadow the builtin: guard that it is still absent.
        tr.guards.add(tr.globals_ref(g), f"{name!r} not in X", f"{name!r} is not a global (builtin used)")
        return S.constant_like(getattr(builtins, name))
    raise Unsupported("name_error", f"name {name!r} is not defined")


@op("STORE_GLOBAL")
def _store_global(fr, inst):
    fr.tr.record_global_write(fr.globals, inst.argval, fr.pop())


@op("LOAD_DEREF", "LOAD_CLASSDEREF")
def _load_deref(fr, inst):
    cell = fr.cells[inst.argval]
    if cell.contents is None:
        raise Unsupported("unbound_local", f"free variable {inst.argval!r} is unbound")
    fr.push(cell.contents)


@op("STORE_DEREF")
def _store_deref(fr, inst):
    cell = fr.cells[inst.argval]
    value = fr.pop()
    if getattr(cell, "real_cell", None) is not None:  # a real cell: written after the graph runs
        fr.tr.record_attr_write(ObjVar(cell.real_cell, cell.cell_source), "cell_contents", value)
    cell.contents = value


@op("LOAD_CLOSURE")
def _load_closure(fr, inst):
    fr.push(fr.cells[inst.argval])


@op("LOAD_ATTR", versions=((3, 11),))
def _load_attr_311(fr, inst):
    fr.push(S.getattr_var(fr, fr.pop(), inst.argval))


@op("LOAD_METHOD", versions=((3, 11),))
def _load_method(fr, inst):
    fr.push(NULL)
    fr.push(S.getattr_var(fr, fr.stack.pop(-2), inst.argval))


@op("LOAD_ATTR", versions=((3, 12),))
def _load_attr_312(fr, inst):
    obj = fr.pop()
    if inst.arg & 1:
        fr.push(NULL)
    fr.push(S.getattr_var(fr, obj, inst.argval))


@op("STORE_ATTR")
def _store_attr(fr, inst):
    obj = fr.pop()
    value = fr.pop()
    S.setattr_var(fr, obj, inst.argval, value)


@op("LOAD_ASSERTION_ERROR")
def _load_assertion_error(fr, inst):
    fr.push(ConstVar(AssertionError))


@op("LOAD_SUPER_ATTR", versions=((3, 12),))
def _load_super_attr(fr, inst):
    attr = super_attr(fr, inst)
    if inst.arg & 1:
        fr.push(NULL)
    fr.push(attr)


def super_attr(fr, inst) -> Var:
    """Pop LOAD_SUPER_ATTR's super, class and self; the attribute it looks up."""
    self_var = fr.pop()
    cls = fr.pop()
    super_fn = fr.pop()
    if not (isinstance(super_fn, ObjVar) and super_fn.value is super):
        raise Unsupported("unsupported_call", "LOAD_SUPER_ATTR with a shadowed super")
    return S.getattr_var(fr, SuperVar(S.const_value(cls), self_var), inst.argval)
