"""BERT-base (uncased) masked-LM forward: batch 8, sequence 512, fp32, no weights.

Built from the config shipped with accel-sim (accel_sim/data/models/bert-base-uncased.json) on
the meta device. No attention_mask is passed: every sequence is full length (unpadded).

    accel-sim simulate examples/bert_base.py --device t4
"""

from __future__ import annotations

import json
from importlib.resources import files

import torch
from transformers import AutoConfig, AutoModelForMaskedLM

BATCH = 8
SEQ_LEN = 512


def get_model() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    text = files("accel_sim.data.models").joinpath("bert-base-uncased.json").read_text()
    config = AutoConfig.for_model(**json.loads(text))
    with torch.device("meta"):
        model = AutoModelForMaskedLM.from_config(config)
    input_ids = torch.empty(BATCH, SEQ_LEN, dtype=torch.int64, device="meta")
    return model.eval(), {"input_ids": input_ids}
