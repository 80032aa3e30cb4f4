"""ember_autograd: torch-level FX graphs -> functional ATen forward/backward graphs
(AOTAutograd's job). See README.md and docs/autograd.md."""
from ember_autograd.__about__ import __version__
from ember_autograd.api import AotFunction, CompiledArtifacts, aot
from ember_autograd.config import AotConfig
from ember_autograd.errors import AotError, AotTraceError, ErrorKind, SpecError, VerificationError
from ember_autograd.joint import Signature, trace_inference, trace_joint
from ember_autograd.mincut import min_cut_partition
from ember_autograd.partition import JointGraph, Partition, default_partition, extract
from ember_autograd.verify import verify_functional

__all__ = [
    "__version__", "aot", "AotFunction", "CompiledArtifacts", "AotConfig", "AotError",
    "AotTraceError", "ErrorKind", "SpecError", "VerificationError", "Signature", "trace_inference", "trace_joint",
    "min_cut_partition", "JointGraph", "Partition", "default_partition", "extract",
    "verify_functional",
]
