"""The capture wrapper: a cache of guarded entries per frame, compiled on a miss.

Note [Frames and sessions]: ``capture(fn)`` makes one ``FrameState`` (the cache for fn's
code) inside one ``Session`` (the backend, config and statistics). Resume functions and
callees that a graph break runs natively get their own FrameState in the same Session, so
that they are compiled with the same backend and counted by the same explain().
"""
from __future__ import annotations

import re
import sys
import types
import warnings
import weakref

import torch
import torch.nn.modules.module as _module_mod


from .attributes import module_call_target
from .breaks import BreakAction, why_no_break
from .kinds import REPORT, BreakKind
from .library import inlinable_file
from .ops_flow import in_except_block
from .codegen import GLOBAL_STATE, MISS, RUNTIME_NULL, CannotRebuild, Rebuilder, collect_tensors, generate_entry
from .config import CaptureConfig, CaptureStats, FrameEvent, Unsupported
from .disable import own_attr, run_shallow
from .frame import CodeInfo
from .guards import MODULE_HOOKS, NO_GLOBAL_HOOKS, NO_MODULE_HOOKS, global_module_hooks
from .resume import CannotResume, resume_code
from .sizes import FrameShapes, ShapePolicy, takes_symbolic_sizes
from .tracebacks import hide_ember_frames
from .tracer import Tracer
from .variables import ExitVar

MAX_RESTARTS = 32
_ALL_STATES: "weakref.WeakSet[FrameState]" = weakref.WeakSet()


def log(config: CaptureConfig, name: str, message: str):
    if name in config.logs:
        print(f"[ember:{name}] {message}", file=sys.stderr)


class Session:
    def __init__(self, backend, config: CaptureConfig, stats: CaptureStats):
        self.backend = backend
        self.config = config
        self.stats = stats
        self.callees: dict = {}  # id(obj) -> (obj, wrapper)
        self.instances: dict = {}  # module forward's code -> instances captured at graph breaks
        self.warned: set = set()
        self.root = None  # the captured function or module
        self.symbolic = takes_symbolic_sizes(backend)  # False: every graph static (sizes.py)

    def callee(self, obj):
        """The capture wrapper used when a graph break calls a user function natively.

        A module is captured per instance. A model that builds a module on every call (the
        Hugging Face models build `CrossEntropyLoss()` in their forward) would compile a new
        frame each call and keep every instance alive: after `recompile_limit` instances of one
        forward, further instances run eagerly (through Module.__call__), with one warning."""
        hit = self.callees.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if not isinstance(obj, types.FunctionType):
            code = type(obj).forward.__code__
            seen = self.instances.get(code, 0)
            if seen >= self.config.recompile_limit and not self.owns(obj):
                self.warn_once(("instances", code), f"ember: {type(obj).__name__}.forward was captured for "
                               f"{seen} instances (a module built on each call?); running new instances "
                               "eagerly", 3)
                return obj
            self.instances[code] = seen + 1
        hit = (obj, FrameState(self, obj if isinstance(obj, types.FunctionType) else type(obj).forward,
                               None if isinstance(obj, types.FunctionType) else obj).wrapper)
        self.callees[id(obj)] = hit
        return hit[1]

    def owns(self, module) -> bool:
        """Whether ``module`` is a submodule of the captured module (the layers of its
        ModuleList, reached one by one at graph breaks in a loop): not built on each call."""
        return isinstance(self.root, torch.nn.Module) and any(m is module for m in self.root.modules())

    def warn_once(self, key, message, stacklevel):
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(message, stacklevel=stacklevel + 1)

    def warn_at(self, reason, message):
        """Warn once per (kind, line), attributed to the user's line of `reason`."""
        key = (reason.kind, reason.filename, reason.lineno)
        if key in self.warned:
            return
        self.warned.add(key)
        if reason.filename is None:
            warnings.warn(message, stacklevel=3)
        else:
            warnings.warn_explicit(message, UserWarning, reason.filename, reason.lineno)


