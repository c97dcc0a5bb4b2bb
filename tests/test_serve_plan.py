"""`accel-sim serve-plan` as a user runs it: its ranking against a brute-force search through
`serve` of every layout, the API and the CLI agreeing, seeded results, the report's parts, and
the refusals."""

from __future__ import annotations

import json
import math

import pytest

import accel_sim
from conftest import run_cli

# A small case: Llama-3-8B on H100 SXM (fp8 tensor cores) and A100 80GB (none) under vLLM; 24
# layouts run (the A100's 8 fp8 layouts cannot), each a rate search of 200-request trials.
SMALL = dict(model="llama-3-8b", devices="h100,a100_80gb", stack="vllm", qps=30, input_len="1500", output_len="150",
             slo_ttft_p99="600ms", slo_tpot_p99="30ms", requests=200, tp=[1, 2], pp=[1], quantization=["bf16", "fp8"],
             max_seqs=[16, 64], token_budget=[2048], disaggregate="1:1", max_gpus=32, seed=3)


def _cli_args(options: dict) -> list[str]:
    out = []
    for k, v in options.items():
        out += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    return out


def _brute_force(options: dict) -> list[tuple[int, str]]:
    """Every layout of the small case through `serve --find-max-qps` (the serving command's own
    flags, not the planner): (GPUs for the target, layout) of those meeting the SLOs within the
    budget, fewest first."""
    found = []
    for device in options["devices"].split(","):
        for quant in options["quantization"]:
            if quant == "fp8" and device == "a100_80gb":
                continue
            for tp in options["tp"]:
                for prefill in (0, 1):
                    for seqs in options["max_seqs"]:
                        kw = dict(model=options["model"], device=device, stack="vllm", tp=tp,
                                  replicas=2 if prefill else 1, find_max_qps=True, slo_ttft_p99=options["slo_ttft_p99"],
                                  slo_tpot_p99=options["slo_tpot_p99"], requests=options["requests"],
                                  input_len=options["input_len"], output_len=options["output_len"],
                                  max_seqs=seqs, chunk=options["token_budget"][0], seed=options["seed"])
                        if prefill:
                            kw["disaggregate"] = 1
                        if quant == "fp8":
                            kw |= dict(fp8=True, weight_dtype="fp8", kv_dtype="fp8")
                        try:
                            run = accel_sim.serve(**kw)
                        except accel_sim.UsageError:
                            continue  # does not fit
                        _, _, _, max_qps, _ = run.rows[0]
                        if max_qps.qps <= 0:
                            continue
                        unit_gpus = tp * (2 if prefill else 1)
                        gpus = math.ceil(options["qps"] / max_qps.qps * (1 - 1e-12)) * unit_gpus
                        if gpus <= options["max_gpus"]:
                            found.append((gpus, f"{device} {quant} TP{tp} {'1P:1D' if prefill else 'agg'} {seqs}"))
    return sorted(found)


@pytest.fixture(scope="module")
def small_plan():
    return accel_sim.serve_plan(**SMALL, exhaustive=True)


def test_the_search_finds_what_brute_force_over_serve_finds(small_plan):
    brute = _brute_force(SMALL)
    assert brute, "the small case must have layouts that meet the SLOs"
    plan = small_plan.to_dict()
    # Every layout the brute force found meets the SLOs in the planner too, at the same GPU count.
    ranked = [l for l in plan["layouts"] if l["verdict"] in ("best", "feasible")]
    assert len(ranked) == len(brute)
    assert sorted(l["gpus"] for l in ranked) == [g for g, _ in brute]
    assert plan["best"]["gpus"] == brute[0][0]
    # The screened search (the default) finds the same best as the exhaustive one.
    screened = accel_sim.serve_plan(**SMALL).to_dict()
    assert screened["best"]["gpus"] == plan["best"]["gpus"]
    assert screened["search"]["simulated"] <= plan["search"]["simulated"]


