"""One trace of one frame: the root symbolic frame, its graph, guards and side effects."""
from __future__ import annotations

import dataclasses
import gc

from . import calls
from . import ops_basic, ops_build, ops_call, ops_flow, ops_313  # noqa: F401  (fill the opcode tables)
from . import autograd_function, items, methods, pyobjects  # noqa: F401  (fill the builtins, value-protocol and call tables)
from .builder import wrap
from .builtins_table import BUILTINS
from .config import CaptureConfig, Unsupported
from .frame import VERSION, Frame, StopAtBreak
from .graph import OutputGraph
from .lazy import LazyVar
from .sizes import ShapePolicy
from .library import inlinable_file
from .guards import Guards, Namespace
from .variables import DictVar, ListVar, ObjVar, Var


@dataclasses.dataclass
class DictChange:
    """A dict from the inputs changed by the trace: its DictVar, its items before the first
    change, and the real object (Note [Mutated input dicts])."""

    var: DictVar
    before: dict
    real: object


@dataclasses.dataclass
class Plan:
    """What a trace decided for the frame: return a value, or break at an instruction."""

    kind: str  # "return" | "break"
    value: Var | None = None
    frame: Frame | None = None
    inst: object = None


class Tracer:
    def __init__(self, code, globals_, closure, L, config: CaptureConfig, break_offsets, arg_names, cell_args=0,
                 lazy_locals=False, shapes: ShapePolicy | None = None):
        self.code = code
        self.lazy_locals = lazy_locals
        self.cell_args = cell_args  # L starts with this many closure cells (Note [Resuming with cells])
        self.root_globals = globals_
        self.closure = closure
        self.L = L
        self.config = config
        self.break_offsets = frozenset(break_offsets)
        self.arg_names = arg_names
        self.version = VERSION
        self.ns = Namespace()
        self.ns["G"] = globals_  # generated guards and entries read globals through G
        self.guards = Guards(self.ns)
        self.graph = OutputGraph(shapes)  # shapes: Note [Dynamic shapes in capture]
        self.builtins = BUILTINS
        self.containers: dict = {}  # id(list, dict or set read from the inputs) -> (object, Var)
        self.attr_writes: dict = {}
        self.attr_write_list: list = []  # (object Var, name, value Var)
        self.global_writes: dict = {}
        self.global_write_list: list = []  # (globals dict, name, value Var)
        self.mutated_lists: dict = {}  # id(ListVar) -> ListVar: Note [Mutated input lists]
        self.mutated_dicts: dict = {}  # id(DictVar) -> DictChange: Note [Mutated input dicts]
        self.input_iterators: list = []  # IterVars of input iterators: Note [Iterators from the inputs]
        self.lru_misses: dict = {}  # id(lru_cache wrapper) -> [its misses after the trace's calls]: Note [lru_cache]
        self.call_effects: list = []  # (Python function, [argument Vars]): called after the graph
        self.handling: list = []  # the exceptions traced except blocks handle, innermost last
        self.root: Frame | None = None
        self.real_cells: dict = {}  # id(cell) -> RealCell
        self.open_contexts: list = []  # autocast regions entered for fake tensors, left in run()

    # -- services for handlers ----------------------------------------------------------
    def globals_ref(self, g) -> str:
        return "G" if g is self.root_globals else self.ns.ref(g)

    def eval_source(self, source: str):
        scope = {k: v for k, v in self.ns.items() if isinstance(k, str)}
        scope.update(L=self.L, G=self.root_globals)
        return eval(source, scope)

    def inline(self, fr, fn, args, kwargs):
        return calls.inline(fr, fn, args, kwargs)

    def real_cell(self, cell, name, source=None):
        """One symbolic cell per real cell, however many closures of the trace share it (a
        write through one is read through the others)."""
        held = self.real_cells.get(id(cell))
        if held is None:
            held = self.real_cells[id(cell)] = calls.RealCell(self, cell, name, source)
        return held

    def call(self, fr, fn, args, kwargs):
        return calls.call(fr, fn, args, kwargs)

    def inlinable(self, fn) -> bool:
        """Whether the Python function `fn` is user or model-library code (Note [Inlining])."""
        return inlinable_file(fn.__code__.co_filename)

    def mark_mutated(self, var: ListVar):
        """Note [Mutated input lists]: a list from the inputs (a frame's argument, a list held by
        an object, the list a loop appends to, passed to a resume function) is changed
        symbolically, then its final contents are written into the same object after the graph
        (``L[k][:] = [...]``), before anything else sees it: a later native call, a resume
        function or the caller. Its identity and its other references are kept."""
        self.mutated_lists.setdefault(id(var), var)

    def mark_dict_mutated(self, var: DictVar):
        """Note [Mutated input dicts]: a dict from the inputs (an argument, a module's cache, a
        global, a closure's, or the dict under a view read from the inputs) is changed
        symbolically: its items before the first change are kept here, and after the graph the
        difference is written into the same object (``del d[k]``, ``d[k] = v``), before anything
        else sees it, in an order that leaves its keys in eager's order (a key deleted and set
        again moves to the end; ``codegen.Rebuilder.dict_writeback``). Its identity and its
        other references are kept. Plain dicts, OrderedDicts, defaultdicts and user subclasses
        of dict that override none of its item methods are modelled (``builder._wrap_dict``); any
        other mapping stays a real object, whose changes are graph breaks.

        Until the write-back the real dict is stale, so native code must not read it while
        tracing. The trace never hands a DictVar to native code: it has no constant value, so
        ``str(d)``, ``json.dumps(d)`` or any library call with it is a graph break, and at a
        break the write-back runs before the native part and the resume function. A view of
        it read from the inputs is a DictViewVar of the same DictVar (``builder._wrap_view``).
        The places that read a real object natively (``len``, ``in`` and items of a Mapping,
        an attribute read through a foreign ``__getattribute__``, a container's C method on a
        real object) ask ``check_native`` first, which refuses an object that is, or directly
        refers to, a dict with pending changes (a ``types.MappingProxyType`` of it, an
        iterator over it). Sources are read as they were at entry: the entry binds every one
        it uses before the first write-back. Guards are unchanged: they check, at entry, the
        contents the trace read, so a call that finds the dict changed (a cache filled by the
        previous call) recompiles once."""
        if id(var) not in self.mutated_dicts:
            self.mutated_dicts[id(var)] = DictChange(var, dict(var.items), self.eval_source(var.source))

    def check_native(self, value, what: str, refers: bool = True):
        """Refuse (a graph break) a native read of ``value`` while a dict it is, or (``refers``)
        directly refers to, has changes not written back yet (Note [Mutated input dicts])."""
        if not self.mutated_dicts:
            return
        pending = {id(change.real) for change in self.mutated_dicts.values()}
        if id(value) in pending or (refers and any(id(r) in pending for r in gc.get_referents(value))):
            raise Unsupported("side_effect", f"{what} would read natively a dict that the traced code changed")

    def record_attr_write(self, obj: ObjVar, name: str, value: Var):
        self.attr_writes[(id(obj.value), name)] = value
        self.attr_write_list.append((obj, name, value))

    def record_call_effect(self, fn, args: list):
        """Call ``fn(*args)`` after the graph, on the rebuilt values (a side effect on an object
        that the trace modelled, such as optimizer state created by a first step)."""
        self.call_effects.append((fn, list(args)))

    def record_global_write(self, g, name, value: Var):
        self.global_writes[(id(g), name)] = value
        self.global_write_list.append((g, name, value))

    # -- the trace ----------------------------------------------------------------------
    def run(self) -> Plan:
        code = self.code
        self.graph.location = (code.co_filename, code.co_firstlineno, code.co_name)
        k = self.cell_args
        if self.lazy_locals:  # Note [Lazy locals]: a resume function's arguments
            locals_ = {name: LazyVar(self, v, f"L[{k + i}]", name) for i, (name, v) in enumerate(zip(self.arg_names, self.L[k:]))}
        else:
            locals_ = {name: wrap(self, v, f"L[{k + i}]", name) for i, (name, v) in enumerate(zip(self.arg_names, self.L[k:]))}
        if code.co_flags & 0x08:  # CO_VARKEYWORDS
            # The **kwargs dict is made fresh by each call: the frame owns it, so writes to it are
            # local (its keys and values are still guarded through the source it was wrapped with).
            varkw = code.co_varnames[code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)]
            v = locals_.get(varkw)
            if isinstance(v, DictVar) and v.source is not None:
                locals_[varkw] = DictVar(v.items, cls=v.cls)
        if k:
            freevars = {n: self.real_cell(c, n, f"L[{j}]") for j, (n, c) in enumerate(zip(code.co_freevars, self.L))}
        else:
            freevars = {n: self.real_cell(c, n) for n, c in zip(code.co_freevars, self.closure or ())}
        self_var = locals_.get(self.arg_names[0]) if self.arg_names else None
        if isinstance(self_var, LazyVar):  # zero-argument super() reads it
            self_var = locals_[self.arg_names[0]] = self_var.materialize()
        self.root = Frame(self, code, self.root_globals, locals_, freevars, self_var=self_var)
        try:
            value = self.root.run()
        except StopAtBreak as stop:
            return Plan("break", frame=stop.frame, inst=stop.inst)
        finally:
            for context in reversed(self.open_contexts):
                context.__exit__(None, None, None)
        return Plan("return", value=value)