class FrameState:
    def __init__(self, session: Session, func: types.FunctionType, self_obj=None, name=None, cell_args=0):
        self.session = session
        self.func = func
        self.code = func.__code__
        self.self_obj = self_obj
        self.name = name or func.__qualname__
        self.entries: list = []
        self.eager_forever = False
        self.shapes = FrameShapes()  # what earlier compiles saw (Note [Dynamic shapes in capture])
        self.resumes: dict = {}
        # A resume function's state: the original frame's state, and the prologue's length in
        # bytes (Note [Breaks in loops]).
        self.origin: FrameState | None = None
        self.shift = 0
        # A resume function of a frame with cells takes its closure cells first (Note [Resuming with cells]).
        self.cell_args = cell_args
        self.bind, self.arg_names = make_binder(func, self_obj)
        if cell_args:
            self.bind = _positional_binder(cell_args + len(self.arg_names), None)
        # A module runs eagerly through Module.__call__, so that its hooks run.
        self.is_module = isinstance(self_obj, torch.nn.Module)
        # Where the bound object lies in the locals: the first parameter, or the first item of
        # *args for a `wrapper(*args, **kwargs)` (make_binder).
        self.self_source = "L[0]" if self.code.co_argcount else "L[0][0]"
        self.eager = func if self_obj is None else self_obj if self.is_module else types.MethodType(func, self_obj)
        if cell_args:
            self.eager = _with_cells(func, cell_args)
        self.wrapper = self._make_wrapper()
        _ALL_STATES.add(self)

    def _make_wrapper(self):
        entries = self.entries
        bind = self.bind
        miss = self.miss
        hide = self.session.config.hide_frames

        def wrapper(*args, **kwargs):
            try:
                L = bind(*args, **kwargs)
                for entry in entries:
                    result = entry(L, args, kwargs)
                    if result is not MISS:
                        return result
                return miss(L, args, kwargs)
            except Exception as exc:
                if not hide:
                    raise
                # Note [hidden frames]: the user's frames only, and this one
                raise hide_ember_frames(exc)

        wrapper.__wrapped__ = self.eager
        wrapper.__name__ = getattr(self.func, "__name__", "captured")
        wrapper.__qualname__ = self.name
        wrapper.__doc__ = self.func.__doc__
        wrapper._ember_state = self
        return wrapper

    def reset(self):
        self.entries.clear()
        self.resumes.clear()
        self.eager_forever = False
        self.shapes = FrameShapes()

    # -- compile on a miss ------------------------------------------------------------------
    def miss(self, L, args, kwargs):
        config = self.session.config
        if self.eager_forever:
            return self.eager(*args, **kwargs)
        if len(self.entries) >= config.recompile_limit:
            self.eager_forever = True
            self.session.warn_once(("limit", self.code), f"ember: {self.name} hit the recompile limit "
                                   f"({config.recompile_limit}); running it eagerly from now on (last "
                                   f"{failed_guard(self.entries[-1], L, self.arg_names)})", 3)
            return self.eager(*args, **kwargs)
        if self.entries:
            self.session.stats.recompiles += 1
            why = self.why_missed(L)  # Note [why a guard failed]: described on a miss only
            self.event("recompile", reason=why)
            log(config, "recompiles", f"recompiling {self.name} ({self.code.co_filename}:"
                f"{self.code.co_firstlineno}): {why}")
        try:
            entry = self.compile(L)
        except Exception as exc:  # Note [internal errors]: capture's own bug, outside a handler
            if isinstance(exc, Unsupported) or getattr(exc, "_ember_from_backend", False) \
                    or config.raise_internal:
                raise  # a fullgraph break, or the backend's own error: the backend's policy
            if config.fullgraph:
                raise Unsupported("internal", f"{type(exc).__name__} while capturing {self.name}: {exc} "
                                  f"({BreakKind.INTERNAL.hint})",
                                  (self.code.co_filename, self.code.co_firstlineno)) from exc
            self.eager_forever = True
            self.session.warn_once(("internal", self.code), f"ember: internal error while capturing {self.name} "
                                   f"({type(exc).__name__}: {exc}); {BreakKind.INTERNAL.hint}; running it "
                                   "eagerly", 3)
            return self.eager(*args, **kwargs)
        self.entries.append(entry)
        result = entry(L, args, kwargs)
        if result is MISS:  # guards that do not hold on the inputs they were made from: a bug
            self.entries.remove(entry)
            self.session.warn_once(("guard", self.code), f"ember: internal guard error in {self.name} (a bug in ember: "
                                   f"{REPORT}); running eagerly", 3)
            return self.eager(*args, **kwargs)
        return result

    def event(self, kind, **fields):
        self.session.stats.events.append(FrameEvent(kind, self.name, self.code.co_filename,
                                                    self.code.co_firstlineno, **fields))

    def why_missed(self, L) -> str:
        """The guard that failed on each cached entry, the newest first."""
        reasons = [failed_guard(entry, L, self.arg_names) for entry in reversed(self.entries)]
        if len(reasons) == 1:
            return reasons[0]
        return reasons[0] + "".join(f"\n    entry {len(reasons) - 1 - i} of {len(reasons)}: {r}"
                                    for i, r in enumerate(reasons[1:], 1))

    def compile(self, L):
        config = self.session.config
        breaks: dict = {}
        func = self.func
        for _ in range(MAX_RESTARTS):
            shapes = ShapePolicy(config.dynamic, self.session.symbolic, self.shapes,
                                 lambda source: readable_source(source, self.arg_names))
            tr = Tracer(self.code, func.__globals__, func.__closure__, L, config, breaks, self.arg_names, self.cell_args,
                        lazy_locals=self.origin is not None, shapes=shapes)
            try:
                if self.is_module:
                    _guard_no_hooks(tr, self.self_obj, self.self_source)
                    target = module_call_target(tr, self.self_obj, self.self_source, func)
                    if target is not None:  # the class's __call__ or the instance's forward runs instead
                        return self.delegate_entry(tr, target)
                plan = tr.run()
            except Unsupported as e:
                inst = tr.root.inst if tr.root is not None else None
                if config.fullgraph:
                    raise Unsupported(e.kind, f"{e.reason} (in {self.name}; hint: {e.kind.hint})", e.location) from None
                if e.location is None:
                    e.with_location(self.code.co_filename, self.code.co_firstlineno, self.code.co_qualname)
                if e.kind is BreakKind.INTERNAL:  # Note [internal errors]: never a silent graph break
                    self.session.warn_at(e.to_reason(), f"ember: internal error while capturing {self.name}: "
                                         f"{e.reason}; {BreakKind.INTERNAL.hint}")
                obstacle = None if inst is None else why_no_break(self.code, inst)
                if obstacle is None and inst is not None and in_except_block(tr.root):
                    obstacle = "inside an except block, whose exception is not live natively"
                if obstacle is None and getattr(tr.root, "locals_dict", None) is not None:
                    obstacle = "locals() of this frame is a dict that later calls refresh (Note [Frame introspection])"
                if inst is not None and obstacle is None and inst.offset not in breaks:
                    breaks[inst.offset] = e
                    continue
                if obstacle is not None:
                    e = Unsupported(e.kind, f"{e.reason} (no graph break here: {obstacle})", e.location)
                return self.eager_entry(tr, e)
            try:
                return self.build_entry(tr, plan, breaks)
            except (CannotRebuild, CannotResume) as e:
                err = breaks.get(plan.inst.offset) if plan.inst is not None else None
                return self.eager_entry(tr, Unsupported("cannot_resume", f"{err.reason if err else ''}; "
                                                        f"cannot resume after it: {e}",
                                                        err.location if err else None))
            except SyntaxError as e:  # Note [internal errors]: code ember generated does not compile
                if config.raise_internal:
                    raise
                error = Unsupported("internal", f"ember generated invalid code ({e.msg}: "
                                    f"{(e.text or '').strip()!r})",
                                    (self.code.co_filename, self.code.co_firstlineno, self.code.co_qualname))
                if config.fullgraph:
                    raise error from e
                return self.eager_entry(tr, error)
        return self.eager_entry(tr, Unsupported("too_many_breaks", "too many graph breaks"))

    def build_entry(self, tr, plan, breaks):
        session = self.session
        code = self.code
        if plan.kind == "return":
            roots = [plan.value]
        else:
            fr = plan.frame
            roots = list(fr.stack) + list(fr.locals.values()) + list(fr.cells.values())
        side_values = [v for _, _, v in tr.attr_write_list] + [v for _, _, v in tr.global_write_list]
        side_values += [a for _, args in tr.call_effects for a in args] + list(tr.mutated_lists.values())
        side_values += [change.var for change in tr.mutated_dicts.values()]
        outputs = list(collect_tensors(roots + side_values, {}).values())
        has_graph = tr.graph.n_ops > 0
        compiled = None
        if plan.kind == "break":  # Note [Breaks in autocast blocks]: the graph leaves them
            for v in plan.frame.stack:
                if isinstance(v, ExitVar) and v.node is not None:
                    tr.graph.close_autocast(v)
        shapes = tr.graph.shapes
        for name in shapes.became_dynamic:
            log(session.config, "recompiles", f"{self.name}: {name} became dynamic")
        for name in shapes.kept_static:
            log(session.config, "recompiles", f"{self.name}: {name} changed; the backend compiles static "
                "graphs only, so it stays static")
        if has_graph:
            gm = tr.graph.finish(outputs)
            example_inputs = [real for _, real in tr.graph.inputs]
            session.stats.graphs.append(gm)
            session.stats.dynamic_inputs.append(shapes.dynamic_inputs())
            if "graph" in session.config.logs:  # printing a graph of 2,000 nodes takes a tenth of a second
                log(session.config, "graph", f"graph of {self.name}:\n{gm.print_readable(print_output=False)}")
            try:
                compiled = session.backend(gm, example_inputs)
            except Exception as exc:
                exc._ember_from_backend = True  # not capture's bug (Note [internal errors])
                raise
        tr.ns["_NULL"] = RUNTIME_NULL
        rb = Rebuilder(tr.ns, {v.node: i for i, v in enumerate(outputs)}, has_graph,
                       list(tr.mutated_lists) + list(tr.mutated_dicts),
                       {s: tr.guards.local_of(src) for s, src in shapes.env.sources.items()})
        # Note [Mutated input lists], Note [Mutated input dicts]: written back first, so that
        # every later reader sees them
        effects = [f"{rb.expr(v)}[:] = {rb.items_expr(v)}" for v in tr.mutated_lists.values()]
        effects += [line for change in tr.mutated_dicts.values() for line in rb.dict_writeback(change.var, change.before)]
        # Note [Iterators from the inputs]: the same iterator, at the position the trace left it
        effects += [f"{rb.read(it.source)}.__setstate__({it.pos})" for it in tr.input_iterators if it.pos != it.start]
        effects += [f"_setattr({rb.expr(obj)}, {name!r}, {rb.expr(v)})" for obj, name, v in tr.attr_write_list]
        if plan.kind == "break" and tr.graph.grad_enabled != torch.is_grad_enabled():
            # A break inside a grad-mode block: the native part and the resume run in that mode.
            effects.append(f"{tr.ns.ref(torch._C._set_grad_enabled)}({tr.graph.grad_enabled})")
        effects += [f"{tr.ns.ref(g)}[{name!r}] = {rb.expr(v)}" for g, name, v in tr.global_write_list]
        effects += [f"{tr.ns.ref(fn)}({', '.join(rb.expr(a) for a in args)})" for fn, args in tr.call_effects]
        if plan.kind == "return":
            tail = f"return {rb.expr(plan.value)}"
        else:
            reason = breaks[plan.inst.offset]
            action = BreakAction(self, plan.frame, plan.inst, reason)
            stack = ", ".join(rb.expr(v) for v in plan.frame.stack)
            local_names = code.co_varnames
            locs = ", ".join(rb.expr(plan.frame.locals[n]) if n in plan.frame.locals else "None" for n in local_names)
            cells = ""
            if self.resumes_with_cells():
                cells = ", ".join(rb.expr(plan.frame.cells[n]) for n in code.co_cellvars + code.co_freevars)
            tr.ns["__brk"] = action
            tail = f"return __brk([{stack}], [{locs}], [{cells}])"
            session.stats.breaks.append(reason.to_reason())
            log(session.config, "graph_breaks", f"graph break in {self.name}: {reason}")
        relations = shapes.relation_checks()  # decided by the trace and the backend, on sizes
        if "guards" in session.config.logs:
            notes = [named_locals(n, self.arg_names) for n in tr.guards.notes] + [f"sizes: {t}" for _, t in relations]
            log(session.config, "guards", f"guards of {self.name}:\n  " + "\n  ".join(notes or ["(none)"]))
        kept = [s for s, _ in tr.graph.inputs] + list(shapes.env.sources.values())
        # the relations after every input is read
        guard_lines = tr.guards.lines(keep=kept, distinct=tensor_arguments(tr)) + shapes.guard_lines()
        entry = generate_entry(tr.ns, guard_lines, [tr.guards.rewrite(s) for s, _ in tr.graph.inputs],
                               compiled, effects, tail, rb.prelude)
        entry.guard_notes = list(tr.guards.notes) + [f"sizes: {text}" for _, text in relations]
        entry.guard_checks = dict(tr.guards.items)
        entry.size_checks = relations
        entry.distinct_tensors = tensor_arguments(tr)
        entry.ns = tr.ns
        self.event("entry", graph=len(session.stats.graphs) - 1 if has_graph else None,
                   guards=tuple(named_locals(n, self.arg_names) for n in tr.guards.notes)
                   + tuple(f"sizes: {text}" for _, text in relations),
                   reason=None if plan.kind == "return" else session.stats.breaks[-1])
        return entry

    def eager_entry(self, tr, error: Unsupported):
        reason = error.to_reason()
        self.session.stats.fallbacks.append(reason)
        self.session.stats.breaks.append(reason)
        self.session.warn_at(reason, f"ember: running {self.name} eagerly: {reason.reason} ({reason.where()}); "
                             f"hint: {reason.hint}")
        log(self.session.config, "graph_breaks", f"{self.name} runs eagerly: {reason}")
        self.event("eager", guards=tuple(named_locals(n, self.arg_names) for n in tr.guards.notes), reason=reason)
        tr.ns["__eager"] = self.eager
        return _guarded_call_entry(tr, "return __eager(*args, **kwargs)")

    def delegate_entry(self, tr, target):
        """An entry that calls `target` (captured as any callee is) while the guards hold."""
        log(self.session.config, "recompiles", f"{self.name}: the module's call now runs {target!r}")
        tr.ns["__target"] = target
        tr.ns["__native"] = self.call_native
        return _guarded_call_entry(tr, "return __native(__target, args, kwargs)")

    # -- resume functions ---------------------------------------------------------------------
    def resumes_with_cells(self) -> bool:
        return bool(self.code.co_cellvars or self.cell_args)

    def resume_function(self, target: int, null_mask: tuple, unbound: tuple):
        key = (target, null_mask, unbound)
        wrapper = self.resumes.get(key)
        if wrapper is None:
            code = resume_code(self.code, target, null_mask, unbound)
            name = f"{self.name} (resumed at offset {target})"
            if self.resumes_with_cells():  # cells come with each call; these stand in for the signature
                placeholder = tuple(types.CellType() for _ in code.co_freevars)
                fn = types.FunctionType(code, self.func.__globals__, code.co_name, None, placeholder)
                state = FrameState(self.session, fn, name=name, cell_args=len(code.co_freevars))
            else:
                fn = types.FunctionType(code, self.func.__globals__, code.co_name, None, self.func.__closure__)
                state = FrameState(self.session, fn, name=name)
            state.origin, state.shift = self, len(code.co_code) - len(self.code.co_code)
            wrapper = self.resumes[key] = state.wrapper
        return wrapper

    def call_native(self, fn, args, kwargs):
        """Call ``fn`` for a graph break: user code still goes through capture."""
        session = self.session
        disabled = own_attr(fn, "_ember_disabled")
        if disabled == "shallow":
            return run_shallow(fn, session, args, kwargs)
        if disabled is None:
            if isinstance(fn, types.FunctionType) and inlinable_file(fn.__code__.co_filename):
                return session.callee(fn)(*args, **kwargs)
            if (isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType)
                    and inlinable_file(fn.__func__.__code__.co_filename)):
                return session.callee(fn.__func__)(fn.__self__, *args, **kwargs)
            if isinstance(fn, torch.nn.Module) and not (_has_hooks(fn) or global_module_hooks()) \
                    and isinstance(type(fn).forward, types.FunctionType) \
                    and inlinable_file(type(fn).forward.__code__.co_filename):
                return session.callee(fn)(*args, **kwargs)
        return fn(*args, **kwargs)


