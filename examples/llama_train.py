"""A Llama training step: Llama-3.2-1B-shaped model (16 layers, hidden 2048, 32 heads, 8 KV heads,
FFN 8192, vocab 128256), batch 4, sequence 2048, fp32 weights, no weights allocated.

The weights stay fp32 so that `--precision bf16-mixed` trains it the way torch.amp does (bf16
compute under autocast, fp32 weights, gradients and AdamW states); `--train` captures the
forward, the loss (the model's own, labels = input_ids), the backward and the optimizer step.

    accel-sim simulate examples/llama_train.py --device h100 --train --optimizer adamw --precision bf16-mixed
    accel-sim fit examples/llama_train.py --devices a100-40gb,h100 --axis batch --train
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

BATCH = 4
SEQ_LEN = 2048


def get_model() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    config = LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         intermediate_size=8192, vocab_size=128256, max_position_embeddings=8192,
                         rope_theta=500000.0, tie_word_embeddings=True)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    input_ids = torch.empty(BATCH, SEQ_LEN, dtype=torch.int64, device="meta")
    return model, {"input_ids": input_ids}