def test_units_gpus_cost_and_verdicts_are_consistent(small_plan):
    d = small_plan.to_dict()
    price = {"h100_sxm": 6.88, "a100_80gb": 5.12}  # the device files' price_usd_per_hour
    for l in d["layouts"]:
        if l["verdict"] in ("best", "feasible"):
            assert l["units"] == math.ceil(SMALL["qps"] / l["qps_per_unit"] - 1e-9)
            assert l["gpus"] == l["units"] * l["unit_gpus"] <= SMALL["max_gpus"]
            assert l["usd_per_hour"] == pytest.approx(l["gpus"] * price[l["device"]])
            # $/1M output tokens = $/hour / (requests/s x output tokens x 3,600 s) x 1e6.
            assert l["cost_per_million_output_tokens_usd"] == pytest.approx(
                l["usd_per_hour"] / (SMALL["qps"] * 150 * 3600) * 1e6)
        if l["device"] == "a100_80gb" and l["quantization"] == "fp8":
            assert l["verdict"] == "unsupported"
    assert d["rejected"]["unsupported"] == 8
    best = d["best"]
    assert best["deployment"]["slo_attainment"] > 0.9
    assert set(best["launch"]) == {"vllm", "sglang", "tensorrt-llm"}
    assert f"--tensor-parallel-size {best['tp']}" in best["launch"]["vllm"]
    assert f"--max-running-requests {best['max_seqs']}" in best["launch"]["sglang"]
    # The Pareto front: no layout meeting the SLOs beats one of its points in both coordinates.
    for p in d["pareto"]:
        for l in d["layouts"]:
            if l["verdict"] in ("best", "feasible"):
                assert not (l["tokens_per_s_per_user"] > p["tokens_per_s_per_user"]
                            and l["output_tokens_per_s_per_gpu"] > p["output_tokens_per_s_per_gpu"])


def test_cli_and_api_agree_and_are_seeded():
    options = dict(SMALL, devices="h100", quantization=["fp8"], max_seqs=[64])
    result = run_cli("serve-plan", *_cli_args(options), "--json")
    assert result.returncode == 0, result.stderr
    cli = json.loads(result.stdout)
    api = accel_sim.serve_plan(**options).to_dict()
    again = accel_sim.serve_plan(**options).to_dict()
    for d in (cli, api, again):
        d["search"].pop("seconds")
    assert cli == api == again
    assert cli["schema"] == "accel-sim/serve-plan"
    other_seed = accel_sim.serve_plan(**dict(options, seed=4, input_len="lognormal:7.3:0.3:200:3000")).to_dict()
    assert other_seed["workload"] != cli["workload"]


def test_text_report_has_the_best_the_front_the_flags_and_the_rejections():
    result = run_cli("serve-plan", *_cli_args(SMALL))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for part in ("best", "ranked layouts", "Pareto front", "vllm serve meta-llama/Meta-Llama-3-8B",
                 "python -m sglang.launch_server", "trtllm-serve", "rejected", "quantization not supported"):
        assert part in out, part


def test_throughput_objective_takes_no_rate():
    options = dict(SMALL, devices="h100", quantization=["bf16"], max_seqs=[64])
    options.pop("qps")
    d = accel_sim.serve_plan(**options, objective="throughput").to_dict()
    ranked = [l for l in d["layouts"] if l["verdict"] in ("best", "feasible")]
    assert ranked and d["best"]["units"] == 1
    per_gpu = [l["output_tokens_per_s_per_gpu"] for l in ranked]
    assert per_gpu == sorted(per_gpu, reverse=True)


@pytest.mark.parametrize("extra, message", [
    (["--objective", "throughput"], "takes no --qps"),
    (["--objective", "cost", "--devices", "mi300x"], "price"),
    (["--stack", "megatron-core"], "serving"),
    (["--disaggregate", "1-1"], "P:D"),
    (["--burstiness", "2"], "--arrival gamma"),
    (["--quantization", "fp4"], "bf16, fp8, int4"),
    (["--devices", "h100,h100_sxm"], "a device twice"),
])
def test_refusals(extra, message):
    base = ["--model", "llama-3-8b", "--devices", "h100", "--qps", "5", "--slo-tpot-p99", "50ms"]
    result = run_cli("serve-plan", *base, *extra)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_no_slo_is_refused():
    result = run_cli("serve-plan", "--model", "llama-3-8b", "--qps", "5")
    assert result.returncode == 2 and "--slo-ttft-p99" in result.stderr