def _guarded_call_entry(tr, tail):
    """An entry with no graph: the trace's guards, then `tail`."""
    entry = generate_entry(tr.ns, tr.guards.lines(), [], None, [], tail)
    entry.guard_notes = list(tr.guards.notes)
    entry.guard_checks = dict(tr.guards.items)
    entry.size_checks = []
    entry.ns = tr.ns
    return entry


def _guard_no_hooks(tr, module, source):
    """The captured forward of a module stands for Module.__call__ only while it has no hooks,
    of its own or global (a global backward hook too: Module.__call__ sets it up)."""
    if _has_hooks(module):  # the eager entry made next stands while the hooks do
        tr.guards.add(source, f"bool({MODULE_HOOKS})", f"{source} has module hooks")
    else:
        tr.guards.add(source, NO_MODULE_HOOKS, f"{source} has no module hooks")
    mod = tr.ns.ref(_module_mod)
    if global_module_hooks():
        tr.guards.add(mod, f"not {NO_GLOBAL_HOOKS}", "global module hooks")
    else:
        tr.guards.add(mod, NO_GLOBAL_HOOKS, "no global module hooks")
    if _has_hooks(module) or global_module_hooks():
        raise Unsupported("module_hooks", f"{type(module).__name__} has hooks: running it through Module.__call__")


