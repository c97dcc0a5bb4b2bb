"""Llama-3-8B forward (prefill): batch 1, sequence 2048, bf16, no weights.

Built from the config shipped with accel-sim (accel_sim/data/models/llama-3-8b.json, the
official Meta-Llama-3-8B hyperparameters) on the meta device; dtype is the config's
torch_dtype (bfloat16).

    accel-sim simulate examples/llama3_8b.py --device h100_sxm
"""

from __future__ import annotations

import json
from importlib.resources import files

import torch
from transformers import AutoConfig, AutoModelForCausalLM

BATCH = 1
SEQ_LEN = 2048


def get_model() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    text = files("accel_sim.data.models").joinpath("llama-3-8b.json").read_text()
    config = AutoConfig.for_model(**json.loads(text))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=config.dtype)
    input_ids = torch.empty(BATCH, SEQ_LEN, dtype=torch.int64, device="meta")
    return model.eval(), {"input_ids": input_ids}
