"""Note [custom ops' fake kernels called directly]: ember's fake mode runs a custom op's fake
kernel without FakeTensorMode's uncached path, with the same result; other calls take torch's."""
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ember_symbolic import symbolic_fake_mode

LIB = torch.library.Library("ember_symbolic_test", "DEF")
LIB.define("scale(Tensor a, float s, int[] dims) -> Tensor")
LIB.impl("scale", lambda a, s, dims: (a * s).sum(dims), "CompositeExplicitAutograd")
CALLS = []


@torch.library.register_fake("ember_symbolic_test::scale", lib=LIB)
def _scale_fake(a, s, dims):
    CALLS.append(torch.library.get_ctx())
    keep = [d for d in range(a.dim()) if d not in dims]
    return a.new_empty([a.shape[d] for d in keep], dtype=a.dtype)


scale = torch.ops.ember_symbolic_test.scale.default


def _bypasses():  # the calls that took FakeTensorMode's own uncached path, whatever the reason
    return sum(FakeTensorMode.cache_info().bypasses.values())


def test_a_custom_op_on_plain_fakes_runs_its_fake_kernel_directly():
    mode = symbolic_fake_mode()
    with mode:
        a = torch.empty(2, 3, 5).transpose(0, 2)
    CALLS.clear()
    before = _bypasses()
    with mode:
        out = scale(a, 2.0, [1])
    assert _bypasses() == before  # not through FakeTensorMode's uncached path
    assert len(CALLS) == 1 and CALLS[0] is not None  # the kernel ran with its FakeImplCtx
    with torch._subclasses.fake_tensor.FakeTensorMode() as torch_mode:
        b = torch.empty(2, 3, 5).transpose(0, 2)
        ref = scale(b, 2.0, [1])
    assert type(out) is FakeTensor and out.fake_mode is mode
    assert (out.shape, out.stride(), out.dtype, out.device) == (ref.shape, ref.stride(), ref.dtype, ref.device)
    assert torch_mode is not mode


def test_a_custom_op_on_other_tensors_takes_torchs_path():
    mode = symbolic_fake_mode(allow_non_fake_inputs=True)
    real = torch.randn(4, 3)
    before = _bypasses()
    with mode:
        out = scale(real, 3.0, [0])  # a real tensor: torch converts it, as before
    assert _bypasses() == before + 1
    assert type(out) is FakeTensor and out.shape == (3,)
    # a fake with a constant value (torch keeps one for small tensors it can compute): torch's path
    const = mode.fake_tensor_converter.from_real_tensor(mode, torch.tensor([1.0, 2.0]), make_constant=True)
    assert const.constant is not None
    before = _bypasses()
    with mode:
        scale(const, 1.0, [0])
    assert _bypasses() == before + 1


def test_builtin_ops_are_unchanged():
    mode = symbolic_fake_mode()
    with mode:
        a = torch.empty(3, 4)
        out = torch.ops.aten.add.Tensor(a, a)
    assert type(out) is FakeTensor and out.shape == (3, 4)