def tensor_arguments(tr) -> list[str]:
    """Two tensor arguments that were distinct objects when traced must be distinct on reuse:
    the graph holds them as two inputs, and `a is b` (or an in-place op on one read through the
    other) was decided for two objects. One tensor passed twice is one input, guarded `X is`
    (builder._wrap_tensor). Checked by the guards (`Guards.lines(distinct=...)`)."""
    return [s for s, real in tr.graph.inputs if isinstance(real, torch.Tensor) and s.startswith("L[")]


def _has_hooks(m):
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks)


# Note [why a guard failed]: a cache hit runs an entry's guards as one generated expression
# and learns nothing but "miss". Which condition failed, and on what value, is worked out
# afterwards, on a miss only (for the recompiles log, the recompile-limit warning and the
# FrameEvent the facade's compile report reads): a recompile costs far more than this: each source's checks are split at "and" and evaluated one by one; the left side of
# the first false one is the value shown.
_COMPARISON = re.compile(r"^(?P<lhs>.+?) (?P<op>is not|is|==|!=) (?P<rhs>.+)$")
_NAMES = re.compile(r"\b(?:X|_c\d+)\b")  # the guarded value, and objects the entry holds


def failed_guard(entry, L, arg_names=()) -> str:
    """`guard failed: L['x'].dtype is torch.float32 (got torch.float64)`, for the first
    condition of `entry` that is false on the locals `L`."""
    scope = {k: v for k, v in entry.ns.items() if isinstance(k, str)}
    scope["L"] = L
    for source, checks in entry.guard_checks.items():
        name = named_locals(source, arg_names)
        try:
            X = eval(source, scope)
        except Exception as exc:
            return f"guard failed: {name} can be read (got {type(exc).__name__})"
        scope["X"] = X
        for check in checks:
            for part in check.split(" and "):  # name the first failing condition, not the conjunction
                try:
                    ok = eval(part, scope)
                except Exception:
                    ok = False
                if not ok:
                    return f"guard failed: {_explain(part, name, scope)}"
    for code, text in getattr(entry, "size_checks", ()):
        try:
            ok = eval(code, scope)
        except Exception:
            ok = False
        if not ok:
            return f"guard failed: sizes: {text}"
    seen = {}
    for source in getattr(entry, "distinct_tensors", ()):
        try:
            other = seen.setdefault(id(eval(source, scope)), source)
        except Exception:
            continue
        if other != source:
            return (f"guard failed: {named_locals(other, arg_names)} and {named_locals(source, arg_names)} "
                    "are one tensor (distinct when traced)")
    for expr, expected in entry.global_state.items():
        got = GLOBAL_STATE[expr]()
        if got is not expected and got != expected:
            return f"guard failed: {expr} is {expected} (got {got})"
    return "guard failed: global state changed (grad or inference mode, autocast or default dtype)"


