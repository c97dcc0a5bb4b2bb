"""GPT-2 (124M) language-model forward: batch 8, sequence 1024, fp32, no weights.

The model is built from the config shipped with accel-sim (accel_sim/data/models/gpt2.json) on
the meta device, so it needs no download and no memory for weights.

    accel-sim simulate examples/gpt2.py --device a100_sxm
"""

from __future__ import annotations

import json
from importlib.resources import files

import torch
from transformers import AutoConfig, AutoModelForCausalLM

BATCH = 8
SEQ_LEN = 1024


def get_model() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    config = AutoConfig.for_model(
        **json.loads(files("accel_sim.data.models").joinpath("gpt2.json").read_text())
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    input_ids = torch.empty(BATCH, SEQ_LEN, dtype=torch.int64, device="meta")
    return model.eval(), {"input_ids": input_ids}
