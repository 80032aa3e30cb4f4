"""A timm-style ViT block (LayerScale, DropPath with random masks, fused SDPA attention, a class
attribute switch): one graph in eval and in training mode, equal to eager with the same RNG."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from capture_helpers import check_module

def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor

class DropPath(nn.Module):
    def __init__(self, drop_prob=0.):
        super().__init__(); self.drop_prob = drop_prob
    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)

class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5, inplace=False):
        super().__init__(); self.inplace = inplace; self.gamma = nn.Parameter(init_values * torch.ones(dim))
    def forward(self, x):
        return x.mul_(self.gamma) if self.inplace else x * self.gamma

class Attention(nn.Module):
    fused_attn: bool = True
    def __init__(self, dim, num_heads=4, qkv_bias=False):
        super().__init__()
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads; self.head_dim = dim // num_heads; self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias); self.q_norm = nn.Identity(); self.k_norm = nn.Identity()
        self.attn_drop = nn.Dropout(0.); self.proj = nn.Linear(dim, dim); self.proj_drop = nn.Dropout(0.)
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        if self.fused_attn:
            x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.)
        else:
            q = q * self.scale; attn = q @ k.transpose(-2, -1); attn = attn.softmax(dim=-1); x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))

class Block(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim); self.attn = Attention(dim); self.ls1 = LayerScale(dim); self.drop_path1 = DropPath(0.1)
        self.norm2 = nn.LayerNorm(dim); self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, dim)); self.ls2 = LayerScale(dim); self.drop_path2 = DropPath(0.1)
    def forward(self, x):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x



@pytest.mark.parametrize("train", [False, True])
def test_vit_block_one_graph(train):
    inputs = [torch.randn(b, 8, 32) for b in (2, 2, 3)]
    check_module(Block, inputs, train=train, graphs=2, rtol=1e-5, atol=1e-5)  # batch 2 and batch 3
