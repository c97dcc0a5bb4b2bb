"""`accel-sim fit`: the largest batch or sequence length per device, checked by brute force."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli


def _fit(*args):
    result = run_cli("fit", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_builder_fit_agrees_with_a_linear_scan(tmp_path):
    from accel_sim import _core
    from accel_sim.api import build_model_graph
    from accel_sim.device import resolve_device

    d = _fit("--model", "gpt2", "--devices", "v100,a100-40gb", "--axis", "batch", "--train", "--seq", "1024",
             "--plot", str(tmp_path / "fit.svg"))
    assert [r["device"] for r in d["rows"]] == ["v100_sxm2_16gb", "a100_40gb"]
    for row in d["rows"]:
        spec = resolve_device(row["device"], []).spec
        capacity = spec.memory_bytes
        brute, batch = 0, 1
        while batch <= row["largest"] + 1:
            # simulate's own verdict, batch by batch
            graph = build_model_graph("gpt2", phase="train", batch=batch, seq=1024).graph
            options = _core.SimulateOptions()
            if not _core.simulate(graph, spec, options).fits:
                break
            brute, batch = batch, batch + 1
        assert row["largest"] == brute > 1
        assert row["peak_bytes"] <= capacity < row["next_peak_bytes"]
    svg = (tmp_path / "fit.svg").read_text()
    assert svg.startswith("<svg") and "v100_sxm2_16gb" in svg and "a100_40gb" in svg


def test_builder_fit_along_the_sequence_with_recompute():
    plain = _fit("--model", "llama-3-8b", "--devices", "h100", "--axis", "seq", "--phase", "prefill", "--batch", "4")
    row = plain["rows"][0]
    assert 1 < row["largest"] <= 8192  # capped by the model's 8192 positions
    # Training Llama-3-8B with AdamW on one 80 GB H100 does not fit at any length (144 GB of state).
    train = _fit("--model", "llama-3-8b", "--devices", "h100", "--axis", "seq", "--train", "--recompute", "full")
    assert train["rows"][0]["largest"] == 0


def test_script_fit_resizes_the_example_inputs():
    from accel_sim.device import resolve_device
    from accel_sim.fit_search import script_probe

    d = _fit(str(REPO / "examples" / "gpt2.py"), "--devices", "v100", "--axis", "batch")
    row = d["rows"][0]
    probe, original, positions = script_probe(str(REPO / "examples" / "gpt2.py"), "batch")
    assert (original, positions) == (8, 1024)  # examples/gpt2.py: batch 8; GPT-2's n_positions
    spec = resolve_device("v100", []).spec
    runtime = spec.runtime_reserved_bytes
    # The boundary, captured again directly: the largest batch fits, one more does not.
    assert probe(row["largest"]) + runtime == row["peak_bytes"] <= spec.memory_bytes
    assert probe(row["largest"] + 1) + runtime > spec.memory_bytes
    # A dip among the probes (the allocator packs some sizes better) is reported.
    probes = sorted((p["value"], p["peak_bytes"]) for p in d["probes"])
    assert row["monotone"] == all(a[1] <= b[1] for a, b in zip(probes, probes[1:]))


def test_fit_usage_errors():
    script = run_cli("fit", str(REPO / "examples" / "gpt2.py"), "--devices", "h100", "--axis", "batch", "--train",
                     "--recompute", "full")
    assert script.returncode == 2 and "--recompute applies to a graph built with --model NAME" in script.stderr
    limit = run_cli("fit", "--model", "gpt2", "--devices", "h100", "--axis", "batch", "--max", "0")
    assert limit.returncode == 2 and "argument --max: expected a whole number from 1" in limit.stderr
    both = run_cli("fit", "--devices", "h100", "--axis", "batch")
    assert both.returncode == 2 and "either a script or --model" in both.stderr
    device = run_cli("fit", "--model", "gpt2", "--devices", "h100,nosuchchip", "--axis", "batch")
    assert device.returncode == 2 and "nosuchchip" in device.stderr and "Traceback" not in device.stderr


def test_the_search_limit_stops_where_no_device_can_fit():
    # A limit near 2^63 reached the core's search, whose guesses are doubles, and came back as a
    # negative batch ("--batch must be at least 1 (got -9223372036854775808)").
    limit = run_cli("fit", "--model", "gpt2", "--devices", "h100", "--axis", "batch", "--seq", "128",
                    "--max", str(2**63 - 1))
    assert limit.returncode == 2 and limit.stderr.strip().splitlines() == [
        "accel-sim fit: error: argument --max: expected a whole number from 1 to 1,125,899,906,842,624 (2^50: no "
        "device holds as many bytes, and each sequence or token takes at least one), got 9223372036854775807 "
        "(see `accel-sim fit --help`)"]
    # A probe that fails says which value the search was trying.
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.fit_search import fit

    def probe(value: int) -> int:
        raise UsageError("batch x seq x hidden_size x 4 bytes overflows 64-bit byte counts")

    with pytest.raises(UsageError) as failed:
        fit(probe, [resolve_device("h100").spec], "batch", 2**50, "a model")
    assert str(failed.value) == ("at batch 1, a value the search probed (--max 1,125,899,906,842,624 bounds it): "
                                 "batch x seq x hidden_size x 4 bytes overflows 64-bit byte counts")


def test_the_optimizer_offloaded_fits_what_the_device_alone_cannot():
    # Llama-3-8B with AdamW and fp32 master weights does not train on one 80 GB H100 at any batch
    # (18 bytes a parameter, 144.5 GB); with the optimizer on the host (ZeRO-Offload on one GPU)
    # the host holds the states (12 bytes), the fp32 gradients (4) and a bf16 copy (2): 18 x
    # 8,030,261,248 bytes, and the device the bf16 weights, one gradient at a time and the
    # activations: at batch 1 it needs at least 15 bytes a parameter less (the 12 of states and
    # the 4 of gradients, less the one gradient it holds, at most the [128256, 4096] fp32 LM
    # head's or embedding's 2.1 GB, and the backward's activations of 2,048 tokens, about 2 GB:
    # together under a byte a parameter).
    n = 8_030_261_248
    flags = ("--model", "llama-3-8b", "--devices", "h100", "--axis", "batch", "--train", "--seq", "2048",
             "--recompute", "full")
    plain, off = _fit(*flags), _fit(*flags, "--offload", "optimizer")
    assert plain["rows"][0]["largest"] == 0 and plain["host_bytes"] is None
    assert off["rows"][0]["largest"] > 1
    assert off["host_bytes"] == 18 * n
    at_one = {p["value"]: p["peak_bytes"] for p in off["probes"]}[1]
    assert plain["probes"][0]["value"] == 1
    assert plain["probes"][0]["peak_bytes"] - at_one >= 15 * n
    refused = run_cli("fit", "--model", "llama-3-8b", "--devices", "h100", "--axis", "batch", "--offload", "optimizer")
    assert refused.returncode == 2 and "applies to a training step" in refused.stderr


def test_the_optimizer_offloaded_needs_an_optimizer():
    bad = run_cli("fit", "--model", "gpt2", "--devices", "h100", "--axis", "batch", "--train", "--optimizer", "none",
                  "--offload", "optimizer")
    assert bad.returncode == 2 and "--optimizer none runs no optimizer" in bad.stderr
