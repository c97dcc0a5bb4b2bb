"""A pre-norm Transformer block in plain PyTorch: the smallest model that exercises capture.

d_model 1024, 16 heads, causal self-attention through F.scaled_dot_product_attention, a GELU
MLP of width 4 * d_model; batch 8, sequence 512, fp32.

    accel-sim simulate examples/transformer_block.py --device h100_sxm
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

D_MODEL = 1024
NUM_HEADS = 16
BATCH = 8
SEQ_LEN = 512


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int = D_MODEL, num_heads: int = NUM_HEADS) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.attn_norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp_norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, d_model = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(d_model, dim=-1)
        q, k, v = (t.view(batch, seq_len, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq_len, d_model))
        return x + self.fc2(F.gelu(self.fc1(self.mlp_norm(x))))


def get_model() -> tuple[nn.Module, torch.Tensor]:
    with torch.device("meta"):
        model = TransformerBlock()
    return model.eval(), torch.empty(BATCH, SEQ_LEN, D_MODEL, device="meta")
