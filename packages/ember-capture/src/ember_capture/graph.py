"""The FX graph being recorded: placeholders for lifted inputs, call nodes with fake values.

Every node gets ``meta["example_value"]`` (a FakeTensor, or a tuple of them) and
``meta["stack_trace"]`` (the user's file, line and source line).
"""
from __future__ import annotations

import linecache
import operator
import re
import warnings

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
)

from ember_symbolic import symbolic_dispatch, symbolic_fake_mode

from .config import Unsupported
from .sizes import SYM_TYPES, ShapePolicy, SizeNodes, concrete, has_sym
from .variables import ConstVar, ExitVar, ListVar, NullVar, TensorVar, TupleVar, Var

_DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException)

# Note [in-place operators in FX code]: FX prints `operator.iadd(a, b)` as `a += b; iadd = a`,
# which is valid Python only when `a` is a graph value (a name). An in-place operator whose left
# operand is not a graph value (`buckets = 0; buckets += t`) is the plain operator in Python
# (int has no __iadd__: `0 + t`, i.e. t.__radd__(0)), and it is recorded as such.
_PLAIN_OF_INPLACE = {
    operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imod: operator.mod,
    operator.imul: operator.mul, operator.ior: operator.or_, operator.ipow: operator.pow,
    operator.irshift: operator.rshift, operator.isub: operator.sub, operator.itruediv: operator.truediv,
    operator.ixor: operator.xor,
}
# Results of these are Python values that depend on tensor data, or on storage identity.
_DATA_METHODS = frozenset({
    "item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__repr__",
    "__str__", "__format__", "data_ptr", "untyped_storage", "storage", "_version", "equal",
    "__array__", "__len__", "__iter__", "backward", "register_hook", "is_nonzero", "allclose",
    "retain_grad", "record_stream", "share_memory_", "pin_memory", "is_set_to",
})
METADATA_TYPES = (int, float, bool, complex, str, type(None), torch.Size, torch.dtype,
                  torch.device, torch.layout, torch.memory_format) + SYM_TYPES


def stack_trace(location) -> str:
    """Traceback-style text for a frame (and the frames that inlined it) or a (file, line, name)."""
    entries = location.user_stack() if hasattr(location, "user_stack") else [location]
    out = []
    for filename, lineno, name in entries:
        line = linecache.getline(filename, lineno).strip() if filename else ""
        out.append(f'  File "{filename}", line {lineno}, in {name}\n    {line}\n')
    return "".join(out)


