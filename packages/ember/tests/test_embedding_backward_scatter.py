"""The embedding's backward (an accumulating index_put over one dim) runs as one `index_add_`:
on CUDA the sort-based `index_put_(accumulate=True)` took ~0.7 ms of host time and a sort per
call in BERT's step (docs/performance.md, training profile of 2026-11-24)."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import ember


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 3))


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_embedding_backward_equals_eager_and_uses_index_add(backend):
    ref, mod = _model(), _model()
    fn = ember.compile(mod, backend=backend)
    for ids in (torch.tensor([[1, 4, 4, 7], [4, 1, 0, 49]]), torch.tensor([[3, 3, 3, 3], [2, 5, 5, 0]])):
        ref.zero_grad(set_to_none=True)
        mod.zero_grad(set_to_none=True)
        ref(ids).square().sum().backward()
        out = fn(ids)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out.square().sum().backward()
        ops = {e.name for e in prof.events()}
        torch.testing.assert_close(mod[0].weight.grad, ref[0].weight.grad)
        torch.testing.assert_close(mod[1].weight.grad, ref[1].weight.grad)
        if backend == "inductor":  # backend="eager" runs aten's embedding_dense_backward itself
            assert "aten::index_add_" in ops and "aten::index_put_" not in ops, sorted(ops)


def test_index_put_accumulate_prim_keeps_index_put_semantics():
    import ember_prims  # noqa: F401  (registers torch.ops.ember_prims)
    a = torch.randn(6, 4)
    cases = [
        ([torch.tensor([0, 5, 0, 2])], torch.randn(4, 4), (torch.tensor([0, 5, 0, 2]),)),  # index_add_ path
        ([None, torch.tensor([1, 1, 3])], torch.randn(6, 3),
         (torch.arange(6)[:, None].expand(6, 3), torch.tensor([1, 1, 3]).expand(6, 3))),  # index_add_ on dim 1
        ([torch.tensor([[0, 1], [1, 1]])], torch.randn(2, 2, 4), (torch.tensor([[0, 1], [1, 1]]),)),  # 2-D index
    ]
    for indices, v, explicit in cases:
        got = torch.ops.ember_prims.index_put(a, indices, v, True)
        torch.testing.assert_close(got, a.index_put(explicit, v, accumulate=True))
        assert got.data_ptr() != a.data_ptr()
