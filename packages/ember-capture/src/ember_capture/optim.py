"""torch.optim under capture: ``zero_grad`` and ``step`` of an optimizer become graph operations.

Note [optimizer steps]: an optimizer's ``step`` is torch's own Python (``torch.optim``), which
the interpreter does not inline: it keeps its state in a dict keyed by parameters, creates
that state lazily, and reads Python hyperparameters from ``param_groups``. Capture runs that
Python *natively*, once per compile, on a shadow of the optimizer whose parameters,
gradients and state tensors are the trace's fake tensors, under a ``TorchFunctionMode`` that
records every torch call into the graph (``Recorder``). So the graph holds exactly the update
torch.optim computes, for any optimizer whose step is tensor code (SGD, Adam, AdamW, ...,
and user subclasses), and the parameters and state tensors are graph inputs mutated in place.

What the recorded graph depends on is guarded, through sources over the real optimizer:
the number of groups and parameters, which parameters have a gradient, the keys and tensors
of each parameter's state, every hyperparameter of every group and of ``defaults`` (by
value), the class's ``step`` and the absence of step hooks. A Python float ``lr`` is the
exception: it is *lifted*, read into a 0-d float64 tensor input on each call, so that an LR
scheduler does not recompile each step (``torch.compile`` also turns Python floats into
inputs). Anything else that would be baked is either guarded or refused:

- ``torch.compiler.is_compiling()`` answers True during the run, as under torch.compile, so
  torch.optim keeps step counts in tensors (``_get_value``) instead of calling ``.item()``.
- Ops given a tensor where torch takes a Python scalar (``add_(g, alpha=-lr)``,
  ``addcdiv_(a, b, value=-step_size)``) are rewritten into tensor arithmetic (``REWRITES``);
  ``out=`` becomes an op and a ``copy_``.
- The shadow groups take eager's path, foreach or per-parameter (Note [eager's foreach path]):
  the inductor fuses each parameter's chain of elementwise ops into one kernel either way.
- State that the step would create or replace (the first step, a Python-number ``step``),
  ``fused=True``, ``differentiable=True``, a closure, hooks: ``Unsupported``, so ``step()``
  runs natively at a graph break (the first step of a fresh optimizer breaks once; the
  next call recompiles with the state in place).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import types
import weakref

import torch
import torch.compiler
import torch.optim.optimizer as _optimizer_mod
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from .builder import wrap
from .config import Unsupported
from .tables import registrar
from .variables import BoundVar, ConstVar, DictVar, ListVar, ObjVar, TensorVar

MODELS = {}
_model = registrar(MODELS)

# Python callables that read a tensor's metadata or identity: run natively on the fakes.
_NATIVE = frozenset({"__get__", "__set__", "__hash__", "__delete__"})
_HYPER_CONSTS = (int, float, bool, str, type(None), tuple, torch.dtype, torch.device)


def model_for(fn_var, self_var):
    """The capture model of ``self.<method>(...)`` when self is a torch.optim.Optimizer."""
    if not (isinstance(self_var, ObjVar) and isinstance(self_var.value, torch.optim.Optimizer)
            and isinstance(fn_var, ObjVar)):
        return None
    name = getattr(fn_var.value, "__name__", None)
    entry = MODELS.get(name)
    if entry is None or getattr(type(self_var.value), name, None) is not fn_var.value:
        return None
    handler, stock = entry
    if stock is not None and fn_var.value is not stock:
        return None  # a subclass's own zero_grad: inlined (or a break) like any method
    return handler


def function_model_for(fn_var):
    """The capture model of a plain function standing for an optimizer's step: the wrapper an
    LR scheduler installs as ``opt.step`` (it marks ``opt._opt_called`` and calls the class's
    step, which is library code and would be a graph break)."""
    f = fn_var.value
    if not (isinstance(f, types.FunctionType) and getattr(f, "_wrapped_by_lr_sched", False) and f.__closure__):
        return None
    cells = dict(zip(f.__code__.co_freevars, f.__closure__))
    try:
        opt_ref, func = cells["opt_ref"].cell_contents, cells["func"].cell_contents
    except (KeyError, ValueError):
        return None
    opt = opt_ref() if isinstance(opt_ref, weakref.ReferenceType) else None
    if not isinstance(opt, torch.optim.Optimizer) or func is not getattr(type(opt), "step", None):
        return None

    def scheduled_step(fr, args, kwargs, skip_if=None):
        # The wrapper is guarded by identity (its source), so its weakref names this optimizer.
        opt_var = ObjVar(opt, f"{fr.tr.ns.ref(opt_ref)}()")
        if skip_if is None:
            fr.tr.record_attr_write(opt_var, "_opt_called", ConstVar(True))
        else:  # Note [skipped steps]
            fr.tr.record_call_effect(_unless_skipped, [skip_if, ObjVar(setattr), opt_var, ConstVar("_opt_called"),
                                                       ConstVar(True)])
        return _step(fr, opt_var, args, kwargs, skip_if)
    return scheduled_step


def step_model_for(fn_var):
    """``optimizer.step`` (read as an attribute) as capture models it: a callable
    ``(fr, args, kwargs, skip_if)``, or None where the step is not modelled (a subclass's own
    ``step`` that is inlined as Python, a function put on the instance)."""
    if isinstance(fn_var, BoundVar):
        handler = model_for(fn_var.func, fn_var.self_var)
        if handler is _step:
            opt_var = fn_var.self_var
            return lambda fr, args, kwargs, skip_if=None: _step(fr, opt_var, args, kwargs, skip_if)
        return None
    if isinstance(fn_var, ObjVar):
        return function_model_for(fn_var)
    return None


# -- zero_grad ---------------------------------------------------------------------------
def _zero_grad(fr, opt_var, args, kwargs):
    """``Optimizer.zero_grad(set_to_none=True)``: ``p.grad = None`` replayed after the graph
    (and seen by the rest of the trace); ``set_to_none=False`` zeroes each gradient in the
    graph."""
    tr = fr.tr
    set_to_none = _bind(args, kwargs, "set_to_none", True)
    src = _source(opt_var)
    for gi, group in enumerate(_groups(tr, opt_var)):
        for pi, p in enumerate(group["params"]):
            p_src = f"{src}.param_groups[{gi}]['params'][{pi}]"
            if set_to_none:
                tr.record_attr_write(ObjVar(p, p_src), "grad", ConstVar(None))
                continue
            grad = grad_of(tr, p, p_src)
            if isinstance(grad, TensorVar):
                if grad.fake.requires_grad or grad.fake.grad_fn is not None:
                    raise Unsupported("unsupported_call", "zero_grad(set_to_none=False) of a gradient that requires grad")
                tr.graph.call("call_method", "zero_", [grad], {})
    return ConstVar(None)


_model("zero_grad")((_zero_grad, torch.optim.Optimizer.zero_grad))


def grad_of(tr, p, p_src):
    """``p.grad`` as the trace sees it: a write earlier in the trace, or the real gradient."""
    overlay = tr.attr_writes.get((id(p), "grad"))
    if overlay is not None:
        return overlay
    return wrap(tr, p.grad, f"{p_src}.grad", "grad")


# -- step --------------------------------------------------------------------------------
def _step(fr, opt_var, args, kwargs, skip_if=None):
    """``opt.step()`` recorded into the graph; with ``skip_if`` (a 0-d bool TensorVar), a step
    whose every effect is undone where it is true (Note [skipped steps])."""
    tr = fr.tr
    opt = opt_var.value
    if args or kwargs:
        raise Unsupported("unsupported_call", "Optimizer.step(closure): the closure re-runs the model")
    src = _source(opt_var)
    _guard_step_function(tr, opt, src)
    defaults = _hyperparameters(tr, opt.defaults, f"{src}.defaults", lift=False)
    if defaults.get("fused") or defaults.get("differentiable"):
        raise Unsupported("unsupported_call", "a fused or differentiable optimizer step (runs natively)")
    shadow_groups, grads_set = [], []
    shadow_state = _ShadowState()
    for gi, group in enumerate(_groups(tr, opt_var)):
        g_src = f"{src}.param_groups[{gi}]"
        hyper = _hyperparameters(tr, {k: v for k, v in group.items() if k != "params"}, g_src, lift=True,
                                 memo=(id(opt), gi))
        if hyper.get("fused") or hyper.get("differentiable"):
            raise Unsupported("unsupported_call", "a fused or differentiable optimizer step (runs natively)")
        params, real_with_grad = [], []
        for pi, p in enumerate(group["params"]):
            p_src = f"{g_src}['params'][{pi}]"
            p_var = wrap(tr, p, p_src, "param")
            grad = grad_of(tr, p, p_src)
            fake = p_var.fake
            grads_set.append((fake, fake.grad))
            fake.grad = grad.fake if isinstance(grad, TensorVar) else None
            params.append(fake)
            shadow_state.real[fake] = (p, p_src)
            if isinstance(grad, TensorVar):
                real_with_grad.append(p)
                state = _state_of(tr, opt, p, f"{src}.state.get({p_src})")
                if state is not None:
                    shadow_state[fake] = state
        shadow_groups.append({**hyper, "params": params, "foreach": _eager_foreach(hyper, real_with_grad)})
    shadow = object.__new__(type(opt))
    shadow.__dict__.update(opt.__dict__)
    shadow.param_groups = shadow_groups
    shadow.state = shadow_state
    before = {k: dict(v) for k, v in shadow_state.items()}
    was_enabled = tr.graph.grad_enabled
    if was_enabled:
        tr.graph.set_grad_enabled(False)
    recorder = Recorder(tr)
    undo = _Undo(tr, recorder, skip_if) if skip_if is not None else None
    try:
        with recorder, _compiling(), _fakes_take_foreach():
            type(opt).step(shadow)
    except Unsupported:
        raise
    except Exception as e:  # torch.optim's own checks, or an op without a fake kernel: run it natively
        raise Unsupported("trace_error", f"{type(opt).__name__}.step raised {type(e).__name__} while "
                                         f"recording: {e}") from None
    finally:
        for fake, old in grads_set:
            fake.grad = old
    if undo is not None:
        undo.restore()
    if was_enabled:
        tr.graph.set_grad_enabled(True)
    _check_state(tr, opt_var, before, shadow_state, recorder, skip_if)
    return ConstVar(None)


# Note [skipped steps]: ``GradScaler.step`` skips ``optimizer.step()`` when the gradients hold an
# inf or a NaN, a decision on tensor data (``.item()``). Capture records the step anyway and
# undoes it where ``found_inf`` is set, so no graph break is needed, and the result is eager's
# bit for bit: each tensor that the recorded step changes in place (a parameter, a gradient, a
# state tensor such as Adam's ``step`` and ``exp_avg``) is cloned before the step and, after it,
# set to ``torch.where(skip, clone, stepped)``, which selects one of the two values unchanged
# (NaN, -0.0 and the step counter included). The Python effects of the step are made
# conditional the same way: state that a first step creates, and an LR scheduler's
# ``_opt_called`` mark, are installed after the graph only if ``skip`` is false (the one place
# where a tensor is read, outside the graph: a first step, or a step behind a scheduler). A step
# that changes in place a tensor other than its parameters, gradients and state cannot be
# undone so: ``Unsupported`` (it runs natively, at a graph break).
class _Undo:
    """Clones, before the step, of every tensor the step may change in place."""

    def __init__(self, tr, recorder, skip_if):
        self.tr, self.skip_if = tr, skip_if
        self.versions = {id(v.fake): (v, v.fake._version) for v in recorder.vars.values()}
        self.saved = {}
        for var, _ in self.versions.values():
            if var.source is not None:  # an input of the graph: a parameter, a gradient, a state tensor
                self.saved[id(var.fake)] = tr.graph.call("call_method", "clone", [var], {})

    def restore(self):
        graph = self.tr.graph
        for key, (var, version) in self.versions.items():
            saved = self.saved.get(key)
            if var.fake._version == version:
                if saved is not None:  # unchanged: its clone is dead
                    graph.graph.erase_node(saved.node)
                    graph.n_ops -= 1
                continue
            if saved is None:
                raise Unsupported("optimizer_state", "a skippable optimizer step changed a tensor it does not own")
            kept = graph.call("call_function", torch.where, [self.skip_if, saved, var], {})
            graph.call("call_method", "copy_", [var, kept], {})


def _unless_skipped(skip, fn, *args):
    """An effect of a step, run after the graph unless the step was skipped (Note [skipped steps])."""
    if not skip.item():
        fn(*args)


_model("step")((_step, None))


class _ShadowState(dict):
    """``Optimizer.state`` (a defaultdict(dict)) of the shadow, keyed by fake parameters. The
    state a first step creates is recorded in the graph and installed after it."""

    def __init__(self):
        super().__init__()
        self.real = {}  # fake parameter -> (real parameter, its source)
        self.created = []

    def __missing__(self, key):
        self.created.append(key)
        self[key] = {}
        return self[key]


def _state_of(tr, opt, p, s_src):
    """The fakes of ``opt.state[p]``, or None where the step will create it (guarded)."""
    state = opt.state.get(p)
    tr.check_native(state, "optimizer.step()", refers=False)  # Note [Mutated input dicts]
    if not state:
        tr.guards.add(s_src, "not X", f"{s_src} is empty")
        return None
    if type(state) is not dict or not all(isinstance(k, str) for k in state):
        raise Unsupported("optimizer_state", "optimizer state that is not a dict of named values")
    tr.guards.add(s_src, f"type(X) is dict and list(X) == {list(state)!r}", f"{s_src} has keys {list(state)}")
    out = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            out[key] = wrap(tr, value, f"{s_src}[{key!r}]", key).fake
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            raise Unsupported("optimizer_state", f"optimizer state {key!r} is a Python number (a constant in "
                                                 "the graph would recompile each step)")
        else:
            tr.guards.const(f"{s_src}[{key!r}]", value)
            out[key] = value
    return out


def _check_state(tr, opt_var, before, state, recorder, skip_if=None):
    """State that existed keeps its tensors (updated in place); state the step created is
    installed into the real optimizer after the graph."""
    for fake, entries in state.items():
        old = before.get(fake)
        if old is not None:
            if set(entries) != set(old) or any(entries[k] is not old[k] for k in old):
                raise Unsupported("optimizer_state", "the optimizer step replaced state tensors (runs natively)")
            continue
        p, p_src = state.real[fake]
        values = {}
        for key, value in entries.items():
            if isinstance(value, torch.Tensor):
                values[key] = recorder.vars[id(value)]
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                raise Unsupported("optimizer_state", f"optimizer state {key!r} is a Python number")
            else:
                values[key] = ConstVar(value)
        effect = [_install_state, opt_var, ObjVar(p, p_src), DictVar(values)]
        if skip_if is None:
            tr.record_call_effect(effect[0], effect[1:])
        else:  # Note [skipped steps]
            tr.record_call_effect(_unless_skipped, [skip_if, ObjVar(effect[0])] + effect[1:])


def _install_state(opt, p, values):
    opt.state[p].update(values)


def _hyperparameters(tr, values: dict, source, lift: bool, memo=None) -> dict:
    """Each hyperparameter guarded by value, a tensor one as a graph input, and (``lift``) a
    Python float ``lr``, and any other float that changed since an earlier compile of this frame
    (a momentum or beta a scheduler cycles), read from the group on each call
    (Note [lifted hyperparameters])."""
    keys = list(values) + (["params"] if lift else [])
    tr.guards.add(source, f"type(X) is dict and sorted(X) == {sorted(keys)!r}")
    out = {}
    for key, value in values.items():
        item_src = f"{source}[{key!r}]"
        changed = _changed(tr, (memo, key), value) if lift and memo is not None else set()
        if isinstance(value, torch.Tensor):
            out[key] = wrap(tr, value, item_src, key).fake
        elif lift and type(value) is float and (key == "lr" or changed):
            out[key] = _lift(tr, item_src, value, key)
        elif lift and type(value) is tuple and changed:
            tr.guards.add(item_src, f"type(X) is tuple and len(X) == {len(value)}")
            items = []
            for i, v in enumerate(value):
                if i in changed and type(v) is float:
                    items.append(_lift(tr, f"{item_src}[{i}]", v, f"{key}_{i}"))
                else:
                    tr.guards.const(f"{item_src}[{i}]", v)
                    items.append(v)
            out[key] = tuple(items)
        elif isinstance(value, _HYPER_CONSTS):
            tr.guards.const(item_src, value)
            out[key] = value
        else:
            raise Unsupported("unsupported_value", f"optimizer hyperparameter {key!r} is a {type(value).__name__}")
    return out


# Note [lifted hyperparameters]: a Python float hyperparameter that the trace would bake in as a
# constant makes every new value a recompile; LR schedulers change ``lr`` each step, and cyclic
# ones (OneCycleLR, CyclicLR) also ``momentum`` or ``betas[0]``. ``lr`` is always lifted, any
# other float (alone or in a tuple) once it has changed between two compiles of the frame (as
# automatic dynamic makes a changed size symbolic, Note [Dynamic shapes in capture]). A lifted
# float is a graph input (a 0-d float64 tensor read from the group on each call) and reaches
# torch.optim's code as ``_Lifted``, a ``float`` standing for that input: arithmetic on it records
# tensor ops (``1 - beta1``, ``-lr``, ``lr / bias_correction``), the Recorder hands its tensor to
# torch calls (``buf.mul_(momentum)``; ``alpha=``/``value=`` through Note [scalar arguments]), and
# a comparison (``if momentum != 0``) answers from the value and guards that answer. It is a
# float, not a tensor, because the code's path depends on the type (Adam's foreach path refuses a
# tensor lr unless capturable; a float lr takes it in eager). A use that would read the number
# any other way (``math.sqrt``, ``int()``) is one torch.optim does not make on hyperparameters.
def _changed(tr, key, value) -> set:
    """The positions of ``value`` (a float: {None}; a tuple: its indices) that differ from what
    an earlier compile of this frame saw, or that differed then."""
    frame = getattr(tr.graph.shapes, "frame", None)
    if frame is None or not isinstance(value, (float, tuple)):
        return set()
    key = ("optimizer hyperparameter", *key)
    seen = frame.seen.setdefault(key, value)
    changed = set(frame.dynamic.get(key, ()))
    if isinstance(value, tuple):
        if isinstance(seen, tuple) and len(seen) == len(value):
            changed |= {i for i, (a, b) in enumerate(zip(seen, value)) if a != b and type(b) is float}
    elif seen != value:
        changed.add(None)
    if changed:
        frame.dynamic[key] = changed
    return changed


def _lift(tr, item_src, value: float, name: str) -> _Lifted:
    tr.guards.add(item_src, "type(X) is float")
    var = tr.graph.add_input(f"{tr.ns.ref(_scalar_tensor)}({item_src})", _scalar_tensor(value), name)
    return _Lifted(value, var.fake, tr, item_src)


def _real(x):
    return x.fake if isinstance(x, _Lifted) else x


class _Lifted(float):
    """A float hyperparameter read from a graph input on each call (Note [lifted hyperparameters])."""

    def __new__(cls, value, fake, tr, source):
        self = super().__new__(cls, value)
        self.fake, self.tr, self.source = fake, tr, source
        return self

    def _compare(self, other, op, symbol):
        if isinstance(other, torch.Tensor):
            return op(self.fake, other)
        if not isinstance(other, (int, float)) or isinstance(other, (bool, _Lifted)):
            raise Unsupported("unsupported_value", f"an optimizer hyperparameter compared with {type(other).__name__}")
        result = op(float(self), other)
        check = f"X {symbol} {float(other)!r}"
        self.tr.guards.add(self.source, check if result else f"not ({check})")
        return result

    def __eq__(self, other):
        return self._compare(other, operator.eq, "==")

    def __ne__(self, other):
        return self._compare(other, operator.ne, "!=")

    def __lt__(self, other):
        return self._compare(other, operator.lt, "<")

    def __le__(self, other):
        return self._compare(other, operator.le, "<=")

    def __gt__(self, other):
        return self._compare(other, operator.gt, ">")

    def __ge__(self, other):
        return self._compare(other, operator.ge, ">=")

    def __bool__(self):
        return self._compare(0.0, operator.ne, "!=")

    __hash__ = float.__hash__

    def __neg__(self):
        return -self.fake

    def __abs__(self):
        return abs(self.fake)


def _lifted_binary(op):
    return (lambda self, other: op(self.fake, _real(other)),
            lambda self, other: op(_real(other), self.fake))


for _op, _names in ((operator.add, ("__add__", "__radd__")), (operator.sub, ("__sub__", "__rsub__")),
                    (operator.mul, ("__mul__", "__rmul__")), (operator.truediv, ("__truediv__", "__rtruediv__")),
                    (operator.pow, ("__pow__", "__rpow__"))):
    for _name, _fn in zip(_names, _lifted_binary(_op)):
        setattr(_Lifted, _name, _fn)


def _scalar_tensor(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64)


def _groups(tr, opt_var):
    src = _source(opt_var)
    groups = opt_var.value.param_groups
    if type(groups) is not list or not all(type(g) is dict for g in groups):
        raise Unsupported("unsupported_value", "optimizer param_groups that are not a list of dicts")
    for g in [opt_var.value.defaults] + groups:  # read natively: a change earlier in the trace is a break
        tr.check_native(g, "the optimizer's step", refers=False)  # Note [Mutated input dicts]
    tr.guards.add(f"{src}.param_groups", f"type(X) is list and len(X) == {len(groups)}")
    for gi, g in enumerate(groups):
        params = g.get("params")
        if type(params) is not list:
            raise Unsupported("unsupported_value", "optimizer param group without a params list")
        tr.guards.add(f"{src}.param_groups[{gi}]['params']", f"type(X) is list and len(X) == {len(params)}")
    return groups


def _guard_step_function(tr, opt, src):
    if opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks:
        raise Unsupported("optimizer_hooks", "the optimizer has step hooks (runs natively)")
    tr.guards.add(src, f"type(X).step is {tr.ns.ref(type(opt).step)} and not (X._optimizer_step_pre_hooks "
                       "or X._optimizer_step_post_hooks)", f"{src}: the same step function, no step hooks")
    hooks = (_optimizer_mod._global_optimizer_pre_hooks, _optimizer_mod._global_optimizer_post_hooks)
    if any(hooks):
        raise Unsupported("optimizer_hooks", "global optimizer step hooks are registered (runs natively)")
    for h in hooks:
        tr.guards.add(tr.ns.ref(h) + ".keys()", "not X", "no global optimizer step hooks")


def _source(opt_var):
    if opt_var.source is None:
        raise Unsupported("unsupported_call", "an optimizer built inside the compiled function")
    return opt_var.source


def _bind(args, kwargs, name, default):
    value = args[0] if args else kwargs.get(name, ConstVar(default))
    if not isinstance(value, ConstVar):
        raise Unsupported("unsupported_value", f"{name} must be a constant")
    return value.value


# Note [eager's foreach path]: the shadow step takes the path eager's step takes, foreach or
# per-parameter, because the two differ in more than launches: SGD's foreach nesterov update adds
# the momentum into the gradients in place (``p.grad`` after the step is ``grad + momentum * buf``),
# the per-parameter one does not, and the two round differently. A group's ``foreach=True`` or
# ``False`` is kept; ``None`` (the default) is resolved as eager resolves it, from the real
# parameters (foreach for tensors on CUDA, per-parameter on the CPU). Where eager would choose
# foreach, the group keeps ``None`` and the fakes are admitted as foreach-capable types while the
# step runs, so that the optimizer's own rule (Adam: not with a tensor lr unless capturable) decides
# as it does in eager. The foreach ops decompose into the same per-tensor ops (ember_prims
# decomps/foreach.py), which the inductor fuses across parameters either way.
def _eager_foreach(hyper: dict, real_params: list) -> bool | None:
    foreach = hyper.get("foreach")
    if foreach is not None or hyper.get("fused"):
        return foreach
    _, default = _optimizer_mod._default_to_fused_or_foreach(real_params, bool(hyper.get("differentiable")),
                                                             use_fused=False)
    return None if default else False


@contextlib.contextmanager
def _fakes_take_foreach():
    """The trace's fake tensors count as foreach-capable, as the real tensors they stand for do
    (only groups whose real parameters are, Note [eager's foreach path], leave ``foreach`` to the
    default)."""
    from torch._subclasses.fake_tensor import FakeTensor
    types_ = _optimizer_mod._foreach_supported_types
    added = FakeTensor not in types_
    if added:
        types_.append(FakeTensor)
    try:
        yield
    finally:
        if added:
            types_.remove(FakeTensor)


@contextlib.contextmanager
def _compiling():
    """``torch.compiler.is_compiling()`` is True while torch's code is recorded (as under
    torch.compile): torch.optim then keeps its step counts in tensors."""
    old = torch.compiler._is_compiling_flag
    torch.compiler._is_compiling_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = old


# -- recording torch calls ---------------------------------------------------------------
class Recorder(TorchFunctionMode):
    """Records each torch call made on the trace's fake tensors as a graph node (the fakes
    passed in are the TensorVars' own), and returns the node's fake value."""

    def __init__(self, tr):
        super().__init__()
        self.tr = tr
        self.stacked = {}  # id(fake) of torch.stack(items) -> items
        self.vars = {}
        for var in tr.graph.by_source.values():
            self.vars[id(var.fake)] = var
        for var in tr.graph.by_object.values():
            self.vars[id(var.fake)] = var

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in _NATIVE:
            return func(*args, **kwargs)
        args, kwargs = pytree.tree_map(_real, (args, kwargs))  # Note [lifted hyperparameters]
        leaves = pytree.tree_leaves((args, kwargs))
        if not any(isinstance(x, torch.Tensor) for x in leaves):
            out = func(*args, **kwargs)
            if not any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(out)):
                return out  # a Python function of Python values (the profiler, dtypes, ...)
        rewrite = _rewrite_for(func, args, kwargs)
        if rewrite is not None:
            return rewrite(self, func, args, kwargs)
        return self.record(func, args, kwargs)

    def record(self, func, args, kwargs):
        var_args, var_kwargs = pytree.tree_map(self._var, (list(args), dict(kwargs)))
        method = _tensor_methods().get(func)
        if method is not None and var_args and isinstance(var_args[0], TensorVar):
            # A Tensor method (`__pow__` is TensorBase.pow in a wrapper) is recorded by name.
            result = self.tr.graph.call("call_method", method, var_args, var_kwargs)
        else:
            result = self.tr.graph.call("call_function", func, var_args, var_kwargs)
        fake = self._fake(result)
        if func is torch.stack and len(args) == 1 and not kwargs and isinstance(fake, torch.Tensor):
            self.stacked[id(fake)] = list(args[0])  # _foreach_tensor_scalars reads the items
        return fake

    def _var(self, x):
        if isinstance(x, torch.Tensor):
            var = self.vars.get(id(x))
            if var is None:
                raise Unsupported("unsupported_value", "the optimizer step used a tensor the trace does not know")
            return var
        return ConstVar(x)

    def _fake(self, result):
        if isinstance(result, TensorVar):
            self.vars[id(result.fake)] = result
            return result.fake
        if isinstance(result, ConstVar):
            return result.value
        items = [self._fake(i) for i in result.items]
        return items if isinstance(result, ListVar) else tuple(items)


@functools.lru_cache(maxsize=1)
def _tensor_methods() -> dict:
    out = {}
    for name in dir(torch.Tensor):
        value = inspect.getattr_static(torch.Tensor, name, None)
        if callable(value) and not isinstance(value, type):
            try:
                out.setdefault(getattr(torch.Tensor, name), name)
            except TypeError:  # unhashable
                pass
    return out


# Note [scalar arguments]: torch takes some arguments as Python scalars (``alpha``, ``value``);
# a 0-d tensor there is read with .item(), which a fake tensor cannot answer. Each rewrite
# computes the same expression with the scalar as a tensor operand.
REWRITES = {}
_rewrites = registrar(REWRITES)


def _rewrite_for(func, args, kwargs):
    if isinstance(kwargs.get("out"), torch.Tensor):
        return _out_rewrite
    name = getattr(func, "__name__", "")
    if name in _FOREACH_TENSOR_SCALARS and len(args) == 4 and isinstance(args[3], torch.Tensor):
        return _foreach_tensor_scalars
    handler = REWRITES.get(name)
    if handler is not None and isinstance(kwargs.get(handler.scalar), torch.Tensor):
        return handler
    return None


def _out_rewrite(rec, func, args, kwargs):
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    value = rec.record(func, args, kwargs)
    return rec.record(torch.Tensor.copy_, (out, value), {})


def _scalar_rewrite(scalar, combine):
    def rewrite(rec, func, args, kwargs):
        kwargs = dict(kwargs)
        t = kwargs.pop(scalar)
        name = func.__name__
        self_, *operands = args
        term = combine(rec, operands, t)
        base = name.removesuffix("_").replace("addcdiv", "add").replace("addcmul", "add")
        target = getattr(torch.Tensor, base + ("_" if name.endswith("_") else ""))
        return rec.record(target, (self_, term), kwargs)
    rewrite.scalar = scalar
    return rewrite


def _times(rec, operands, t):
    (other,) = operands
    return rec.record(operator.mul, (other, t), {})


def _quotient_times(rec, operands, t):
    a, b = operands
    return rec.record(operator.mul, (rec.record(operator.truediv, (a, b), {}), t), {})


def _product_times(rec, operands, t):
    a, b = operands
    return rec.record(operator.mul, (rec.record(operator.mul, (a, b), {}), t), {})


for _name in ("add", "add_", "sub", "sub_"):
    _rewrites(_name)(_scalar_rewrite("alpha", _times))
for _name in ("addcdiv", "addcdiv_"):
    _rewrites(_name)(_scalar_rewrite("value", _quotient_times))
for _name in ("addcmul", "addcmul_"):
    _rewrites(_name)(_scalar_rewrite("value", _product_times))


def _foreach_scalar_rewrite(scalar, combine):
    """The foreach form of ``_scalar_rewrite``: ``_foreach_add_(ps, bufs, alpha=-lr)`` (the
    foreach paths that a tensor lr reaches, Note [eager's foreach path]) becomes
    ``_foreach_add_(ps, [buf * -lr, ...])``."""
    def rewrite(rec, func, args, kwargs):
        self_, *operands = args
        if not operands or not all(isinstance(o, (list, tuple)) for o in operands):
            return rec.record(func, args, kwargs)  # a tensor operand: torch says what it takes
        kwargs = dict(kwargs)
        t = kwargs.pop(scalar)
        terms = [combine(rec, list(items), t) for items in zip(*operands)]
        name = func.__name__
        base = name.removesuffix("_").replace("addcdiv", "add").replace("addcmul", "add")
        return rec.record(getattr(torch, base + ("_" if name.endswith("_") else "")), (self_, terms), kwargs)
    rewrite.scalar = scalar
    return rewrite


for _name in ("_foreach_add", "_foreach_add_", "_foreach_sub", "_foreach_sub_"):
    _rewrites(_name)(_foreach_scalar_rewrite("alpha", _times))
for _name in ("_foreach_addcdiv", "_foreach_addcdiv_"):
    _rewrites(_name)(_foreach_scalar_rewrite("value", _quotient_times))
for _name in ("_foreach_addcmul", "_foreach_addcmul_"):
    _rewrites(_name)(_foreach_scalar_rewrite("value", _product_times))


# ``_foreach_addcdiv_(ps, a, b, scalars)`` with ``scalars`` a 1-d tensor, one per item (Adam's
# foreach path under compile stacks its step sizes so): its fake kernel refuses a tensor that is
# not on the CPU, and the inductor would leave it a library call. Item i is
# ``ps[i] + a[i] / b[i] * scalars[i]``, recorded as such, with the i-th stacked value itself where
# the scalars are a recorded ``torch.stack`` (the stack is then dead: no kernel waits on it).
_FOREACH_TENSOR_SCALARS = {"_foreach_addcdiv": _quotient_times, "_foreach_addcdiv_": _quotient_times,
                           "_foreach_addcmul": _product_times, "_foreach_addcmul_": _product_times}


def _foreach_tensor_scalars(rec, func, args, kwargs):
    self_, a, b, scalars = args
    combine = _FOREACH_TENSOR_SCALARS[func.__name__]
    items = rec.stacked.get(id(scalars))  # each parameter's scalar itself, not a read of the stack
    if items is None or len(items) != len(a):
        items = [rec.record(operator.getitem, (scalars, i), {}) for i in range(len(a))]
    terms = [combine(rec, [x, y], t) for x, y, t in zip(a, b, items)]
    name = "_foreach_add" + ("_" if func.__name__.endswith("_") else "")
    return rec.record(getattr(torch, name), (self_, terms), kwargs)