class OutputGraph:
    def __init__(self, shapes: ShapePolicy | None = None):
        self.graph = fx.Graph()
        self.fake_mode = symbolic_fake_mode()  # FakeTensorMode, plus Note [fake kernels for symbolic sizes]
        self.shapes = shapes
        self.sizes = SizeNodes(self.graph, shapes, self._annotate) if shapes is not None else None
        self.inputs: list[tuple[str, object]] = []  # (source, real value) per placeholder
        self.by_source: dict[str, TensorVar] = {}
        self.by_object: dict[int, TensorVar] = {}  # id(real tensor) -> its placeholder
        self._last_placeholder = None
        self.location = ("", 0, "")  # the frame being interpreted, or (filename, lineno, function name)
        self.grad_enabled = torch.is_grad_enabled()
        self.symbolic = False  # a symbol has appeared (_symbols_appear)
        self.n_ops = 0
        self._names: set = set()

    # -- inputs ---------------------------------------------------------------------------
    def add_input(self, source: str, real: torch.Tensor, name_hint: str) -> TensorVar:
        if source in self.by_source:
            return self.by_source[source]
        if real.layout != torch.strided or type(real) not in (torch.Tensor, torch.nn.Parameter):
            raise Unsupported("unsupported_input", f"cannot lift a {type(real).__name__} with layout {real.layout}")
        name = re.sub(r"\W+", "_", name_hint).strip("_") or "input"
        if not name[0].isalpha():
            name = "i_" + name
        node = self._placeholder(name)
        self._last_placeholder = node
        dims = self.shapes.tensor_dims(source, real) if self.shapes is not None else []
        if dims:  # Note [Dynamic shapes in capture]
            self._symbols_appear()
            fake = self.shapes.fake_input(self.fake_mode, source, real, dims)
        else:
            with warnings.catch_warnings():  # converting a non-leaf reads .grad, which warns
                warnings.simplefilter("ignore")
                fake = self.fake_mode.from_tensor(real)
        if self.sizes is not None:
            self.sizes.placeholders[source] = node
        node.meta["example_value"] = fake
        node.meta["stack_trace"] = stack_trace(self.location)
        node.meta["source"] = source
        var = TensorVar(node, fake, source)
        var.python_type = type(real)  # nn.Parameter stays a Parameter for isinstance()
        self.by_source[source] = var
        self.inputs.append((source, real))
        return var

    def add_int_input(self, source: str, value: int, name_hint: str) -> ConstVar:
        """An int argument that is a symbol (Note [Dynamic shapes in capture]): a placeholder whose
        example_value is a SymInt."""
        seen = self.sizes.placeholders.get(source)
        if seen is not None:  # read through the same source again: the same symbol
            return ConstVar(seen.meta["example_value"], source)
        name = re.sub(r"\W+", "_", name_hint).strip("_") or "n"
        node = self._placeholder(name if name[0].isalpha() else "i_" + name)
        self._last_placeholder = node
        self._symbols_appear()
        sym = self.shapes.symbol(value, source, (source, None))
        node.meta["example_value"] = sym
        node.meta["stack_trace"] = stack_trace(self.location)
        node.meta["source"] = source
        self.sizes.placeholders[source] = node
        self.inputs.append((source, value))
        return ConstVar(sym, source)

    def _symbols_appear(self):
        """Before the first symbol of the trace: the fake op cache keys SymInts through torch's
        shape environment, which ember does not use, so it is off from here on (what it cached so far
        holds static fakes only); and ops run under the Python dispatcher from here on (Note [C++
        kernels that read plain sizes] in ember_symbolic), as autograd runs a symbolic trace."""
        self.fake_mode.cache_enabled = False
        self.symbolic = True

    def _placeholder(self, base: str) -> fx.Node:
        """A placeholder whose target (the forward's parameter) is its node name.

        Note [placeholder names]: FX renames a node whose name is taken or shadows a builtin
        (`input` becomes `input_1`) but keeps the target as the parameter name, and its
        generated forward then starts with `input_1 = input`; a second placeholder whose target
        is `input_1` would then read the first input. The target is set to the name FX chose."""
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        if self._last_placeholder is None:
            ctx = self.graph.inserting_before(None)
        else:
            ctx = self.graph.inserting_after(self._last_placeholder)
        with ctx:
            node = self.graph.placeholder(name)
        node.target = node.name
        self._names.update((name, node.name))
        return node

    # -- calls ----------------------------------------------------------------------------
    # Note [input metadata mutations]: `x.unsqueeze_(0)` on an input changes the caller's tensor
    # object (its shape, its strides), which no graph output can carry back, and the trace would
    # change the placeholder's fake in place (its example_value then disagrees with the input:
    # EMBER_CHECK's interface-1 check caught it; without it the backend failed and the graph ran
    # eagerly). Such a call is a graph break: it runs natively, on the real input.
    def call(self, kind: str, target, args, kwargs) -> Var:
        """Record ``target(*args, **kwargs)`` (kind: call_function or call_method)."""
        if kind == "call_method" and target in _DATA_METHODS:
            raise Unsupported("data_dependent", f"Tensor.{target}() needs tensor data")
        if (args and isinstance(args[0], TensorVar) and _name(target).split(".")[-1] in _INPLACE_METADATA
                and getattr(args[0].ident, "node", None) is not None and args[0].ident.node.op == "placeholder"):
            # Note [input metadata mutations]: the graph's inputs keep their shapes and strides
            raise Unsupported("unsupported_op", f"{_name(target)} changes the shape or strides of a graph "
                                                "input in place")
        if target in _PLAIN_OF_INPLACE and not isinstance(args[0], TensorVar):
            target = _PLAIN_OF_INPLACE[target]  # Note [in-place operators in FX code]
        try:
            try:
                out, args, kwargs = self._run_fake(kind, target, args, kwargs), args, kwargs
            except _DATA_DEPENDENT + (UnsupportedOperatorException, Unsupported):
                raise
            except Exception:
                if not any(has_sym(v.value) for v in _consts_in((args, kwargs))):
                    raise
                # An op whose fake kernel takes no symbolic int arguments (constant_pad_nd):
                # those arguments are specialized (guards), the tensors' sizes stay symbolic.
                args, kwargs = _concrete_vars(args), _concrete_vars(kwargs)
                out = self._run_fake(kind, target, args, kwargs)
        except _DATA_DEPENDENT as e:
            raise Unsupported("data_dependent", f"{_name(target)} depends on tensor data ({type(e).__name__})") from None
        except UnsupportedOperatorException as e:
            raise Unsupported("unsupported_op", f"{_name(target)} has no fake implementation: {e}") from None
        except Unsupported:
            raise
        except Exception as e:  # the user's code would raise too: run it eagerly and let it
            raise Unsupported("trace_error", f"{_name(target)} raised {type(e).__name__}: {e}") from None
        node_args, _ = _lower(args, self.sizes)
        node_kwargs, _ = _lower(kwargs, self.sizes)
        # An op called for its effect (setitem; an op that returns None and writes its tensor
        # arguments, as custom ops with `mutates_args` do) is a node although nothing uses it.
        if target is operator.setitem or (out is None and kind == "call_function"
                                          and any(isinstance(a, TensorVar) for a in _flat(args, kwargs))):
            node = self.graph.create_node(kind, target, tuple(node_args), dict(node_kwargs))
            self._annotate(node, None)
            self.n_ops += 1
            return ConstVar(None)
        if not _has_tensor(out):
            if isinstance(out, METADATA_TYPES) or (isinstance(out, tuple) and all(isinstance(o, METADATA_TYPES) for o in out)):
                if kind == "call_method" or has_sym(out) or any(isinstance(a, TensorVar) for a in _flat(args, kwargs)):
                    return ConstVar(out)
            raise Unsupported("unsupported_op", f"{_name(target)} returned a {type(out).__name__}, not a tensor")
        node = self.graph.create_node(kind, target, tuple(node_args), dict(node_kwargs))
        self._annotate(node, out)
        self.n_ops += 1
        result = self._wrap_output(node, out)
        # In place (`x.add_(1)`) or into `out=` (`torch.add(a, b, out=buf)`): the result is the
        # same tensor object as that argument, for `is` and `id()` as in eager.
        written = {id(v.fake): v for a in _flat(args, kwargs)
                   for v in (a.items if isinstance(a, (TupleVar, ListVar)) else [a]) if isinstance(v, TensorVar)}
        for r in (result.items if isinstance(result, (TupleVar, ListVar)) else [result]):
            if isinstance(r, TensorVar) and id(r.fake) in written:
                r.ident = written[id(r.fake)].ident
        return result

    def _run_fake(self, kind, target, args, kwargs):
        _, fake_args = _lower(args, None)
        _, fake_kwargs = _lower(kwargs, None)
        with self.fake_mode, torch.set_grad_enabled(self.grad_enabled), symbolic_dispatch(self.symbolic):
            if kind == "call_method":
                return getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
            return target(*fake_args, **fake_kwargs)

    def _annotate(self, node, fake):
        node.meta["example_value"] = fake
        node.meta["stack_trace"] = stack_trace(self.location)

    def _wrap_output(self, node, out) -> Var:
        if isinstance(out, torch.Tensor):
            return TensorVar(node, out)
        if isinstance(out, (tuple, list)):
            items = []
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    child = self.graph.call_function(operator.getitem, (node, i))
                    self._annotate(child, o)
                    items.append(TensorVar(child, o))
                elif isinstance(o, METADATA_TYPES):
                    items.append(ConstVar(o))
                else:
                    raise Unsupported("unsupported_op", f"op returned a {type(o).__name__} inside a sequence")
            if isinstance(out, list):
                return ListVar(items)
            fields = getattr(type(out), "_fields", None) or _structseq_fields(out)
            return TupleVar(items, cls=type(out), fields=fields)
        raise Unsupported("unsupported_op", f"op returned {type(out).__name__}")

    def set_grad_enabled(self, enabled: bool):
        node = self.graph.call_function(torch._C._set_grad_enabled, (enabled,))
        node.meta["stack_trace"] = stack_trace(self.location)
        self.grad_enabled = enabled

    def enter_autocast(self, args, tr) -> "ExitVar":
        node = self.graph.call_function(torch.amp.autocast_mode._enter_autocast, tuple(args))
        self._annotate(node, None)
        device_type, dtype, enabled, cache_enabled = args
        context = torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        context.__enter__()  # fake values are computed under the same autocast state
        tr.open_contexts.append(context)
        return ExitVar(node=node, context=context)

    def close_autocast(self, exit_var):
        """Leave an autocast region in the graph only: a graph break inside the block, which
        continues under a real autocast (Note [Breaks in autocast blocks])."""
        node = self.graph.call_function(torch.amp.autocast_mode._exit_autocast, (exit_var.node,))
        self._annotate(node, None)

    def exit_autocast(self, exit_var, tr):
        node = self.graph.call_function(torch.amp.autocast_mode._exit_autocast, (exit_var.node,))
        self._annotate(node, None)
        tr.open_contexts.remove(exit_var.context)
        exit_var.context.__exit__(None, None, None)

    def finish(self, outputs: list[TensorVar]) -> fx.GraphModule:
        self.graph.output(tuple(v.node for v in outputs))
        return fx.GraphModule(torch.nn.Module(), self.graph)


