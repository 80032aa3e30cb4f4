"""The generated Python wrapper: allocates, launches kernels, calls externs, frees.

It is plain Python source (printable, cached with the kernels' sources), executed once into a
namespace holding the launchers, the extern ops and the devices.

Note [binding size symbols]
    In a graph with symbolic sizes (sizes.py) the wrapper starts by reading each size symbol
    it uses from the call's inputs: the first tensor input dimension whose size is exactly that
    symbol (`s0 = in0.shape[0]`), else an int input that is the symbol (`s1 = arg2`), else a
    tensor input's stride that is (`s2 = in1.stride(0)`). Where to read each symbol is decided
    once, at compile time; a call pays one attribute read per symbol. Buffer sizes, views,
    extern arguments and the kernels' size arguments are then expressions over those names.
    A symbolic input whose layout differs from the one compiled for (its strides in terms of
    the bound symbols) is copied into that layout first, as CompiledGraph does for static ones.
"""
from __future__ import annotations

import math
import re

import sympy
import torch

from ember_inductor.ir import Buffer, ExternCall, InputBuffer
from ember_inductor.planner import in_place_externs
from ember_inductor.scheduler import KernelGroup
from ember_inductor.sizes import all_static, is_size_symbol, py_size, py_sizes, size_symbols


class WrapperWriter:
    def __init__(self):
        self.lines = ["def call(args):"]
        self.namespace: dict = {"torch": torch, "fit": fit_layout,
                                "aligned": aligned_operand}
        self.base_layout: dict[str, tuple] = {}
        self.used: set = set()  # size symbols the body mentions (Note [binding size symbols])
        self.templates: dict = {}  # (dtype, device) -> the name of its template tensor
        self.arena: dict = {}  # buffer name -> its slot in `_hs` (Note [host scalar arena])
        self.arena_stale = False  # a C++ kernel wrote a slot since the last `_hsv = _hs.tolist()`
        self.alloc_as: dict = {}  # buffer name -> the layout it is allocated in (Note [allocated as read])

    def sizes(self, values) -> str:
        """A tuple of sizes as source; the symbols it names are recorded for binding."""
        self.used.update(size_symbols(values))
        return py_sizes(values)

    def size(self, value) -> str:
        self.used.update(size_symbols([value]))
        return py_size(value)

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def const(self, prefix: str, value) -> str:
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def template(self, dtype: torch.dtype, device: torch.device) -> str:
        """Note [allocation from a template]: the name of an empty tensor of this dtype and device;
        the wrapper allocates with `template.new_empty_strided(sizes, strides)`, whose dtype and
        device come from the template. It is the same allocation as `torch.empty_strided(sizes,
        strides, dtype=..., device=...)` without parsing two keyword arguments on every call: 0.9
        against 1.9 µs a call on this project's CPU, and a graph allocates hundreds of buffers
        per call (BERT's training step with AdamW: ~1300)."""
        key = (dtype, torch.device(device))
        name = self.templates.get(key)
        if name is None:
            with torch.utils._python_dispatch._disable_current_modes():  # a real tensor, never a fake
                name = self.templates[key] = self.const("tmpl", torch.empty(0, dtype=dtype, device=device))
        return name

    def tensor_expr(self, b: Buffer) -> str:
        """The tensor a Buffer denotes: its base variable, or a strided view of it."""
        base = self.base_layout.get(b.name)
        if base == b.layout:
            return b.name
        dims = _permutation(base, b.layout)
        if dims is not None:  # Note [permuted views]
            return f"{b.name}.t()" if dims == (1, 0) else f"{b.name}.permute({dims})"
        return (f"{b.name}.as_strided({self.sizes(b.sizes)}, {self.sizes(b.strides)}, "
                f"{b.name}.storage_offset() + {self.size(b.offset)})")

    def value_expr(self, v) -> str:
        if isinstance(v, Buffer):
            return self.tensor_expr(v)
        if isinstance(v, (list, tuple)):
            inner = ", ".join(self.value_expr(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {self.value_expr(x)}" for k, x in v.items()) + "}"
        if isinstance(v, sympy.Basic):  # a size expression (Note [binding size symbols])
            text = self.size(v)
            for name in re.findall(r"\b([a-z_]+)\(", text):  # sqrt(s0): the math module's
                if hasattr(math, name):
                    self.namespace[name] = getattr(math, name)
            return text
        if isinstance(v, (torch.device, torch.dtype, torch.memory_format, torch.layout)) or \
                not isinstance(v, (int, float, bool, str, type(None))):
            return self.const("c", v)
        return repr(v)


# Note [permuted views]: an extern op often reads a variable through a permutation of its own
# layout (every Linear's weight, transposed, in the forward and the backward). `x.t()` /
# `x.permute(dims)` is that view exactly (same storage offset, the sizes and strides permuted)
# and costs the host less than `x.as_strided(sizes, strides, x.storage_offset() + 0)` (0.95 /
# 1.1 against 1.4 µs on this project's CPU). The variable's layout is its base layout: an
# input's is checked on every call, or the input copied to it (Note [layout check in one
# pass]); an allocation's and an extern result's are made so (`fit`).
def _permutation(base: tuple | None, view: tuple) -> tuple[int, ...] | None:
    """dims such that the view is `base` permuted by dims, at the same offset (0), or None."""
    if base is None or len(base[0]) != len(view[0]) or len(view[0]) < 2:
        return None
    if not (_is_zero(base[2]) and _is_zero(view[2])):
        return None
    pairs = list(zip(base[0], base[1]))
    dims: list[int] = []
    for pair in zip(view[0], view[1]):
        k = next((k for k, p in enumerate(pairs) if k not in dims and p == pair), None)
        if k is None:
            return None
        dims.append(k)
    return tuple(dims)


def _is_zero(v) -> bool:
    return type(v) is int and v == 0


def generate_wrapper(lowered, planned, kernel_names: dict, launchers: dict, origins: dict,
                     at_storage_start: bool = False, combos: dict | None = None):
    """-> (source, namespace). kernel_names: id(group) -> name; launchers: name -> callable;
    origins: name -> (graph nodes, buffer arguments, size arguments). at_storage_start: symbolic
    inputs must start their storage (Note [input offsets] in compile.py). combos: combo kernel
    name -> its horizontal.Combo (Note [horizontal fusion]): it is called where its part `at`
    was, after every part's allocations; the frees of the parts up to `at` follow the call, a
    later part's stay where they were."""
    w = WrapperWriter()
    combo_at = {c.at: (name, c.parts) for name, c in (combos or {}).items()}
    in_combo = {n for c in (combos or {}).values() for n in c.parts}
    planned_of = {kernel_names[id(ps.step)]: ps for ps in planned if isinstance(ps.step, KernelGroup)}
    position = {name: i for i, name in enumerate(kernel_names[id(ps.step)] for ps in planned
                                                 if isinstance(ps.step, KernelGroup))}
    names = [b.name if isinstance(b, InputBuffer) else f"arg{i}" for i, b in enumerate(lowered.inputs)]
    if names:
        w.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args")
    prologue = len(w.lines)  # the symbols are bound here, once the body says which it uses
    for b in lowered.inputs:
        if isinstance(b, InputBuffer):
            w.base_layout[b.name] = b.layout
    for c in lowered.constants:
        w.namespace[c.name] = c.value
        w.base_layout[c.name] = c.layout
    w.namespace.update(launchers)
    w.arena = _host_scalar_arena(lowered, planned, launchers, origins)
    w.alloc_as = _allocated_as_read(lowered, planned)
    if w.arena:
        w.emit(f"_hs = {w.template(torch.float32, torch.device('cpu'))}.new_empty_strided(({len(w.arena)},), (1,)); "
               "_hsp = _hs.data_ptr()")
    for ps in planned:
        step = ps.step
        name = kernel_names[id(step)] if isinstance(step, KernelGroup) else None
        if name in combo_at:  # Note [horizontal fusion]: every part's allocations, one launch
            at, (name, parts) = position[name], combo_at[name]
            for part in parts:
                _emit_allocs(w, planned_of[part].allocs)
            _emit_launch(w, name, launchers, origins)
            frees = [n for part in parts if position[part] < at for n in planned_of[part].frees if n not in w.arena]
            if frees:  # parts moved down: what they read last is freed after the launch
                w.emit(f"del {', '.join(frees)}")
        elif name in in_combo:
            if position[name] < position[next(c.at for c in combos.values() if name in c.parts)]:
                continue  # launched later, with its frees
        elif name is not None:
            _emit_allocs(w, ps.allocs)
            _emit_launch(w, name, launchers, origins)
        else:
            _emit_allocs(w, ps.allocs)
            _emit_extern(w, step)
        frees = [n for n in ps.frees if n not in w.arena]
        if frees:
            w.emit(f"del {', '.join(frees)}")
    outs = [w.value_expr(o) for o in lowered.outputs]
    if lowered.single_output:
        w.emit(f"return {outs[0]}")
    elif lowered.output_kind is list:
        w.emit(f"return [{', '.join(outs)}]")
    else:
        w.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    w.lines[prologue:prologue] = _bind_and_check(w, lowered, at_storage_start)
    if names:
        w.lines = _free_inputs_early(w.lines, [b.name for b in lowered.inputs if isinstance(b, InputBuffer)])
    return "\n".join(w.lines) + "\n", w.namespace


# Note [inputs freed early]
#     The wrapper empties the list it is called with (`args.clear()`, after unpacking it) and
#     drops each input's name after the last line that mentions it, so an input the caller
#     handed over with the list is freed there, not when the call returns. A backward graph's
#     inputs are the activations the forward saved: ember_autograd hands them over
#     (`CompiledGraph.run_owned`, after autograd's own references are cleared), and each is
#     freed once the backward has used it, as eager's engine frees a node's saved tensors after
#     the node; holding all of them to the end put BERT's backward 0.8 GB above eager's peak.
#     `CompiledGraph.__call__` passes a copy of the caller's list: a direct call frees nothing
#     of the caller's. The last mention is found in the generated source itself (a kernel's
#     arguments, an extern's, an alias of a mutated input, the return), so no use is missed;
#     an input mentioned inside an indented block is kept to the end.
def _free_inputs_early(lines: list[str], inputs: list[str]) -> list[str]:
    code = [line.split("  # ", 1)[0] for line in lines]
    last: dict[str, int] = {}
    nested: set[str] = set()
    for i, text in enumerate(code[2:], start=2):  # after `def call(args):` and the unpacking
        for name in set(re.findall(r"\b(in\d+)\b", text)):
            last[name] = i
            if text.startswith("     "):
                nested.add(name)
    after: dict[int, list[str]] = {}
    for name in inputs:
        i = last.get(name, 1)
        if name in nested or code[i].lstrip().startswith("return"):
            continue
        after.setdefault(i, []).append(name)
    out = [lines[0], lines[1], "    args.clear()"]
    if 1 in after:
        out.append(f"    del {', '.join(after[1])}")
    for i in range(2, len(lines)):
        out.append(lines[i])
        if i in after:
            out.append(f"    del {', '.join(after[i])}")
    return out


def _emit_allocs(w: WrapperWriter, allocs) -> None:
    for a in allocs:
        w.base_layout[a.name] = (a.sizes, a.strides, 0)
        if a.name in w.arena:  # a slot of `_hs` (Note [host scalar arena])
            continue
        read_as = w.alloc_as.get(a.name)
        if read_as is not None and not a.alias and not a.reuse and _same_storage(a.sizes, a.strides, *read_as[:2]):
            # Note [allocated as read]
            w.base_layout[a.name] = read_as
            w.emit(f"{a.name} = {w.template(a.dtype, a.device)}.new_empty_strided({w.sizes(read_as[0])}, "
                   f"{w.sizes(read_as[1])})")
            continue
        if a.alias:  # Note [mutated inputs written in place]: the kernel writes the input
            w.emit(f"{a.name} = {a.alias}")
        elif a.reuse:
            w.emit(f"{a.name} = {a.reuse}.as_strided({w.sizes(a.sizes)}, {w.sizes(a.strides)}, 0); "
                   f"del {a.reuse}")
        else:
            w.emit(f"{a.name} = {w.template(a.dtype, a.device)}.new_empty_strided({w.sizes(a.sizes)}, "
                   f"{w.sizes(a.strides)})")


# Note [allocated as read]
#     A kernel writes a buffer in its own order (channels-last activations: (N, H, W, C),
#     contiguous) and the library call after it reads the same memory as a permuted view
#     ((N, C, H, W) with channels-last strides). Kernels address a buffer from its storage's
#     start and never read the tensor's shape, so a buffer whose every view read by an extern
#     op or returned is one such permutation of it is allocated in that view's sizes and
#     strides: the reader gets the buffer itself, not an `as_strided` made on every call
#     (54 per resnet50 call).
def _allocated_as_read(lowered, planned) -> dict:
    """name -> the (sizes, strides, 0) layout every view of that buffer is read in, for the
    buffers read through exactly one layout other than their own."""
    leaves = [o for o in lowered.outputs if isinstance(o, Buffer)]
    for ps in planned:
        if isinstance(ps.step, ExternCall):
            leaves += [b for b in torch.utils._pytree.tree_leaves((ps.step.args, ps.step.kwargs))
                       if isinstance(b, Buffer)]
    seen: dict = {}
    for b in leaves:
        seen.setdefault(b.name, set()).add(b.layout if getattr(b, "is_view", False) else None)
    read_as = {name: layouts.pop() for name, layouts in seen.items() if len(layouts) == 1}
    return {name: layout for name, layout in read_as.items() if layout is not None and layout[2] == 0}


def _same_storage(sizes, strides, view_sizes, view_strides) -> bool:
    """Static layouts that are permutations of each other (the same dense memory)."""
    if not all_static((*sizes, *strides, *view_sizes, *view_strides)):
        return False
    def dims(ns, sts):
        return sorted((int(n), int(st)) for n, st in zip(ns, sts) if int(n) != 1)
    return dims(sizes, strides) == dims(view_sizes, view_strides)


def _emit_launch(w: WrapperWriter, name: str, launchers: dict, origins: dict) -> None:
    spec_args, size_args = origins[name][1], [str(v) for v in origins[name][2]]
    w.used.update(origins[name][2])
    c_fn = getattr(launchers[name], "c_function", None)
    arena = w.arena
    if c_fn is not None:  # a C entry point: pass data pointers, skip the Python launcher
        w.namespace[f"{name}_c"] = c_fn
        ptrs = [(f"_hsp + {4 * arena[a]}" if arena[a] else "_hsp") if a in arena else f"{a}.data_ptr()"
                for a in spec_args]
        w.emit(f"{name}_c({', '.join(ptrs + size_args)})  # {', '.join(origins[name][0])}")
        w.arena_stale = w.arena_stale or any(a in arena for a in spec_args)
        return
    args = [f"_hsv[{arena[a[:-7]]}]" if a.endswith(".item()") and a[:-7] in arena else a for a in spec_args]
    if w.arena_stale and args != spec_args:  # the values the C++ kernels wrote, read once
        w.emit("_hsv = _hs.tolist()")
        w.arena_stale = False
    w.emit(f"{name}({', '.join(args + size_args)})  # {', '.join(origins[name][0])}")


# Note [host scalar arena]
#     The 0-d float32 CPU buffers that an optimizer step's scalar arithmetic makes (AdamW's bias
#     corrections and step size per parameter: Note [host scalars] in lowering/__init__.py) are
#     written by C++ kernels and read only by kernels: the C++ ones take their address, the
#     Triton ones their value. Allocated one by one, each cost an allocation, a `data_ptr()`
#     and an `.item()` per call: ~600 of each per AdamW step of BERT. Such buffers are instead
#     slots of one float32 CPU tensor allocated per call (`_hs`): a C++ kernel gets the slot's
#     address (`_hsp + 4 * k`), and the Triton kernels after it get the slots' values from one
#     `_hs.tolist()`, taken after the C++ kernels that wrote them (the wrapper runs the CPU
#     kernels synchronously, in order). A buffer is a slot only if nothing else sees it: not an
#     output, not read by an extern op or a Python-launched kernel, not recycled for another.
def _host_scalar_arena(lowered, planned, launchers: dict, origins: dict) -> dict:
    """name -> slot of the buffers that live in the call's host-scalar arena."""
    cpu = torch.device("cpu")
    candidates = {a.name for ps in planned for a in ps.allocs
                  if a.sizes == () and a.dtype == torch.float32 and torch.device(a.device) == cpu
                  and a.alias is None and a.reuse is None}
    if not candidates:
        return {}
    candidates -= {a.reuse for ps in planned for a in ps.allocs if a.reuse}
    candidates -= {o.name for o in lowered.outputs if isinstance(o, Buffer)}
    for ps in planned:
        if isinstance(ps.step, ExternCall):
            candidates -= {b.name for b in torch.utils._pytree.tree_leaves((ps.step.args, ps.step.kwargs))
                           if isinstance(b, Buffer)}
    for name, launcher in launchers.items():
        if name not in origins:
            continue
        by_pointer = getattr(launcher, "c_function", None) is not None
        for a in origins[name][1]:
            if not (by_pointer or a.endswith(".item()")):
                candidates.discard(a)
    return {name: k for k, name in enumerate(sorted(candidates, key=lambda n: (len(n), n)))}


def symbol_sources(inputs) -> dict:
    """Note [binding size symbols]: size symbol -> the Python expression reading it from the
    call's inputs (`in0.shape[0]`, `arg2`, `in1.stride(0)`), the first such place."""
    found: dict = {}
    tensors = [b for b in inputs if isinstance(b, InputBuffer)]
    for b in tensors:
        for d, s in enumerate(b.sizes):
            if is_size_symbol(s):
                found.setdefault(s, f"{b.name}.shape[{d}]")
    for i, v in enumerate(inputs):
        if is_size_symbol(v):
            found.setdefault(v, f"arg{i}")
    for b in tensors:
        for d, s in enumerate(b.strides):
            if is_size_symbol(s):
                found.setdefault(s, f"{b.name}.stride({d})")
    return found


def _bind_and_check(w: WrapperWriter, lowered, at_storage_start: bool) -> list[str]:
    """The wrapper's first lines in a symbolic graph: bind the symbols, relayout the inputs."""
    symbolic = [b for b in lowered.inputs if isinstance(b, InputBuffer) and b.is_symbolic]
    if not symbolic and not w.used:
        return []
    sources = symbol_sources(lowered.inputs)
    checks = []
    if symbolic:
        w.namespace["relayout"] = relayout_input
    for b in symbolic:
        sizes, strides = w.sizes(b.sizes), w.sizes(b.strides)
        offset = f" or {b.name}.storage_offset()" if at_storage_start else ""
        checks.append(f"    if {b.name}.stride() != {strides} or {b.name}.shape != {sizes}{offset}: "
                      f"{b.name} = relayout({b.name}, {sizes}, {strides})")
    missing = [s for s in w.used if s not in sources]
    if missing:
        raise NotImplementedError(
            f"ember_inductor: the size symbol(s) {', '.join(map(str, sorted(missing, key=str)))} are used "
            f"but are not a dimension, a stride or an int of the graph's inputs")
    order = sorted(w.used, key=lambda s: int(s.name[1:]))
    return [f"    {s} = {sources[s]}" for s in order] + checks


def relayout_input(t, sizes, strides):
    """A symbolic input in the layout the graph was compiled for (Note [binding size symbols])."""
    if tuple(t.shape) != tuple(sizes):
        raise ValueError(f"input of shape {tuple(t.shape)} where the graph was compiled for {tuple(sizes)}")
    out = torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _emit_extern(w: WrapperWriter, call: ExternCall) -> None:
    if call.in_place:  # Note [an extern's operand written in place] (planner.py)
        op = w.const("op", in_place_externs()[call.op])
    elif _cudnn_direct(call):  # Note [convolutions straight to cuDNN]
        op = w.const("conv", cudnn_convolution)
    else:
        op = w.const("op", call.op)
    if not call.in_place and op.startswith("op") and isinstance(call.op, torch._ops.OpOverload) \
            and hasattr(call.op, "_op"):
        # OpOverload.__call__ is `return self._op(*args, **kwargs)`: calling the C++ entry
        # point skips a Python frame per extern call (~0.7 µs; a hundred per BERT call)
        op += "._op"
    aligned = _aligned_operands(call.op)
    args = ", ".join(_operand(w, a, i in aligned) for i, a in enumerate(call.args))
    kwargs = ", ".join(f"{k}={_operand(w, v, k in aligned)}" for k, v in call.kwargs.items())
    expr = f"{op}({', '.join(x for x in (args, kwargs) if x)})"
    comment = f"  # {call.origin}: {call.reason}"
    if len(call.outputs) == 1 and call.outputs[0] is not None and call.outputs[0].item is None:
        out = call.outputs[0]
        if not call.fit:  # the layout plan says its result's layout is known (a fresh product)
            w.emit(f"{out.name} = {expr}{comment}")
        else:
            w.emit(f"{out.name} = fit({expr}, {w.sizes(out.sizes)}, {w.sizes(out.strides)}){comment}")
        w.base_layout[out.name] = out.layout
        return
    w.emit(f"{call.name} = {expr}{comment}")
    for out in call.outputs:
        if out is not None:
            w.emit(f"{out.name} = fit({call.name}[{out.item}], {w.sizes(out.sizes)}, {w.sizes(out.strides)})")
            w.base_layout[out.name] = out.layout
    w.emit(f"del {call.name}")


# Note [convolutions straight to cuDNN]
#     `aten.convolution` reaches cuDNN through two dispatcher layers (`convolution`,
#     `_convolution`), whose argument checks and backend choice cost ~10 µs of host per call under
#     torch.profiler (resnet50: 53 convolutions a call, and a host-bound model at batch 32). For a
#     2-D CUDA convolution that `_convolution` would send to cuDNN anyway (not transposed, no
#     bias, not depthwise, float16/bfloat16/float32, 32-bit indexable), the wrapper calls
#     `aten.cudnn_convolution` itself with the flags `_convolution` would pass, read on every
#     call (cuDNN enabled, benchmark, deterministic (cuDNN's or torch's), TF32); with cuDNN
#     disabled it calls `aten.convolution` as before. The same library call, the same result.
_CUDNN_CONV = torch.ops.aten.cudnn_convolution.default._op
_ATEN_CONV = torch.ops.aten.convolution.default._op
_cudnn_enabled = torch._C._get_cudnn_enabled
_cudnn_benchmark = torch._C._get_cudnn_benchmark
_cudnn_deterministic = torch._C._get_cudnn_deterministic
_deterministic_algorithms = torch._C._get_deterministic_algorithms
_cudnn_tf32 = torch._C._get_cudnn_allow_tf32


def cudnn_convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """`aten.convolution` of a call `_cudnn_direct` accepted (Note [convolutions straight to cuDNN])."""
    if _cudnn_enabled():
        return _CUDNN_CONV(x, weight, padding, stride, dilation, groups, _cudnn_benchmark(),
                           _cudnn_deterministic() or _deterministic_algorithms(), _cudnn_tf32())
    return _ATEN_CONV(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _cudnn_direct(call: ExternCall) -> bool:
    if call.op is not torch.ops.aten.convolution.default or call.kwargs or len(call.args) != 9:
        return False
    x, weight, bias, _, _, _, transposed, _, groups = call.args
    out = call.outputs[0] if len(call.outputs) == 1 else None
    if (transposed or bias is not None or not isinstance(x, Buffer) or not isinstance(weight, Buffer)
            or out is None or len(x.sizes) != 4 or torch.device(out.device).type != "cuda"
            or out.dtype not in (torch.float32, torch.float16, torch.bfloat16)
            or not torch.backends.cudnn.is_available()):
        return False
    if not all_static((*x.sizes, *weight.sizes, *out.sizes)) or not isinstance(groups, int):
        return False
    if groups != 1 and int(weight.sizes[1]) == 1:  # depthwise: ATen may choose its own kernel
        return False
    return max(math.prod(int(n) for n in b.sizes) for b in (x, weight, out)) < 2**31


# Note [aligned attention bias]: CUDA's memory-efficient attention kernel (ATen's
# _scaled_dot_product_efficient_attention and its backward) requires every stride of attn_bias
# but the last to be a multiple of 16 bytes, and raises otherwise. Eager never trips on it:
# a mask built by expand has stride 0 where it broadcasts. A mask the graph materializes
# densely has row stride = sequence length (7 * 4 bytes at sequence 7): the call raised, and the
# graph ran eagerly. The wrapper hands such an operand over through `aligned`, which copies it
# into rows padded to 16 bytes when (and only when) its strides are not aligned.
_ALIGNED_OPERANDS = {"attn_bias"}
_ALIGNED_OPS = ("_scaled_dot_product_efficient_attention",)


def _aligned_operands(op) -> set:
    """The positions and names of `op`'s operands that go through `aligned_operand`."""
    if not isinstance(op, torch._ops.OpOverload) or not op._schema.name.split("::")[-1].startswith(_ALIGNED_OPS):
        return set()
    names = [a.name for a in op._schema.arguments]
    return {i for i, n in enumerate(names) if n in _ALIGNED_OPERANDS} | (_ALIGNED_OPERANDS & set(names))


def _operand(w: WrapperWriter, value, aligned: bool) -> str:
    expr = w.value_expr(value)
    return f"aligned({expr})" if aligned else expr


def aligned_operand(t, alignment_bytes: int = 16):
    """`t` itself when every stride but the last is a multiple of `alignment_bytes` (or `t` is
    not a tensor); else a copy of `t` whose rows are padded to that alignment (Note [aligned
    attention bias])."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2:
        return t
    step = max(alignment_bytes // t.element_size(), 1)
    if all(st % step == 0 for st in t.stride()[:-1]):
        return t
    sizes = list(t.shape)
    padded = torch.empty(*sizes[:-1], -(-sizes[-1] // step) * step, dtype=t.dtype, device=t.device)
    out = padded[..., :sizes[-1]]
    out.copy_(t)
    return out


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
