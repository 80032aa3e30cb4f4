"""Note [0-d CPU operands] (ember_prims): a CUDA graph may hold 0-d CPU values (an optimizer's
step counts). Their arithmetic runs in C++ kernels on the CPU, device_put moves each one the
CUDA kernels read, and a mutated CPU input stays on the CPU. GPU only (`-m gpu`)."""
from __future__ import annotations

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
CPU = torch.device("cpu")

pytestmark = pytest.mark.gpu


@pytest.fixture
def options(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return InductorOptions(cache_dir=str(tmp_path))


def _adam_like(b, p, step):
    """p <- p * (1 - 0.9 ** (step + 1)); step <- step + 1 (a CPU count, as torch.optim keeps it)."""
    new_step = b.call(P.add.default, step, b.call(P.full.default, [], 1.0, dtype=torch.float32, device=CPU))
    corr = b.call(P.sub.default, b.call(P.full.default, [], 1.0, dtype=torch.float32, device=CPU),
                  b.call(P.pow.default, b.call(P.full.default, [], 0.9, dtype=torch.float32, device=CPU), new_step))
    on_gpu = b.call(P.device_put.default, corr, p.meta["val"].device)
    scaled = b.call(P.mul.default, p, b.call(P.broadcast_in_dim.default, on_gpu, list(p.meta["val"].shape), []))
    return [scaled, new_step]


def test_cpu_step_count_in_a_cuda_graph(options):
    b = GraphBuilder()
    outs = _adam_like(b, b.input(torch.randn(1000, device="cuda")), b.input(torch.tensor(3.0)))
    b.output(*outs)
    gm = b.build()
    gm.graph.output_node().meta["ember_mutations"] = ((0, 0), (1, 1))
    cg = compile_graph(gm, b.examples, options)
    assert cg.backend == "triton"
    assert {k.backend for k in cg.kernels} == {"triton", "cpp"}
    p, step = torch.randn(1000, device="cuda"), torch.tensor(5.0)
    want = p * (1 - 0.9 ** 6.0)
    got = cg([p, step])
    torch.testing.assert_close(got[0], want)
    assert got[1].device == CPU and got[1].item() == 6.0
    assert 0 in cg.written_in_place  # the CUDA parameter is written in place by its Triton kernel