def _structseq_fields(out):
    if type(out) is tuple:
        return None
    names = [n for n in dir(type(out)) if not n.startswith("_") and n not in ("count", "index", "n_fields", "n_sequence_fields", "n_unnamed_fields")]
    fields = {}
    for n in names:
        val = getattr(out, n, None)
        for i, o in enumerate(out):
            if o is val:
                fields[n] = i
    return fields or None


_INPLACE_METADATA = frozenset({"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_",
                                "resize_", "resize_as_", "as_strided_", "set_"})


def _name(target):
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)


def _has_tensor(out) -> bool:
    if isinstance(out, torch.Tensor):
        return True
    if isinstance(out, (tuple, list)):
        return any(_has_tensor(o) for o in out)
    return False


def _flat(args, kwargs):
    return list(args) + list(kwargs.values())


def _consts_in(x):
    """The ConstVars in a structure of Vars (lists, tuples, dicts, TupleVars, ListVars, slices)."""
    if isinstance(x, ConstVar):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _consts_in(v)
    elif isinstance(x, (list, tuple)) and not isinstance(x, Var):
        for v in x:
            yield from _consts_in(v)
    elif isinstance(x, (TupleVar, ListVar)):
        yield from _consts_in(x.items)
    elif isinstance(x, SliceParts):
        yield from _consts_in(x.parts)


