"""Whole eager modules of the calibration set (module_rows.py): captured as their benchmark ran
them, costed op by op; the fused RMSNorm a GPU runs for F.rms_norm (capture/norms.py)."""

from __future__ import annotations

import json

import pytest

from conftest import run_validate

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
    graph = module_rows._graph(module_rows._megatron_rms_norm, "megatron_rms_norm", "bf16", (("m", M), ("n", N)))
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
    built = module_rows._rms_norm({"m": 8, "n": 16}, "bf16")
    graph = to_core(capture_training_step(module_rows._harness(built), (), optimizer="none"))
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
    graph = module_rows._graph(module_rows._rms_norm, "rms_norm", "bf16", (("m", m), ("n", n)))
    read, written = _traffic(graph, "forward")
    assert read == 2 * m * n + 4 * m * n + 4 * m * n + 4 * m + 4 * m + 4 * m * n + 4 * m + 4 * m * n + 4 * n + 2 * m * n
    assert written == 4 * m * n + 4 * m * n + 4 * m + 4 * m + 4 * m + 4 * m * n + 2 * m * n + 4 * m * n


def test_add_then_liger_rms_norm_forward_traffic_by_hand():
    # The Liger script's AddLigerRMSNorm on fp32 x and r [M, N]: torch's h = x + r (read 8MN,
    # write 4MN), LigerRMSNorm(h), one kernel (read 4MN and its weight 4N, write 4MN and the
    # inverse RMS 4M), then the module's fp32 weight times the result (read 4MN + 4N, write 4MN).
    m, n = 2048, 2048
    graph = module_rows._graph(module_rows._add_liger_rms_norm, "fused_add_rms_norm", "fp32", (("m", m), ("n", n)))
    assert [x.op for x in _nodes(graph, "forward") if x.op != "detach"] == ["add", "_fused_rms_norm", "mul"]
    read, written = _traffic(graph, "forward")
    assert read == 8 * m * n + 4 * m * n + 4 * n + 4 * m * n + 4 * n
    assert written == 4 * m * n + 4 * m * n + 4 * m + 4 * m * n


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
    ("rope", "liger", "backward", False),  # one Triton kernel: a kernel row
    ("rope", "liger", "full", True),  # its forward and backward kernels
    ("cross_entropy", "torch_compile", "forward", True),  # no kernel row of a loss
    ("cross_entropy", "liger", "forward", True),
    ("swiglu", "liger", "backward", True),  # three GEMMs around the kernel
    ("fused_add_rms_norm", "liger_unfused_add", "forward", True),  # torch's add, Liger's norm, the product
    ("fused_add_rms_norm", "liger_unfused_add", "full", False),  # Liger's backward: partial dW rows
])
def test_which_rows_are_modules(op, impl, direction, described):
    row = {"kind": "memory", "op": op, "impl": impl, "direction": direction, "dtype": "bf16"}
    assert module_rows.describes(row) is described


def test_validate_reports_the_module_rows():
    out = json.loads(run_validate("--json").stdout)
    modules = [line for line in out["lines"] if line["class"] == "module"]
    assert {line["device"] for line in modules} >= {"a100_pcie_80gb", "h100_nvl", "h100_sxm"}
    assert sum(line["rows"] for line in modules) > 100
    assert not any(k.startswith("memory huggingface forward") for k in out["skipped"])


