"""The default number of compile workers follows the cores this process may use (4 to 16):
on a GPU host's 16 cores, Triton's kernels and their launcher stubs compile on 16 threads."""
import os

from ember_inductor.options import InductorOptions, default_compile_workers


def test_default_compile_workers_follow_the_cores():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert InductorOptions().compile_workers == default_compile_workers() == max(4, min(16, cores))
    assert InductorOptions.from_dict({"compile_workers": 2}).compile_workers == 2
