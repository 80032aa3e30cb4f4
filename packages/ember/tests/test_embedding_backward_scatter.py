"""The embedding's backward (an accumulating index_put over one dim) runs as one `index_add_` on
CUDA: the sort-based `index_put_(accumulate=True)` took ~0.7 ms of host time and a sort per call
in BERT's step (docs/performance.md, training profile of 2026-11-24). On the CPU it stays
`index_put_`: ATen's CPU `index_add_` on rows dispatches one add per index (Note [accumulating
index_put as index_add])."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import ember


def _model(device="cpu"):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 3)).to(device)


_DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (run on the GPU machine)")])]


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_embedding_backward_equals_eager_and_scatters_rows(backend, device):
    ref, mod = _model(device), _model(device)
    fn = ember.compile(mod, backend=backend)
    for ids in (torch.tensor([[1, 4, 4, 7], [4, 1, 0, 49]]), torch.tensor([[3, 3, 3, 3], [2, 5, 5, 0]])):
        ids = ids.to(device)
        ref.zero_grad(set_to_none=True)
        mod.zero_grad(set_to_none=True)
        ref(ids).square().sum().backward()
        out = fn(ids)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out.square().sum().backward()
        ops = {e.name for e in prof.events()}
        torch.testing.assert_close(mod[0].weight.grad, ref[0].weight.grad)
        torch.testing.assert_close(mod[1].weight.grad, ref[1].weight.grad)
        if backend == "inductor" and device == "cuda":  # backend="eager" runs aten's own backward
            assert "aten::index_add_" in ops and "aten::index_put_" not in ops, sorted(ops)
        elif backend == "inductor":
            assert "aten::index_put_" in ops and "aten::index_add_" not in ops, sorted(ops)


@pytest.mark.parametrize("device", _DEVICES)
def test_index_put_accumulate_prim_keeps_index_put_semantics(device):
    import ember_prims  # noqa: F401  (registers torch.ops.ember_prims)
    a = torch.randn(6, 4, device=device)
    t = lambda *v: torch.tensor(*v, device=device)  # noqa: E731
    cases = [  # on CUDA, the first two take the index_add_ path
        ([t([0, 5, 0, 2])], torch.randn(4, 4, device=device), (t([0, 5, 0, 2]),)),
        ([None, t([1, 1, 3])], torch.randn(6, 3, device=device),
         (torch.arange(6, device=device)[:, None].expand(6, 3), t([1, 1, 3]).expand(6, 3))),  # dim 1
        ([t([[0, 1], [1, 1]])], torch.randn(2, 2, 4, device=device), (t([[0, 1], [1, 1]]),)),  # 2-D index
    ]
    for indices, v, explicit in cases:
        got = torch.ops.ember_prims.index_put(a, indices, v, True)
        torch.testing.assert_close(got, a.index_put(explicit, v, accumulate=True))
        assert got.data_ptr() != a.data_ptr()
