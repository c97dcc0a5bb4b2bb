"""Whole eager modules of the calibration set (module_rows.py): captured as their benchmark ran
them, costed op by op; the fused RMSNorm a GPU runs for F.rms_norm (capture/norms.py)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from accel_sim import _core, module_rows  # noqa: E402
from accel_sim.capture import UpstreamGradients, capture_training_step  # noqa: E402
from accel_sim.device import resolve_device  # noqa: E402
from accel_sim.io.graph_file import to_core  # noqa: E402

M, N = 4096, 1024


def _nodes(graph, pass_name):
    return [graph.node(i) for i in range(graph.num_nodes) if graph.node(i).pass_name == pass_name]


def _traffic(graph, pass_name):
    """(bytes read, bytes written) of the pass's ops, from the core's counts."""
    result = _core.simulate(graph, resolve_device("h100_sxm", []).spec, _core.SimulateOptions())
    ops = [r for r in result.ops if graph.node(r.node).pass_name == pass_name]
    return sum(r.count.bytes_read for r in ops), sum(r.count.bytes_written for r in ops)


def test_rms_norm_is_the_one_fused_kernel_a_gpu_runs():
    # torch.nn.RMSNorm(N) in bf16 on x [M, N]: CUDA runs aten::_fused_rms_norm forward and
    # _fused_rms_norm_backward, one kernel each, not the CPU's pow/mean/rsqrt chain.
    graph = module_rows._graph(module_rows._megatron_rms_norm, "bf16", (("m", M), ("n", N)))
    forward = [n.op for n in _nodes(graph, "forward") if n.op not in ("detach", "sum")]
    backward = [n.op for n in _nodes(graph, "backward") if n.op not in ("detach", "expand", "ones_like")]
    assert forward == ["_fused_rms_norm"]
    assert backward == ["_fused_rms_norm_backward"]
    read, written = _traffic(graph, "forward")
    # Forward: reads x (M*N bf16) and the weight (N bf16), writes y (M*N bf16) and the fp32
    # inverse RMS per row (M fp32); the loss's sum then reads y once more.
    assert read == M * N * 2 + N * 2 + M * N * 2
    assert written == M * N * 2 + M * 4 + 2


def test_module_outputs_are_backpropagated_without_a_loss():
    # UpstreamGradients: y.backward(dy) with dy a buffer, as the benchmark runs it: nothing of the
    # harness is traced, the backward begins at the module's own ops.
    inner, leaves, grads, call = module_rows._rms_norm({"m": 8, "n": 16}, "bf16")
    graph = to_core(capture_training_step(module_rows._harness(inner, leaves, grads, call), (), optimizer="none"))
    forward = _nodes(graph, "forward")
    assert forward and all(n.module_path.startswith("inner") for n in forward if n.op != "detach")
    backward = [n for n in _nodes(graph, "backward") if n.op != "detach"]
    assert backward[0].op != "ones_like" and backward[0].module_path.startswith("inner")


def test_hf_rms_norm_forward_traffic_by_hand():
    # The Liger script's LlamaRMSNorm: an fp32 weight (never cast) on bf16 x [M, N]:
    #   x.to(fp32)        read 2MN, write 4MN
    #   pow(2)            read 4MN, write 4MN
    #   mean(-1)          read 4MN, write 4M
    #   + eps             read 4M,  write 4M
    #   rsqrt             read 4M,  write 4M
    #   x * rstd          read 4MN + 4M, write 4MN
    #   .to(bf16)         read 4MN, write 2MN
    #   weight * x        read 4N + 2MN, write 4MN (bf16 x fp32 promotes to fp32)
    m, n = 512, 2048
    graph = module_rows._graph(module_rows._rms_norm, "bf16", (("m", m), ("n", n)))
    read, written = _traffic(graph, "forward")
    assert read == 2 * m * n + 4 * m * n + 4 * m * n + 4 * m + 4 * m + 4 * m * n + 4 * m + 4 * m * n + 4 * n + 2 * m * n
    assert written == 4 * m * n + 4 * m * n + 4 * m + 4 * m + 4 * m + 4 * m * n + 2 * m * n + 4 * m * n


def test_upstream_gradients_need_one_gradient_per_output():
    class Bad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.x = torch.nn.Parameter(torch.empty(4, 4, device="meta"))

        def forward(self):
            return UpstreamGradients((self.x * 2, self.x * 3), (torch.ones(4, 4),))

    from accel_sim.errors import UsageError

    with pytest.raises(UsageError, match="one upstream gradient per output"):
        capture_training_step(Bad(), (), optimizer="none")


@pytest.mark.parametrize(("op", "impl", "direction", "described"), [
    ("rms_norm", "huggingface", "forward", True),
    ("rope", "huggingface", "full", True),
    ("rms_norm", "torch_compile", "backward", True),
    ("rms_norm", "torch_compile", "forward", False),  # one Inductor kernel: a kernel row
    ("rms_norm", "liger", "forward", False),  # one Triton kernel: a kernel row
    ("megatron_swiglu", "megatron", "full", False),  # compiled or TorchScript: not known
])
def test_which_rows_are_modules(op, impl, direction, described):
    row = {"kind": "memory", "op": op, "impl": impl, "direction": direction, "dtype": "bf16"}
    assert module_rows.describes(row) is described


def test_validate_reports_the_module_rows():
    out = json.loads(run_cli("validate", "--json", "--quiet").stdout)
    modules = [line for line in out["lines"] if line["class"] == "module"]
    assert {line["device"] for line in modules} >= {"a100_pcie_80gb", "h100_nvl", "h100_sxm"}
    assert sum(line["rows"] for line in modules) > 100
    assert not any(k.startswith("memory huggingface forward") for k in out["skipped"])
