"""Note [miscompiling compilers] (codegen/cpp_build.py): the command C++ kernels are built with
computes the canary right on this machine, whatever the compiler did with the configured flags
(g++ 12.2 with -O3 -march=native -fopenmp on an AVX-512 AMD EPYC wrote 0 where a vectorized
select gives 2: a backward through a transposed and a flat view came out wrong)."""
import torch

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


def test_select_through_views_backward_matches_eager():
    """The program that found it, through the default (C++) backend."""
    import ember

    def f(x, w):
        h = x @ w
        h.t()[0].add_(1.0)
        v = h.view(-1)
        v.mul_(2.0)
        return h.sum() + v[3]

    compiled = ember.compile(f)
    for _ in range(2):
        x, w = torch.randn(5, 3), torch.randn(3, 3)
        grads = []
        for fn in (f, compiled):
            xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
            fn(xs, ws).backward()
            grads.append((xs.grad, ws.grad))
        for a, b in zip(*grads):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
