"""ember-inductor: prims-level FX graphs to fused kernels (C++/OpenMP on CPU, Triton on GPU).

    compile_graph(gm, example_inputs, options=None) -> CompiledGraph
"""
from ember_inductor.__about__ import __version__
from ember_inductor.codegen.common import BuildError
from ember_inductor.compile import CompiledGraph, compile_graph
from ember_inductor.options import InductorOptions
from ember_inductor.verify import SpecError, verify_graph

__all__ = ["__version__", "BuildError", "CompiledGraph", "InductorOptions", "SpecError", "compile_graph",
           "verify_graph"]
