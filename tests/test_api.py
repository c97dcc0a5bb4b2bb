"""The Python API on hand-built graphs (no PyTorch needed)."""

from __future__ import annotations

import pytest

import accel_sim
from accel_sim import _core
from conftest import mlp_graph

MIB = 1024**2


def round_device(memory_gb: float = 1.0) -> accel_sim.Device:
    # 10 TFLOP/s fp32 vector, 100 TFLOP/s bf16, 1 TB/s, no launch overhead.
    return accel_sim.Device(name="round", fp32_tflops=10, bf16_tflops=100, memory_bandwidth_gbs=1000, memory_gb=memory_gb)


def test_mlp_latency_is_the_sum_of_hand_worked_op_times():
    # The roofline's arithmetic (the kernel model's is worked by hand in core/tests/cost).
    r = accel_sim.simulate(mlp_graph(), device=round_device(), cost_model="roofline")
    # mm: 2*512*1024*4096 FLOPs at 1e13 FLOP/s (compute-bound: 27.3 MB at 1e12 B/s is faster)
    mm_s = 2 * 512 * 1024 * 4096 / 1e13
    # relu: reads and writes 512*4096 fp32 at 1e12 B/s (memory-bound)
    relu_s = 2 * 512 * 4096 * 4 / 1e12
    assert r.latency_s == pytest.approx(2 * mm_s + relu_s, rel=1e-12)
    assert [op.bound for op in r.ops] == ["compute", "memory", "compute"]
    assert r.flops == 2 * 2 * 512 * 1024 * 4096 + 512 * 4096


def test_mlp_peak_memory_and_oom():
    # resident: x 2 MiB + W1 16 MiB + W2 16 MiB; at relu, h (8 MiB) and a (8 MiB) are both live.
    r = accel_sim.simulate(mlp_graph(), device=round_device())
    assert r.peak_memory_bytes == 50 * MIB
    assert r.peak_op.op == "relu"
    assert r.fits
    small = accel_sim.simulate(mlp_graph(), device=round_device(memory_gb=0.04))
    assert not small.fits
    assert any(h.kind.name == "out_of_memory" for h in small.hints)


def test_tf32_speeds_up_fp32_matmuls_only_when_asked():
    h100 = accel_sim.Device("h100")
    slow = accel_sim.simulate(mlp_graph(), device=h100, cost_model="roofline")
    fast = accel_sim.simulate(mlp_graph(), device=h100, tf32=True, cost_model="roofline")
    assert fast.latency_s < slow.latency_s
    assert slow.ops[0].compute_time_s == pytest.approx(2 * 512 * 1024 * 4096 / 66.9e12)
    assert fast.ops[0].compute_time_s == pytest.approx(2 * 512 * 1024 * 4096 / 494.7e12)


def test_breakdowns_cover_the_whole_latency():
    r = accel_sim.simulate(mlp_graph(), device="a100")
    for by in ("op", "op_class", "module", "layer", "module_type"):
        groups = r.groups(by)
        assert sum(g.time_s for g in groups) == pytest.approx(r.latency_s)
    assert r.groups("op")[0].name == "mm"
    with pytest.raises(accel_sim.UsageError):
        r.groups("nonsense")


def test_json_has_the_documented_fields():
    d = accel_sim.simulate(mlp_graph(), device="a100").to_dict()
    for key in ("latency_s", "peak_memory_bytes", "fits", "flops", "bytes", "uncovered_ops", "ops", "hints", "breakdown"):
        assert key in d
    assert len(d["ops"]) == 3
    assert d["ops"][0]["op"] == "mm" and d["ops"][0]["module"] == "fc1"


def test_unknown_op_is_costed_and_listed():
    g = mlp_graph()
    g["nodes"][1]["op"] = "my_fancy_activation"
    r = accel_sim.simulate(g, device=round_device(), cost_model="roofline")
    assert r.uncovered_ops == [{"op": "my_fancy_activation", "count": 1, "time_s": pytest.approx(2 * 512 * 4096 * 4 / 1e12)}]
    assert r.ops[1].time_s > 0


def test_compare_picks_the_fastest_device():
    c = accel_sim.compare(mlp_graph(), devices=["v100", "a100", "h100"])
    assert c.fastest.device.id == "h100_sxm"
    assert [r.device.id for r in c.reports] == ["v100_sxm2_16gb", "a100_80gb", "h100_sxm"]
    d = c.to_dict()
    assert d["fastest"] == "h100_sxm" and len(d["devices"]) == 3


def test_malformed_graph_is_a_usage_error():
    g = mlp_graph()
    g["nodes"][0]["inputs"] = [0, 99]
    with pytest.raises((accel_sim.UsageError, _core.ConfigError), match="'inputs\\[1\\]' is tensor 99, but the graph has 6"):
        accel_sim.simulate(g, device="a100")
    g = mlp_graph()
    g["version"] = 7
    with pytest.raises(accel_sim.UsageError, match="version"):
        accel_sim.simulate(g, device="a100")


def test_simulate_options_copy_every_field():
    import copy

    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    options.fuse_elementwise = True
    options.overlap_tp_comm = True
    options.fp8_weight_cache = True
    options.micro_batches = 4
    options.cost.clock_hz = 1.5e9
    options.cost.cuda_graphs = True
    group = _core.CommGroup()
    group.name, group.size, group.ranks_per_domain = "tp", 8, 8
    options.groups = [group]
    for copied in (copy.copy(options), copy.deepcopy(options), _core.SimulateOptions(options)):
        assert (copied.cost_model, copied.fuse_elementwise, copied.overlap_tp_comm, copied.fp8_weight_cache,
                copied.micro_batches) == ("kernel", True, True, True, 4)
        assert (copied.cost.clock_hz, copied.cost.cuda_graphs) == (1.5e9, True)
        assert [(g.name, g.size, g.ranks_per_domain) for g in copied.groups] == [("tp", 8, 8)]
        # An independent value: changing the copy leaves the original as it was.
        copied.cost.clock_hz = 1.0e9
        copied.fuse_elementwise = False
        assert options.cost.clock_hz == 1.5e9 and options.fuse_elementwise
    cost = copy.copy(options.cost)
    cost.allow_tf32 = True
    assert not options.cost.allow_tf32


def test_fused_run_reports_the_roofline_bound_of_the_fused_run():
    # Llama-3-8B prefill of 512 tokens on an H100 with elementwise fusion: the roofline MFU bound
    # is that of the same fused graph at roofline times, model FLOPs / (latency x peak), 0.666. It
    # used to be computed from a copy of the options that dropped fuse_elementwise (and the
    # TP-overlap and fp8-cache switches): the unfused roofline's lower bound, 0.651.
    built = accel_sim.build_model_graph("llama3-8b", phase="prefill", seq=512)
    fused = accel_sim.simulate(built, device="h100", fuse=True)
    by_hand = _core.SimulateOptions()
    by_hand.cost_model = "roofline"
    by_hand.fuse_elementwise = True
    roofline = _core.simulate(fused.graph, accel_sim.Device("h100").spec, by_hand)
    expected = roofline.model_flops / (roofline.latency_s * roofline.reference_peak_flops_per_s)
    assert fused.mfu_roofline_bound == pytest.approx(expected, rel=1e-12)
    by_hand.fuse_elementwise = False
    unfused = _core.simulate(fused.graph, accel_sim.Device("h100").spec, by_hand)
    assert unfused.model_flops_utilization < expected * 0.99  # fusion's gain is what was lost