def _explain(part: str, name: str, scope: dict) -> str:
    def readable(expr: str) -> str:  # held constants by value, X by the source's name
        return _NAMES.sub(lambda m: name if m.group(0) == "X" else _short(scope[m.group(0)]), expr)

    match = _COMPARISON.match(part)
    if match is None:
        return f"{readable(part)} (got {_short(scope['X'])})"
    lhs, op, rhs = match["lhs"], match["op"], match["rhs"]
    try:
        got = _short(eval(lhs, scope))
    except Exception as exc:
        got = f"{type(exc).__name__}"
    if lhs == "id(X)":  # an identity guard: the object seen at compile time
        return f"{name} is the object seen when compiling (got another {type(scope['X']).__qualname__})"
    return f"{readable(lhs)} {op} {readable(rhs)} (got {got})"


def named_locals(text: str, arg_names) -> str:
    """`L[0]` -> `L['x']`: sources read the frame's locals by position, users know them by name."""
    def name(m):
        i = int(m.group(1))
        return f"L[{arg_names[i]!r}]" if i < len(arg_names) and arg_names[i].isidentifier() else m.group(0)
    return re.sub(r"\bL\[(\d+)\]", name, text)


def readable_source(source: str, arg_names) -> str:
    """The user's name for a source: `L['x']` -> `x`, `L['x'].size(0)` -> `x.size(0)`."""
    return re.sub(r"^L\['([A-Za-z_]\w*)'\]", r"\1", named_locals(source, arg_names))


