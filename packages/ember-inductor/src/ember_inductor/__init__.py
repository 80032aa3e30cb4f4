"""ember-inductor: prims-level FX graphs to fused kernels (C++/OpenMP on CPU, Triton on GPU)."""
from ember_inductor.__about__ import __version__
from ember_inductor.options import InductorOptions

__all__ = ["__version__", "InductorOptions"]
