"""ember: a compiler for PyTorch programs.

    import torch, ember
    model = torch.nn.Linear(4, 4)
    fast = ember.compile(model)   # same signature as torch.compile

See docs/quickstart.md.
"""
from ember.__about__ import __version__
from ember.api import (compile, compile_record, compile_report, disable, explain, last_compile, mark_dynamic,
                       mark_static, reset)
from ember.backends import list_backends, register_backend
from ember.errors import BackendCompilerFailed, BackendUnavailable, EmberError, InvalidArgument, SpecError
from ember.module import OptimizedModule
from ember.trace import write_report
from ember.warm_start import cache_stats, load_cache_artifacts, save_cache_artifacts

__all__ = [
    "BackendCompilerFailed", "BackendUnavailable", "EmberError", "InvalidArgument", "OptimizedModule", "SpecError",
    "__version__", "compile", "compile_record", "compile_report", "disable", "explain", "last_compile", "list_backends",
    "mark_dynamic", "mark_static",
    "register_backend", "reset", "write_report", "cache_stats", "load_cache_artifacts", "save_cache_artifacts",
]