def _concrete_vars(x):
    """The structure ``x`` with each symbolic size in its constants replaced by its value."""
    if isinstance(x, ConstVar):
        return ConstVar(concrete(x.value), x.source) if has_sym(x.value) else x
    if isinstance(x, dict):
        return {k: _concrete_vars(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and not isinstance(x, Var):
        return type(x)(_concrete_vars(v) for v in x)
    if isinstance(x, TupleVar):
        return TupleVar(_concrete_vars(x.items), x.source, x.cls, x.fields)
    if isinstance(x, ListVar):
        return ListVar(_concrete_vars(x.items), x.source)
    if isinstance(x, SliceParts):
        return SliceParts(_concrete_vars(x.parts))
    return x


def _lower(x, sizes: SizeNodes | None = None):
    """Var structure -> (FX argument, fake argument); symbolic sizes become nodes (``sizes``;
    without it, only the fake arguments are meant)."""
    if isinstance(x, (list, tuple)) and not isinstance(x, Var):
        pairs = [_lower(i, sizes) for i in x]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(x, dict):
        pairs = {k: _lower(v, sizes) for k, v in x.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(x, TensorVar):
        return x.node, x.fake
    if isinstance(x, ConstVar):
        v = x.value
        if has_sym(v):  # Note [Dynamic shapes in capture]
            return (sizes.arg(v) if sizes is not None else None), v
        if isinstance(v, (int, float, complex)) and type(v) not in (bool, int, float, complex):
            # a subclass (numpy.float64) is its Python value in a graph: FX prints its repr
            # (`np.float64(2.0)`) into the generated code, where `np` is not defined
            v = next(t for t in (int, float, complex) if isinstance(v, t))(v)
            return v, v
        if isinstance(v, slice) or isinstance(v, METADATA_TYPES) or v is Ellipsis or isinstance(v, (tuple, list, range)):
            return v, v
        if callable(v) or isinstance(v, torch.finfo):
            return v, v
        raise Unsupported("unsupported_arg", f"cannot pass a {type(v).__name__} constant to a tensor op")
    if isinstance(x, TupleVar) and x.cls is tuple:
        n, f = _lower(x.items, sizes)
        return tuple(n), tuple(f)
    if isinstance(x, ListVar):
        return _lower(x.items, sizes)
    if isinstance(x, SliceParts):
        n, f = _lower(x.parts, sizes)
        return slice(*n), slice(*f)
    if isinstance(x, NullVar):
        raise Unsupported("internal", "NULL passed to an op")
    raise Unsupported("unsupported_arg", f"cannot pass {type(x).__name__} to a tensor op")


class SliceParts(Var):
    """A slice whose bounds are not all constants (e.g. hold a tensor)."""

    def __init__(self, parts):
        self.parts = list(parts)


__all__ = ["OutputGraph", "SliceParts", "stack_trace", "METADATA_TYPES"]
