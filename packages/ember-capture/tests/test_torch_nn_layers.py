"""torch.nn layers as found in model code: each captures into one graph, equal to eager."""
import pytest
import torch
import torch.nn as nn

from capture_helpers import check_module


def _r(*shape):
    return lambda: (torch.randn(*shape),)


LAYERS = [
    ("Conv1d", lambda: nn.Conv1d(3, 4, 3), _r(2, 3, 10)),
    ("ConvTranspose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), _r(1, 3, 5, 5)),
    ("GroupNorm", lambda: nn.GroupNorm(2, 4), _r(2, 4, 5, 5)),
    ("InstanceNorm2d", lambda: nn.InstanceNorm2d(4, affine=True), _r(2, 4, 5, 5)),
    ("PixelShuffle", lambda: nn.PixelShuffle(2), _r(1, 8, 3, 3)),
    ("Upsample", lambda: nn.Upsample(scale_factor=2, mode="nearest"), _r(1, 2, 3, 3)),
    ("Flatten", lambda: nn.Flatten(), _r(2, 3, 4)),
    ("Unflatten", lambda: nn.Unflatten(1, (2, 2)), _r(3, 4)),
    ("Softmax", lambda: nn.Softmax(dim=-1), _r(2, 5)),
    ("PReLU", lambda: nn.PReLU(), _r(2, 5)),
    ("Hardswish", lambda: nn.Hardswish(), _r(2, 5)),
    ("Mish", lambda: nn.Mish(), _r(2, 5)),
    ("MaxPool2d", lambda: nn.MaxPool2d(2), _r(1, 2, 4, 4)),
    ("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d((2, 2)), _r(1, 2, 5, 5)),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(5), _r(4, 5)),
    ("Bilinear", lambda: nn.Bilinear(3, 3, 2), lambda: (torch.randn(2, 3), torch.randn(2, 3))),
    ("EmbeddingBag", lambda: nn.EmbeddingBag(10, 3, mode="mean"), lambda: (torch.randint(0, 10, (2, 4)),)),
    ("RNN", lambda: nn.RNN(4, 6), _r(5, 2, 4)),
    ("TransformerDecoderLayer", lambda: nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
     lambda: (torch.randn(2, 5, 16), torch.randn(2, 6, 16))),
    ("Transformer", lambda: nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True),
     lambda: (torch.randn(2, 5, 16), torch.randn(2, 6, 16))),
    ("Dropout2d", lambda: nn.Dropout2d(0.5), _r(2, 3, 4, 4)),
    ("LSTMCell", lambda: nn.LSTMCell(4, 5), _r(3, 4)),
    ("Fold", lambda: nn.Fold(output_size=(4, 4), kernel_size=2), _r(1, 12, 9)),
    ("Unfold", lambda: nn.Unfold(kernel_size=2), _r(1, 3, 4, 4)),
    ("CrossEntropyLoss", lambda: nn.CrossEntropyLoss(), lambda: (torch.randn(3, 5), torch.randint(0, 5, (3,)))),
    ("CosineSimilarity", lambda: nn.CosineSimilarity(), lambda: (torch.randn(2, 3), torch.randn(2, 3))),
]


@pytest.mark.parametrize("make, inputs", [pytest.param(m, i, id=n) for n, m, i in LAYERS])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_layer_one_graph(make, inputs, train):
    check_module(make, [inputs(), inputs()], train=train, graphs=1)
