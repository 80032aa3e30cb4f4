"""CUDAGraphRunner on the CPU: inputs that are not all CUDA tensors run as they are, every
call, with nothing captured (Note [cudagraph safety])."""
import torch

from ember.cudagraphs import CUDAGraphRunner, cudagraph_compiler


def test_cpu_inputs_run_the_function_every_call():
    calls = []

    def fn(*args):
        calls.append(args)
        return (args[0] + args[1],)

    runner = CUDAGraphRunner(fn)
    assert runner._boxed_call  # called f(list) by ember_autograd
    for _ in range(4):  # past the warm-ups: still no graph on the CPU
        x, y = torch.randn(3), torch.randn(3)
        torch.testing.assert_close(runner([x, y])[0], x + y)
    assert len(calls) == 4 and runner.graph is None and runner.calls == 0


def test_compiler_wraps_the_graph():
    gm = torch.fx.symbolic_trace(lambda x: (x.cos(),))
    x = torch.randn(5)
    runner = cudagraph_compiler(gm, [x])
    assert isinstance(runner, CUDAGraphRunner)
    torch.testing.assert_close(runner([x])[0], x.cos())
