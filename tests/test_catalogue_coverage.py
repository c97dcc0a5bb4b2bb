"""Every op that capturing the supported model families produces is in the C++ catalogue."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402

import accel_sim  # noqa: E402
from test_capture import TINY_DECODER, _input_ids, _tiny_hf_model  # noqa: E402

TINY_ENCODER = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                "vocab_size": 256}
TINY_GPT2 = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 64}


@pytest.mark.parametrize(
    "config_file, overrides, auto_class",
    [
        ("gpt2.json", TINY_GPT2, "AutoModelForCausalLM"),
        ("bert-base-uncased.json", TINY_ENCODER, "AutoModelForMaskedLM"),
        ("llama-3-8b.json", TINY_DECODER, "AutoModelForCausalLM"),
        ("mistral-7b.json", TINY_DECODER, "AutoModelForCausalLM"),
        ("qwen2.5-7b.json", TINY_DECODER, "AutoModelForCausalLM"),
        ("mixtral-8x7b.json", {**TINY_DECODER, "num_local_experts": 4, "num_experts_per_tok": 2}, "AutoModelForCausalLM"),
    ],
)
def test_hf_families_have_no_uncovered_ops(config_file, overrides, auto_class):
    model = _tiny_hf_model(config_file, auto_class, **overrides)
    r = accel_sim.simulate(model, _input_ids(2, 16), device="h100")
    assert r.uncovered_ops == []
    assert r.latency_s > 0 and r.flops > 0


class _SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, kernel_size=3)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def test_vision_ops_are_covered_and_conv_flops_are_exact():
    r = accel_sim.simulate(_SmallCnn().eval(), (torch.randn(2, 3, 32, 32),), device="a100")
    assert r.uncovered_ops == []
    (conv,) = [op for op in r.ops if op.op_class == "convolution"]
    # [2,3,32,32] * [16,3,3,3] -> [2,16,30,30]: 2 * 28800 outputs * 27 + 28800 bias adds.
    assert conv.flops == 2 * (2 * 16 * 30 * 30) * (3 * 3 * 3) + 2 * 16 * 30 * 30
    assert {op.op_class for op in r.ops} >= {"convolution", "normalization", "reduction", "matmul"}