def _short(value) -> str:
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__} {value.dtype} {value.device} shape={tuple(value.shape)} "
                f"stride={tuple(value.stride())} requires_grad={value.requires_grad}")
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def make_binder(func, self_obj):
    """A function with ``func``'s signature that returns its arguments as CPython lays out locals."""
    code = func.__code__
    argc, kwonly, posonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    names = list(code.co_varnames[:argc + kwonly])
    varargs = code.co_varnames[argc + kwonly] if code.co_flags & 0x04 else None
    varkw = code.co_varnames[argc + kwonly + (1 if varargs else 0)] if code.co_flags & 0x08 else None
    # Defaults are read from the function at each call, as Python does (`fn.__defaults__` may
    # be reassigned after capture): an omitted argument binds the marker `_ember_D`, replaced below.
    scope = {"_ember_self": self_obj, "_ember_D": _DEFAULT, "_ember_f": func}
    defaults = func.__defaults__ or ()
    kwdefaults = func.__kwdefaults__ or {}
    params = []
    first_default = argc - len(defaults)
    value_of = {n: n for n in names}
    for i, n in enumerate(names[:argc]):
        if self_obj is not None and i == 0:
            continue
        if i >= first_default:
            params.append(f"{n}=_ember_D")
            value_of[n] = f"({n} if {n} is not _ember_D else _ember_f.__defaults__[{i - argc} + len(_ember_f.__defaults__)])"
        else:
            params.append(n)
        if i == posonly - 1:
            params.append("/")
    if varargs:
        params.append("*" + varargs)
    elif kwonly:
        params.append("*")
    for n in names[argc:]:
        if n in kwdefaults:
            params.append(f"{n}=_ember_D")
            value_of[n] = f"({n} if {n} is not _ember_D else _ember_f.__kwdefaults__[{n!r}])"
        else:
            params.append(n)
    if varkw:
        params.append("**" + varkw)
    if params and params[0] == "/":
        params.pop(0)
    # The bound object is the first positional parameter, or, where there is none (a decorator's
    # `def wrapper(*args, **kwargs)` as a method), the first item of *args.
    self_named = self_obj is not None and argc > 0
    values = (["_ember_self"] if self_named else []) + [value_of[n] for n in names[1 if self_named else 0:]]
    if varargs:
        values.append(f"(_ember_self,) + {varargs}" if self_obj is not None and not self_named else varargs)
    if varkw:
        values.append(varkw)
    arg_names = tuple(names + [v for v in (varargs, varkw) if v])
    if not all(n.isidentifier() for n in arg_names):  # resume functions: called positionally only
        return _positional_binder(len(arg_names), self_obj), arg_names
    src = f"def __bind({', '.join(params)}):\n    return ({''.join(v + ', ' for v in values)})"
    exec(src, scope)
    return scope["__bind"], arg_names


def _with_cells(func, n):
    """Run ``func``'s code natively with the first ``n`` arguments as its closure cells."""
    code, globals_, name = func.__code__, func.__globals__, func.__name__

    def run(*args):
        return types.FunctionType(code, globals_, name, None, tuple(args[:n]))(*args[n:])
    return run


_DEFAULT = type("_Default", (), {"__repr__": lambda self: "<default>"})()


def _positional_binder(n, self_obj):
    """Binder for plain positional signatures (and resume functions, whose names may be odd)."""
    if self_obj is not None:
        def bind(*args):
            if len(args) != n - 1:
                raise TypeError(f"expected {n - 1} arguments, got {len(args)}")
            return (self_obj,) + args
    else:
        def bind(*args):
            if len(args) != n:
                raise TypeError(f"expected {n} arguments, got {len(args)}")
            return args
    return bind


def reset_all():
    for state in list(_ALL_STATES):
        state.reset()
    CodeInfo._cache.clear()