def test_fused_ops_compute_what_they_stand_for():
    # The capture's fused ops (capture/fused_ops.py) on real CPU tensors agree with eager PyTorch.
    from accel_sim.capture import fused_ops  # noqa: F401

    torch.manual_seed(0)
    gate = torch.randn(6, 10, dtype=torch.float64, requires_grad=True)
    up = torch.randn(6, 10, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(6, 10, dtype=torch.float64)
    for name, eager in (("silu", torch.nn.functional.silu),
                        ("gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))):
        fused = torch.ops.accel_sim.gated_activation(gate, up, name)
        want = eager(gate) * up
        assert torch.allclose(fused, want)
        assert all(torch.allclose(a, b) for a, b in zip(torch.autograd.grad(fused, (gate, up), dy),
                                                        torch.autograd.grad(want, (gate, up), dy)))
    logits = torch.randn(5, 7, requires_grad=True)  # fp32: the op computes in fp32
    target = torch.tensor([0, 3, -100, 6, 2])
    loss, lse = torch.ops.accel_sim.cross_entropy(logits, target, -100)
    want = torch.nn.functional.cross_entropy(logits, target, ignore_index=-100)
    assert torch.allclose(loss, want) and torch.allclose(lse, torch.logsumexp(logits, -1))
    assert torch.allclose(torch.autograd.grad(loss, logits)[0], torch.autograd.grad(want, logits)[0])
    # The rotation's backward (by -sin) is its transpose when both halves of cos and sin repeat,
    # as LlamaRotaryEmbedding's cat((freqs, freqs)) makes them.
    q, k = torch.randn(2, 3, 4, 8, dtype=torch.float64), torch.randn(2, 3, 1, 8, dtype=torch.float64)
    angle = torch.randn(2, 3, 4, dtype=torch.float64).repeat(1, 1, 2)
    cos, sin = angle.cos(), angle.sin()
    q2, k2 = torch.ops.accel_sim.rotary_embedding(q, k, cos, sin, False)
    back, _ = torch.ops.accel_sim.rotary_embedding(q2, k2, cos, sin, True)
    assert torch.allclose(back, q)  # a rotation's inverse is its transpose
    # The fused RMSNorm (capture/norms.py) and its written-out backward against torch's own.
    from accel_sim.capture.norms import rms_norm

    x = torch.randn(4, 3, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(4, 3, 8, dtype=torch.float64)
    ours, theirs = rms_norm(x, [8], w, 1e-6), torch.nn.functional.rms_norm(x, [8], w, 1e-6)
    assert torch.allclose(ours, theirs)
    assert all(torch.allclose(a, b) for a, b in zip(torch.autograd.grad(ours, (x, w), dy),
                                                    torch.autograd.grad(theirs, (x, w), dy)))


def test_liger_cross_entropy_traffic_by_hand():
    # Liger's loss on fp32 logits [R, V]: the forward reads the logits twice (the loss pass, the
    # gradient pass) and writes the gradient once, plus the int64 targets (read by both passes)
    # and the fp32 log-sum-exp per row (written, then read); "full" then adds the gradient into
    # .grad, which is the same storage: `grad += grad` reads it once and writes it once.
    r, v = 64, 1000
    graph = module_rows._graph(module_rows._liger_cross_entropy, "cross_entropy", "fp32", (("m", r), ("n", v)))
    ops = [graph.node(i).op for i in range(graph.num_nodes)]
    assert ops.count("accel_sim::cross_entropy") == 1 and ops.count("accel_sim::cross_entropy_backward") == 1
    read, written = _traffic(graph, "forward")
    logits, targets, lse = r * v * 4, r * 8, r * 4
    # loss pass: logits + targets; 1.0 (the fill of dy, 4 B written); gradient pass: dy, logits,
    # lse, targets
    assert read == logits + targets + 4 + logits + lse + targets
    assert written == 4 + lse + 4 + logits
    read, written = _traffic(graph, "backward")
    assert (read, written) == (logits, logits + 4)  # and the 1.0 that y.backward() seeds


def test_mlp_weight_gradients_accumulate_and_x_does_not():
    # benchmark_swiglu.py resets only x's gradient: each backward adds the three weights'
    # gradients into their .grad (read both, write one), and writes x's afresh.
    row = {"op": "swiglu", "batch": 2, "seq_q": 8, "n": 32, "k": 48}
    for builder, activation_ops in ((module_rows._llama_mlp, {"silu", "mul"}),
                                    (module_rows._liger_mlp, {"accel_sim::gated_activation"})):
        graph = module_rows._graph(builder, "swiglu", "bf16", tuple(row.items())[1:])
        forward = {n.op for n in _nodes(graph, "forward")}
        assert activation_ops <= forward
        adds = [n for n in _nodes(graph, "backward") if n.op == "add_"]
        assert len(adds) == 3
        result = _core.simulate(graph, resolve_device("h100_sxm", []).spec, _core.SimulateOptions())
        counts = [r.count for r in result.ops if graph.node(r.node).op == "add_"]
        assert sorted((c.bytes_read, c.bytes_written) for c in counts) == [(2 * 32 * 48 * 2, 32 * 48 * 2)] * 3