def test_nvfp4_weights_are_what_the_packed_bytes_and_scales_make():
    """Llama-3-8B in NVFP4 on one B200: the layers' 32 x 218,103,808 linear weights at half a byte
    plus an fp8 scale per 16, and the embedding, LM head (128,256 x 4,096 each) and 65 norms of
    4,096 in bf16: 3,489,660,928 + 436,207,616 + 2,101,346,304 + 532,480 = 6,027,747,328 bytes."""
    d = json.loads(run_cli("serve", "--model", "llama-3-8b", "--device", "b200", "--weight-dtype", "nvfp4", "--fp4",
                           "--kv-dtype", "fp8", "--qps", "5", "--requests", "50", "--json").stdout)
    assert d["results"][0]["memory_per_gpu"]["weights_bytes"] == 6_027_747_328
    bad = run_cli("serve", "--model", "llama-3-8b", "--device", "b200", "--fp4", "--qps", "5")
    assert bad.returncode == 2 and "--weight-dtype nvfp4 or mxfp4" in bad.stderr


def test_fp4_layouts_run_only_where_fp4_units_are():
    options = dict(SMALL, devices="h100,b200,mi355x", quantization=["nvfp4", "mxfp4"], max_seqs=[64],
                   disaggregate="none", tp=[1])
    d = accel_sim.serve_plan(**options).to_dict()
    verdicts = {(l["device"], l["quantization"]): l["verdict"] for l in d["layouts"]}
    assert verdicts[("h100_sxm", "nvfp4")] == verdicts[("h100_sxm", "mxfp4")] == "unsupported"
    assert verdicts[("mi355x", "nvfp4")] == "unsupported"  # MX block scales only
    assert verdicts[("mi355x", "mxfp4")] != "unsupported" and verdicts[("b200", "nvfp4")] != "unsupported"


def test_speculative_decoding_in_serve_is_what_the_hand_counts_give():
    """EAGLE, k = 3, acceptance 0.8: (1 - 0.8^4) / 0.2 = 2.952 tokens a step; the head holds one
    Llama-3-8B layer (218,103,808 + 2 x 4,096 parameters) and its 2 x 4,096^2 projection:
    251,666,432 parameters, 503,332,864 bytes more than without it."""
    base = ["serve", "--model", "llama-3-8b", "--device", "h100", "--qps", "4", "--requests", "100",
            "--input-len", "500", "--output-len", "200", "--json"]
    plain = json.loads(run_cli(*base).stdout)["results"][0]
    spec = json.loads(run_cli(*base, "--speculative", "eagle", "--spec-tokens", "3", "--acceptance", "0.8").stdout)
    r = spec["results"][0]
    assert r["speculative"]["expected_tokens_per_step"] == pytest.approx(2.952, abs=1e-12)
    assert r["memory_per_gpu"]["weights_bytes"] - plain["memory_per_gpu"]["weights_bytes"] == 503_332_864
    assert plain["speculative"] is None
    # Fewer, longer decode steps: each costs more than a plain one, but gives 2.952 tokens.
    assert r["tpot_s"]["mean"] < plain["tpot_s"]["mean"] and r["steps"] < plain["steps"]


