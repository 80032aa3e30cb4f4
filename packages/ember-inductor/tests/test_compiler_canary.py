"""Note [miscompiling compilers] (codegen/cpp_build.py): the command C++ kernels are built with
computes the canary right on this machine, whatever the compiler did with the configured flags
(g++ 12.2 with -O3 -march=native -fopenmp on an AVX-512 AMD EPYC wrote 0 where a vectorized
select gives 2: the program that found it, a backward through a transposed and a flat view, is
tests-integration/test_views_mutation.py::test_training_composition, against eager)."""

from ember_inductor.codegen import cpp_build
from ember_inductor.options import InductorOptions


def test_kernel_command_computes_the_canary_right(tmp_path):
    options = InductorOptions(cache_dir=str(tmp_path))
    cmd = cpp_build.compiler_command(options)
    assert cpp_build.canary_passes(cmd, str(tmp_path))
    configured = [cmd[0], *options.cpp_flags, "-fno-math-errno", "-shared", "-fPIC"]
    assert cmd[:len(configured)] == configured
    added = tuple(cmd[len(configured):])
    # nothing added where the configured command computes right, else the first fix that works
    assert added == () if cpp_build.canary_passes(configured, str(tmp_path)) else added in cpp_build.WORKAROUNDS

