"""Models from torchvision, timm and transformers (plain Python over torch, installed in
site-packages) capture into few graphs and equal eager. Skipped where a library is missing (this
CPU machine has none of them; the GPU machines have all three). Small configs, random weights,
no downloads. Each captures into 1 graph (HF models: measured on torch 2.13 / transformers 5.23;
tests-integration/zoo.py measures 34 HF architectures). PatchAttention is plain torch (always runs).

float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-3, atol=1e-4 (deep
conv stacks accumulate reordering differences).
"""
import pytest
import torch

import ember

TOL = {"eager": dict(rtol=1e-5, atol=1e-5), "inductor": dict(rtol=1e-3, atol=1e-4)}


def check(model, inputs, backend, recorder, max_graphs):
    model.eval()
    compiled = ember.compile(model, backend=recorder if backend == "eager" else backend)
    with torch.no_grad():
        for make in inputs:
            args = make()
            got, want = compiled(*args), model(*args)
            if not isinstance(want, torch.Tensor):  # HF model outputs
                got, want = got[0], want[0]
            torch.testing.assert_close(got, want, **TOL[backend])
    if backend == "eager":
        assert 1 <= len(recorder.graphs) <= max_graphs, f"{len(recorder.graphs)} graphs"


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_torchvision_resnet18(backend, recorder):
    tv = pytest.importorskip("torchvision")
    model = tv.models.resnet18(weights=None, num_classes=10)
    check(model, [lambda: (torch.randn(2, 3, 32, 32),)] * 2, backend, recorder, max_graphs=1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_torchvision_densenet(backend, recorder):
    tv = pytest.importorskip("torchvision")
    model = tv.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, num_classes=10)
    check(model, [lambda: (torch.randn(2, 3, 32, 32),)] * 2, backend, recorder, max_graphs=1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_transformers_bert(backend, recorder):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertModel(config)
    check(model, [lambda: (torch.randint(0, 100, (2, 16)),)] * 2, backend, recorder, max_graphs=1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_transformers_gpt2(backend, recorder):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    model = transformers.GPT2Model(config)
    check(model, [lambda: (torch.randint(0, 100, (2, 16)),)] * 2, backend, recorder, max_graphs=1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_timm_resnext(backend, recorder):
    timm = pytest.importorskip("timm")
    model = timm.create_model("resnext26ts", pretrained=False, num_classes=10)
    check(model, [lambda: (torch.randn(2, 3, 32, 32),)] * 2, backend, recorder, max_graphs=1)


class PatchAttention(torch.nn.Module):
    """A ViT's first block in plain torch: a patch convolution, then attention over heads split
    by view + transpose (Note [externs see eager's layouts]: silently wrong under the inductor
    before, its q, k, v realized channels-last)."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, dim, 8, stride=8)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.heads = heads

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2)
        b, n, d = h.shape
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in self.qkv(h).chunk(3, -1))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return out.transpose(1, 2).reshape(b, n, d) + h


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_patch_convolution_then_attention(backend, recorder):
    torch.manual_seed(0)
    check(PatchAttention(), [lambda: (torch.randn(2, 3, 32, 32),)] * 2, backend, recorder, max_graphs=1)


@pytest.mark.gpu
def test_patch_convolution_then_attention_on_cuda():
    """The same on the GPU: Triton lays convolution activations out channels-last too, and
    CUDA's attention kernels must see q, k, v in eager's layout."""
    torch.manual_seed(0)
    model = PatchAttention().cuda().eval()
    compiled = ember.compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 32, 32, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)  # TF32 convolutions


@pytest.mark.gpu
def test_transformers_vit_on_cuda():
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64, image_size=32, patch_size=8)
    torch.manual_seed(0)
    model = transformers.ViTModel(config).cuda().eval()
    compiled = ember.compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 32, 32, device="cuda")
            torch.testing.assert_close(compiled(x)[0], model(x)[0], rtol=1e-3, atol=1e-3)