@pytest.mark.parametrize("extra, message", [
    (["--spec-tokens", "3"], "give --speculative"),
    (["--speculative", "eagle"], "--acceptance"),
    (["--speculative", "draft_model", "--spec-tokens", "3", "--acceptance", "0.7"], "--draft-model"),
    (["--speculative", "mtp", "--spec-tokens", "1", "--acceptance", "0.7"], "multi-token-prediction"),
    (["--speculative", "eagle", "--spec-tokens", "3", "--acceptance", "0.7", "--draft-model", "llama-3-8b"],
     "--speculative draft_model"),
])
def test_speculative_refusals(extra, message):
    result = run_cli("serve", "--model", "llama-3-8b", "--device", "h100", "--qps", "4", "--requests", "20", *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_deepseek_v3_carries_its_mtp_module():
    from accel_sim.io.model_config import load_model_spec

    assert load_model_spec("deepseek-v3").mtp_layers == 1  # its config's num_nextn_predict_layers
    assert load_model_spec("llama-3-8b").mtp_layers == 0


def test_the_planner_tries_each_layout_with_and_without_speculation():
    options = dict(SMALL, devices="h100", quantization=["bf16"], max_seqs=[64], disaggregate="none", tp=[1])
    spec = dict(options, speculative="eagle", spec_tokens=3, acceptance=0.8)
    run = accel_sim.serve_plan(**spec)
    d = run.to_dict()
    assert d["speculative"]["kind"] == "eagle"
    by = {l["speculative"]: l for l in d["layouts"]}
    assert set(by) == {False, True}
    # Each speculative layout's rate is serve --find-max-qps's under the same flags.
    found = accel_sim.serve(model="llama-3-8b", device="h100", stack="vllm", find_max_qps=True,
                            slo_ttft_p99=SMALL["slo_ttft_p99"], slo_tpot_p99=SMALL["slo_tpot_p99"],
                            requests=SMALL["requests"], input_len=SMALL["input_len"], output_len=SMALL["output_len"],
                            max_seqs=64, chunk=2048, seed=SMALL["seed"], speculative="eagle", spec_tokens=3,
                            acceptance=0.8)
    assert by[True]["qps_per_unit"] == pytest.approx(found.rows[0][3].qps, rel=1e-12)
    from accel_sim.report.serve_planning import launch_commands

    layout = next(r for r in run.result.layouts if r.layout.speculative)
    launch = launch_commands(run, layout)
    assert '"method":"eagle","num_speculative_tokens":3' in launch["vllm"]
    assert "--speculative-algorithm EAGLE --speculative-num-steps 3" in launch["sglang"]


def test_a_shared_prefix_is_served_from_the_prefix_cache():
    """Prompts of 2,000 tokens, half shared: 1,000 tokens, 62 whole blocks of 16 = 992 tokens a
    warm cache holds; every request after the first finds them: a hit rate just under 992 / 2,000."""
    base = ["serve", "--model", "llama-3-8b", "--device", "h100", "--qps", "8", "--requests", "300",
            "--input-len", "2000", "--output-len", "200", "--json"]
    shared = json.loads(run_cli(*base, "--shared-prefix", "0.5", "--prefix-caching").stdout)["results"][0]
    assert shared["prefix_hit_rate"] == pytest.approx(992 / 2000 * 299 / 300, rel=1e-9)
    plain = json.loads(run_cli(*base).stdout)["results"][0]
    assert shared["ttft_s"]["mean"] < plain["ttft_s"]["mean"]
    refused = run_cli(*base[:-1], "--shared-prefix", "0.5")
    assert refused.returncode == 2 and "--prefix-caching" in refused.stderr
    # The planner serves the prefix from the paged engines' cache, as serve does.
    options = dict(SMALL, devices="h100", quantization=["bf16"], max_seqs=[64], disaggregate="none", tp=[1],
                   shared_prefix=0.5)
    d = accel_sim.serve_plan(**options).to_dict()
    found = accel_sim.serve(model="llama-3-8b", device="h100", stack="vllm", find_max_qps=True,
                            slo_ttft_p99=SMALL["slo_ttft_p99"], slo_tpot_p99=SMALL["slo_tpot_p99"],
                            requests=SMALL["requests"], input_len=SMALL["input_len"], output_len=SMALL["output_len"],
                            max_seqs=64, chunk=2048, seed=SMALL["seed"], shared_prefix=0.5, prefix_caching=True)
    assert d["best"]["qps_per_unit"] == pytest.approx(found.rows[0][3].qps, rel=1e-12)


def test_attention_data_parallel_replicas_of_an_moe_model():
    """Mixtral-8x7B as 4 attention-DP GPUs: each holds the attention, router and norms of every
    layer (41,943,040 + 32,768 + 8,192), 2 of the 8 experts (352,321,536), the embedding and head
    (2 x 32,000 x 4,096) and the final norm: 12,879,925,248 parameters, 2 bytes each."""
    d = json.loads(run_cli("serve", "--model", "mixtral-8x7b", "--device", "h100", "--dp-attention", "4", "--qps", "8",
                           "--requests", "100", "--input-len", "500", "--output-len", "100", "--json").stdout)
    r = d["results"][0]
    assert r["gpus"] == 4 and d["dp_attention"] == 4
    assert r["memory_per_gpu"]["weights_bytes"] == 2 * 12_879_925_248
    dense = run_cli("serve", "--model", "llama-3-8b", "--device", "h100", "--dp-attention", "2", "--qps", "4")
    assert dense.returncode == 2 and "MoE" in dense.stderr
    plan = accel_sim.serve_plan(model="mixtral-8x7b", devices="h100", qps=20, input_len="1000", output_len="200",
                                slo_ttft_p99="1s", slo_tpot_p99="60ms", requests=200, tp=[1, 2], pp=[1],
                                quantization=["bf16"], max_seqs=[64], disaggregate="none", dp_attention=[1, 4])
    layouts = plan.to_dict()["layouts"]
    assert {(l["tp"], l["dp_attention"]) for l in layouts} == {(1, 1), (2, 1), (1, 4)}
    dp4 = next(l for l in layouts if l["dp_attention"] == 4)
    assert dp4["unit_gpus"] == 4
    refused = run_cli("serve-plan", "--model", "llama-3-8b", "--qps", "5", "--slo-tpot-p99", "50ms",
                      "--dp-attention", "1,2")
    assert refused.returncode == 2 and "dense" in refused.stderr


def test_every_published_throughput_deployment_is_feasible_and_searched_as_serve_predicts_it():
    """The calibration set's throughput deployments (TensorRT-LLM static batches, vLLM offline
    throughput) as the planner's searches of their one layout: each ran, so each must be feasible,
    and the planner's throughput, every request at once, must be serve's."""
    from accel_sim import validation

    plans = validation.serving_plan_checks()
    serve = {r["id"]: r for r in validation.serving_validation()}
    assert len(plans) == 45
    for p in plans:
        assert p["verdict"] in ("best", "feasible"), (p["id"], p["reason"])
        assert p["predicted"] == pytest.approx(serve[p["id"]]["predicted"], rel=1e-9), p["id"]


def test_a_host_memory_tier_holds_what_the_gpu_cache_evicts():
    """Llama-3-8B on one H100 with 64 GiB of host memory per GPU for the KV cache: 64 GiB /
    (131,072 bytes a token x 16 tokens a block) = 32,768 blocks; the flags that would not apply
    are refused."""
    base = ["serve", "--model", "llama-3-8b", "--device", "h100", "--qps", "4", "--requests", "50",
            "--input-len", "1000", "--output-len", "50"]
    d = json.loads(run_cli(*base, "--shared-prefix", "0.5", "--prefix-caching", "--kv-offload", "64",
                           "--host-link-gbs", "63", "--json").stdout)
    assert d["results"][0]["memory_per_gpu"]["host_kv_blocks_per_engine"] == 64 * 2**30 // (131072 * 16)
    for extra, message in ((["--prefix-caching", "--shared-prefix", "0.5", "--kv-offload", "64"], "--host-link-gbs"),
                           (["--kv-offload", "64", "--host-link-gbs", "63"], "--prefix-caching"),
                           (["--host-link-gbs", "63"], "--kv-offload")):
        refused = run_cli(*base, *extra)
        assert refused.returncode == 2 and message in refused.stderr, (extra, refused.stderr)
