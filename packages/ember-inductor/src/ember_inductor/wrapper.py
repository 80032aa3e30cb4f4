"""The generated Python wrapper: allocates, launches kernels, calls externs, frees.

It is plain Python source (printable, cached with the kernels' sources), executed once into a
namespace holding the launchers, the extern ops and the devices.
"""
from __future__ import annotations

import torch

from ember_inductor.ir import Buffer, ExternCall, InputBuffer
from ember_inductor.scheduler import KernelGroup


class WrapperWriter:
    def __init__(self):
        self.lines = ["def call(args):"]
        self.namespace: dict = {"torch": torch, "empty_strided": torch.empty_strided, "fit": fit_layout}
        self.base_layout: dict[str, tuple] = {}

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def const(self, prefix: str, value) -> str:
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def tensor_expr(self, b: Buffer) -> str:
        """The tensor a Buffer denotes: its base variable, or a strided view of it."""
        if self.base_layout.get(b.name) == b.layout:
            return b.name
        return (f"{b.name}.as_strided({tuple(b.sizes)}, {tuple(b.strides)}, "
                f"{b.name}.storage_offset() + {b.offset})")

    def value_expr(self, v) -> str:
        if isinstance(v, Buffer):
            return self.tensor_expr(v)
        if isinstance(v, (list, tuple)):
            inner = ", ".join(self.value_expr(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {self.value_expr(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (torch.device, torch.dtype, torch.memory_format, torch.layout)) or \
                not isinstance(v, (int, float, bool, str, type(None))):
            return self.const("c", v)
        return repr(v)


def generate_wrapper(lowered, planned, kernel_names: dict, launchers: dict, origins: dict):
    """-> (source, namespace). kernel_names: id(group) -> name; launchers: name -> callable."""
    w = WrapperWriter()
    names = [b.name if isinstance(b, InputBuffer) else f"arg{i}" for i, b in enumerate(lowered.inputs)]
    if names:
        w.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args")
    for b in lowered.inputs:
        if isinstance(b, InputBuffer):
            w.base_layout[b.name] = b.layout
    for c in lowered.constants:
        w.namespace[c.name] = c.value
        w.base_layout[c.name] = c.layout
    w.namespace.update(launchers)
    for ps in planned:
        for a in ps.allocs:
            w.base_layout[a.name] = (a.sizes, a.strides, 0)
            if a.alias:  # Note [mutated inputs written in place]: the kernel writes the input
                w.emit(f"{a.name} = {a.alias}")
            elif a.reuse:
                w.emit(f"{a.name} = {a.reuse}.as_strided({a.sizes}, {a.strides}, 0); del {a.reuse}")
            else:
                dev = w.const("dev", a.device)
                w.emit(f"{a.name} = empty_strided({a.sizes}, {a.strides}, dtype={a.dtype}, device={dev})")
        step = ps.step
        if isinstance(step, KernelGroup):
            name = kernel_names[id(step)]
            spec_args = origins[name][1]
            c_fn = getattr(launchers[name], "c_function", None)
            if c_fn is not None:  # a C entry point: pass data pointers, skip the Python launcher
                w.namespace[f"{name}_c"] = c_fn
                ptrs = ", ".join(f"{a}.data_ptr()" for a in spec_args)
                w.emit(f"{name}_c({ptrs})  # {', '.join(origins[name][0])}")
            else:
                w.emit(f"{name}({', '.join(spec_args)})  # {', '.join(origins[name][0])}")
        else:
            _emit_extern(w, step)
        if ps.frees:
            w.emit(f"del {', '.join(ps.frees)}")
    outs = [w.value_expr(o) for o in lowered.outputs]
    if lowered.single_output:
        w.emit(f"return {outs[0]}")
    elif lowered.output_kind is list:
        w.emit(f"return [{', '.join(outs)}]")
    else:
        w.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    return "\n".join(w.lines) + "\n", w.namespace


def _emit_extern(w: WrapperWriter, call: ExternCall) -> None:
    op = w.const("op", call.op)
    if isinstance(call.op, torch._ops.OpOverload) and hasattr(call.op, "_op"):
        # OpOverload.__call__ is `return self._op(*args, **kwargs)`: calling the C++ entry
        # point skips a Python frame per extern call (~0.7 µs; a hundred per BERT call)
        op += "._op"
    args = ", ".join(w.value_expr(a) for a in call.args)
    kwargs = ", ".join(f"{k}={w.value_expr(v)}" for k, v in call.kwargs.items())
    expr = f"{op}({', '.join(x for x in (args, kwargs) if x)})"
    comment = f"  # {call.origin}: {call.reason}"
    if len(call.outputs) == 1 and call.outputs[0] is not None and call.outputs[0].item is None:
        out = call.outputs[0]
        if not call.fit:  # the layout plan says its result's layout is known (a fresh product)
            w.emit(f"{out.name} = {expr}{comment}")
        else:
            w.emit(f"{out.name} = fit({expr}, {out.sizes}, {out.strides}){comment}")
        w.base_layout[out.name] = out.layout
        return
    w.emit(f"{call.name} = {expr}{comment}")
    for out in call.outputs:
        if out is not None:
            w.emit(f"{out.name} = fit({call.name}[{out.item}], {out.sizes}, {out.strides})")
            w.base_layout[out.name] = out.layout
    w.emit(f"del {call.name}")


def fit_layout(t, sizes, strides):
    """An extern's result in the layout the kernels after it were generated for (the one its
    fake kernel predicted): a library may lay its output out after its inputs' strides, which
    can differ at run time; then the result is copied, never read with the wrong strides."""
    if not isinstance(t, torch.Tensor) or (t.stride() == strides and t.shape == sizes):
        return t
    if tuple(t.shape) != tuple(sizes):
        raise RuntimeError(f"ember_inductor: an extern op returned shape {tuple(t.shape)}, expected {sizes}")
    if all(n <= 1 or a == b for n, a, b in zip(sizes, t.stride(), strides)):
        # the strides differ only where the size is 1 (a 1x1 convolution's weight gradient,
        # channels-last): the same addresses, read through the recorded strides
        return t.as_strided(sizes, strides, t.storage_offset())
    out = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    return out.copy_(t)
