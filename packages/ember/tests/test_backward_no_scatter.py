"""Cross entropy's backward (nll_loss_backward) and the backward of `unbind`/`select`
(select_scatter) are elementwise selections (`where(class == target, ...)`), not scatters: a
scatter is an extern call the inductor cannot fuse, so BERT's step wrote and re-read its
1024 x 30522 one-hot gradient and a packed-qkv attention block ran three scatters
(docs/performance.md, training profile of 2026-11-24)."""
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import ember


def _scatters(fn):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if "scatter" in e.name]


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("case", ["nll_2d", "nll_4d_weight_ignore", "nll_1d", "select_scatter"])
def test_backward_equals_eager_without_scatter(backend, case):
    def loss(x, t, w):
        if case == "nll_2d":
            return F.cross_entropy(x @ w, t)
        if case == "nll_4d_weight_ignore":
            return F.cross_entropy((x @ w).reshape(2, 3, 2, 5).permute(0, 3, 1, 2), t.reshape(2, 3, 2),
                                   weight=torch.arange(1.0, 6.0), ignore_index=2, reduction="sum")
        if case == "nll_1d":
            return F.cross_entropy((x @ w)[0], t[0])
        p = (x @ w).unflatten(0, (3, 4))
        q, k, v = p[0], p[1], p[2]  # select: select_scatter in the backward
        return (q * k.sin() + v.square()).sum()

    fn = ember.compile(loss, backend=backend)
    for seed in (1, 2):
        g = torch.Generator().manual_seed(seed)
        x, w = torch.randn(12, 4, generator=g), torch.randn(4, 5, generator=g, requires_grad=True)
        t = torch.randint(0, 5, (12,), generator=g)
        w2 = w.detach().clone().requires_grad_()
        out = fn(x, t, w)
        found = _scatters(lambda: out.backward())
        loss(x, t, w2).backward()
        torch.testing.assert_close(out, loss(x, t, w2.detach()))
        torch.testing.assert_close(w.grad, w2.grad)
        if backend == "inductor":  # backend="eager" runs aten's own backward ops
            assert found == [], found
