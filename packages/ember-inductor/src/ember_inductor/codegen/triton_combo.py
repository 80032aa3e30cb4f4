"""Combo kernels: several independent Triton kernels rendered as one launch (Note [horizontal
fusion] in horizontal.py says which kernels are combined, and why).

A combo kernel's file holds each part's own `@jit` function, rendered as it would be alone but
for its program ids, which start at the part's first program, and one `@jit` entry point that
dispatches on the program id::

    @jit
    def combo0(p0, p1, p2, p3, p4, XBLOCK: tl.constexpr):
        pid = tl.program_id(0)
        if (pid >= 0) & (pid < 1024):
            kernel3(p0, p1, p2, 1024)
        if (pid >= 1024) & (pid < 1028):
            kernel7(p3, p1, p4, 64)

Each part keeps its index arithmetic, its number of elements and its block sizes (literal
arguments of its call, XBLOCK and a looped reduction's RBLOCK: Triton inlines the call and
specializes it). The grid is the sum of the
parts' programs, so the launcher's config is XBLOCK=1 over `xnumel` = that sum (the entry
point's XBLOCK parameter is that config's and unused); num_warps is the largest a part asked for.
A buffer several parts read is one argument.
"""
from __future__ import annotations

import sympy

from ember_inductor.codegen.common import KernelSource
from ember_inductor.codegen.triton import _FILE_HEADER, _KernelWriter
from ember_inductor.codegen.triton_autotune import LaunchConfig
from ember_inductor.codegen.triton_helpers import helper_sources
from ember_inductor.kernel import KernelArg, KernelSpec


# the layouts whose grid is one program per XBLOCK outer elements (triton.py's module docstring)
ONE_D_LAYOUTS = ("pointwise", "persistent", "looped")


def comboable(source: KernelSource) -> bool:
    """Whether a rendered Triton kernel may be a part of a combo kernel: a static kernel over a
    1-D grid with something to compute, pointwise or a reduction (tiled kernels use a 2-D grid,
    symbolic ones a grid known only at the call: Note [horizontal fusion])."""
    m = source.meta
    return (source.backend == "triton" and m["layout"] in ONE_D_LAYOUTS and "sizevars" not in m
            and m["xnumel"] > 0 and m["rnumel"] > 0)


def combo_args(parts) -> tuple[KernelArg, ...]:
    """The combo's buffer arguments: each part's, once (a buffer read by several parts)."""
    args: dict[str, KernelArg] = {}
    for part in parts:
        for a in part.kernel.args:
            if a.name in args and args[a.name].role != a.role:
                raise AssertionError(f"combo parts disagree on {a.name}: Note [horizontal fusion]")
            args.setdefault(a.name, a)
    return tuple(args.values())


def render_combo(name: str, parts: list[KernelSource]) -> KernelSource:
    """One KernelSource launching every part (each `comboable`, independent of the others)."""
    args = combo_args(parts)
    param = {a.name: f"p{i}" for i, a in enumerate(args)}
    functions, bodies, branches, described = [], [], [], []
    first, warps = 0, 1
    for part in parts:
        cfg = part.meta["configs"][0]  # the heuristic pick: combos are not autotuned
        writer = _KernelWriter(part.kernel, first_program=first)
        function, body = writer.function()
        functions.append(function)
        bodies.append(body)
        programs = -(-part.meta["xnumel"] // cfg.XBLOCK)
        blocks = [cfg.XBLOCK] + ([cfg.RBLOCK] if part.meta["layout"] == "looped" else [])  # its constexprs
        call = f"{part.name}({', '.join([param[a.name] for a in part.kernel.args] + [str(b) for b in blocks])})"
        first += programs
        branches.append((first, call))
        warps = max(warps, cfg.num_warps)
        described.append(f"programs {first - programs}-{first - 1}: {part.name} ({programs} of XBLOCK={cfg.XBLOCK})")
    lines = [f"@jit\ndef {name}({', '.join(param.values())}, XBLOCK: tl.constexpr):",
             "    pid = tl.program_id(0)"]
    start = 0
    for end, call in branches:  # flat, not elif: nested branches compiled slower past 16 parts
        lines += [f"    if (pid >= {start}) & (pid < {end}):", f"        {call}"]
        start = end
    arg_doc = ", ".join(f"{param[a.name]}={a.name}:{str(a.dtype).removeprefix('torch.')}:{a.role}" for a in args)
    header = [f"# ember Triton combo kernel {name} (Note [horizontal fusion]); args: {arg_doc}",
              *(f"#   {d}" for d in described), *_FILE_HEADER]
    helpers = helper_sources("\n".join(bodies))
    text = "\n\n".join(["\n".join(header)] + ([helpers] if helpers else []) + functions + ["\n".join(lines) + "\n"])
    origins = tuple(dict.fromkeys(o for part in parts for o in part.kernel.origins))
    spec = KernelSpec(name, (sympy.Integer(first),), (), args, (), origins)
    meta = {"layout": "combo", "xnumel": first, "rnumel": 1, "int64": False, "column": False,
            "configs": [LaunchConfig(XBLOCK=1, num_warps=warps)], "parts": tuple(p.name for p in parts)}
    return KernelSource(name, "triton", text, spec, meta=meta)
