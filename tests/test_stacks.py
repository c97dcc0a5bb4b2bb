"""Stack files (data/stacks/*.yaml, io/stack_file.py) and `--stack` on train and plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from accel_sim.errors import UsageError
from accel_sim.io.stack_file import DEFAULT_STACK, builtin_stacks, load_stack_file, resolve_stack

SHIPPED = ("megatron-core", "megatron-core-24.07", "torchtitan", "torchtitan-2024", "llm-foundry", "llm-foundry-2023", "deepspeed", "hf-accelerate",
           "flash-attention-training")
TRAIN = ("train", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "8", "--dp", "8", "--seq", "4096",
         "--global-batch", "8", "--json")


def test_the_shipped_stacks_load_with_a_source_for_every_choice():
    stacks = {s.id: s for s in builtin_stacks("training")}
    assert set(SHIPPED) <= set(stacks)
    for s in stacks.values():
        assert Path(s.path).stem == s.id and s.version
        assert all(f"training.{k}" in s.sources for k in ("attention", "gated_activation", "zero", "gradient_dtype"))
    assert resolve_stack(None).id == DEFAULT_STACK == "megatron-core"
    # Transformer Engine runs cuDNN attention from Hopper on, flash-attn before.
    mc = stacks["megatron-core"].training
    assert (mc.attention_for("Hopper GH100 (sm_90)"), mc.attention_for("Ampere GA100 (sm_80)")) == ("cudnn", "flash2")
    # NeMo 24.07's configs cast bf16 weights to fp8 each step; the current recipes keep fp8 weights.
    assert (mc.fp8_parameters, stacks["megatron-core-24.07"].training.fp8_parameters) == (True, False)
    # llm-foundry's 2023 benchmark release ran flash-attn 1.x; the current release runs flash-attn 2.
    assert stacks["llm-foundry-2023"].training.attention_for("Hopper GH100 (sm_90)") == "flash1"
    assert stacks["llm-foundry"].training.attention_for("Hopper GH100 (sm_90)") == "flash2"
    # Megatron-Core overlaps TP communication through Transformer Engine's userbuffers, which need
    # CUDA multicast (sm_90 on): on A100 NeMo's recipes leave it off.
    assert [mc.tp_comm_overlap_for(a) for a in ("Ampere GA100 (sm_80)", "Hopper GH100 (sm_90)",
                                                 "Blackwell dual-die (sm_100)", "CDNA 3 (gfx942)")] == [False, True, True, False]


def _train(*extra: str) -> dict:
    r = run_cli(*TRAIN, *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_stack_decides_what_the_ffn_and_the_loss_keep():
    # Llama-3-8B, 4,096 tokens per micro-batch on each of 8 GPUs (ZeRO-1 and ZeRO-3 shard states, not activations): torchtitan's eager FeedForward keeps silu(w1 x) beside w1 x
    # and w3 x, Megatron-Core's fused SwiGLU does not: 32 layers x 4,096 x 14,336 x 2 bytes =
    # 3,758,096,384 bytes more activations (the same attention kernel on both). The peak is at the
    # loss's backward, over 4,096 x 128,256 logits: torchtitan's F.cross_entropy of logits.float()
    # holds the fp32 log-softmax and two fp32 gradients there (12 bytes a logit), Megatron-Core's
    # vocab-parallel loss its fp32 softmax, overwritten by the gradient, and the bf16 gradient
    # cast from it (6 bytes): 4,096 x 128,256 x 6 = 3,152,019,456 bytes more.
    mc = _train("--stack", "megatron-core", "--attention-impl", "flash2")
    tt = _train("--stack", "torchtitan", "--attention-impl", "flash2")
    assert tt["activation_bytes"] - mc["activation_bytes"] == 32 * 4096 * 14336 * 2 + 4096 * 128256 * 6
    assert (mc["stack"]["id"], tt["stack"]["id"]) == ("megatron-core", "torchtitan")
    assert _train()["stack"]["id"] == "megatron-core"   # the default is named in the report


def test_selective_recomputation_is_what_the_stack_means():
    # Megatron-Core checkpoints the core attention; torchtitan's Llama configs its op-level policy,
    # which keeps, per layer and token beyond full recomputation's layer input, q (4,096 wide), v
    # (1,024), the attention output (4,096) and down (4,096) in bf16, gate (14,336) in bf16 and
    # the attention's fp32 log-sum-exp over 32 heads: (4,096 + 1,024 + 4,096 + 4,096 + 14,336) x 2
    # + 32 x 4 = 55,424 bytes; 32 layers x 4,096 tokens.
    mc = _train("--stack", "megatron-core", "--recompute", "selective")
    tt = {rc: _train("--stack", "torchtitan", "--recompute", rc) for rc in ("none", "selective", "full")}
    assert (mc["layout"]["recompute"], tt["selective"]["layout"]["recompute"]) == ("selective", "selective_op")
    assert tt["selective"]["activation_bytes"] - tt["full"]["activation_bytes"] == 32 * 4096 * 55_424
    assert tt["none"]["activation_bytes"] > tt["selective"]["activation_bytes"]
    # torchtitan's every-second-block option: half the layers keep everything, half their input.
    every2 = _train("--stack", "torchtitan", "--recompute", "full", "--recompute-interval", "2")
    assert every2["layout"]["recompute_interval"] == 2
    assert tt["full"]["activation_bytes"] < every2["activation_bytes"] < tt["none"]["activation_bytes"]
    # A stack without selective recomputation refuses it, and an interval needs a policy.
    for extra, message in ((("--stack", "llm-foundry", "--recompute", "selective"), "llm-foundry has no selective recomputation"),
                           (("--recompute-interval", "2"), "--recompute-interval applies to a recompute policy")):
        r = run_cli(*TRAIN, *extra)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    # plan leaves selective out of a stack that has none.
    r = run_cli("plan", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "16", "--seq", "4096",
                "--global-batch", "64", "--stack", "llm-foundry", "--threads", "1", "--top", "50", "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    assert {c["layout"]["recompute"] for c in json.loads(r.stdout)["best"]} <= {"none", "full"}


def test_an_eager_rmsnorm_keeps_its_fp32_copy(tmp_path):
    # The eager op sequence keeps x.float() (4 bytes per element) and the normalized output before
    # the weight's product (2) where the fused kernel keeps the bf16 input (2): 4 bytes more per
    # element of each of the 65 norms (two per layer and the final one), 4,096 tokens x 4,096.
    eager = tmp_path / "eager.yaml"
    eager.write_text("id: tt-eager\nextends: torchtitan\nname: t\nversion: t\nkind: training\n"
                     "training:\n  norm: eager\nsources:\n  training.norm: the test's\n")
    fused, slow = _train("--stack", "torchtitan"), _train("--stack", str(eager))
    assert slow["activation_bytes"] - fused["activation_bytes"] == 65 * 4 * 4096 * 4096
    assert slow["step_s"] > fused["step_s"]
    # torchtitan's 2024 release ran the eager one and a foreach AdamW.
    t = resolve_stack("torchtitan-2024").training
    assert (t.eager_norm, t.optimizer_impl, resolve_stack("torchtitan").training.eager_norm) == (True, "foreach", False)


def test_torchaos_float8_casts_every_linear_and_keeps_the_sixteen_bit_inputs():
    # torchtitan's fp8 is torchao's Float8Linear: --precision fp8-mixed runs it. Its amaxes and
    # casts, 5 each per linear in eager mode, cost more than the fp8 GEMMs gain at 4,096 tokens a
    # GPU; under torch.compile, which fuses them into their neighbours, it is faster than bf16
    # (torchao's float8 README asks for torch.compile for its speedups). The step keeps the 16-bit
    # inputs, as bf16 does, where Transformer Engine keeps fp8 copies (megatron-core: fewer saved
    # activation bytes in fp8).
    bf16 = _train("--stack", "torchtitan", "--attention-impl", "flash2")
    fp8 = _train("--stack", "torchtitan", "--attention-impl", "flash2", "--precision", "fp8-mixed")
    assert fp8["step_s"] > bf16["step_s"]
    compiled = {p: _train("--stack", "torchtitan", "--attention-impl", "flash2", "--compile", "--precision", p)
                for p in ("bf16-mixed", "fp8-mixed")}
    assert compiled["fp8-mixed"]["step_s"] < compiled["bf16-mixed"]["step_s"] < bf16["step_s"]
    te_bf16 = _train("--stack", "megatron-core", "--attention-impl", "flash2")
    te_fp8 = _train("--stack", "megatron-core", "--attention-impl", "flash2", "--precision", "fp8-mixed")
    assert te_fp8["activation_bytes"] < te_bf16["activation_bytes"]
    assert fp8["activation_bytes"] >= bf16["activation_bytes"]
    # Async TP is asked for where the stack does not run it by default.
    base = ["train", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "8", "--tp", "8", "--sp",
            "--seq", "4096", "--global-batch", "8", "--stack", "torchtitan", "--json"]
    plain, overlapped = (json.loads(run_cli(*base, *extra).stdout) for extra in ((), ("--tp-overlap",)))
    assert overlapped["step_s"] < plain["step_s"]
    # Without sequence parallelism there are no TP all-gathers and reduce-scatters to overlap.
    no_sp = run_cli(*[a for a in base if a != "--sp"], "--tp-overlap")
    assert no_sp.returncode == 2 and "--tp-overlap overlaps the TP all-gathers" in no_sp.stderr


def test_the_stack_sets_the_default_zero_stage():
    assert _train("--stack", "torchtitan")["layout"]["zero"] == 3   # FSDP2
    assert _train("--stack", "megatron-core")["layout"]["zero"] == 1   # the distributed optimizer
    r = run_cli(*TRAIN[:-1], "--stack", "deepspeed")
    assert "stack        deepspeed: DeepSpeed" in r.stdout and "ZeRO-3" in r.stdout
    one = run_cli(*TRAIN[:-1], "--stack", "deepspeed", "--gpus", "1", "--dp", "1", "--model", "gpt2", "--seq", "1024")
    assert one.returncode == 0 and "ZeRO-0" in one.stdout   # nothing to shard on one GPU


@pytest.mark.parametrize("extra,message", [
    (("--stack", "deepspeed", "--precision", "fp8-mixed"), "deepspeed has no fp8 recipe"),
    (("--stack", "deepspeed", "--tp-overlap"), "--tp-overlap: deepspeed has no tensor parallelism"),
    (("--stack", "deepspeed", "--gpus", "16", "--tp", "2"), "--tp 2: deepspeed has no tensor parallelism"),
    (("--stack", "llm-foundry", "--gpus", "16", "--pp", "2"), "--pp 2: llm-foundry has no pipeline parallelism"),
    (("--stack", "megatron-core", "--zero", "3"), "--zero 3: megatron-core runs ZeRO stages 0, 1"),
    (("--stack", "nemo-2"), "unknown training stack 'nemo-2' (known: deepspeed, flash-attention-training, hf-accelerate, hf-trainer-2021, llm-foundry-2023, llm-foundry, megatron-core-24.07, megatron-core-summa, megatron-core, megatron-lm-2022, tensorflow1-xla, torchtitan"),
])
def test_a_layout_the_stack_cannot_run_is_refused(extra, message):
    r = run_cli(*TRAIN, *extra)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_plan_searches_what_the_stack_runs():
    r = run_cli("plan", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "16", "--seq", "4096",
                "--global-batch", "64", "--stack", "llm-foundry", "--threads", "1", "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"]["id"] == "llm-foundry"
    layouts = [c["layout"] for c in out["best"]]
    assert layouts and all(l["tp"] == 1 and l["pp"] == 1 and l["cp"] == 1 and l["zero"] in (0, 2, 3) for l in layouts)


GOOD = Path(__file__).resolve().parents[1] / "python" / "accel_sim" / "data" / "stacks" / "torchtitan.yaml"
HF = GOOD.with_name("hf-accelerate.yaml")  # its runtime section charges 23 us per kernel


def _edited_stack_refused(good: Path, edit: tuple[str, str], message: str, tmp_path: Path) -> Path:
    """`good` with one edit, which load_stack_file refuses in one line naming the file and `message`."""
    text = good.read_text()
    assert edit[0] in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(UsageError) as e:
        load_stack_file(bad)
    assert str(bad) in str(e.value) and message in str(e.value) and "\n" not in str(e.value)
    return bad


@pytest.mark.parametrize("edit,message", [
    (("gated_activation: unfused", "gated_activation: half"), "'gated_activation' must be fused or unfused"),
    (("cross_entropy: upcast", "cross_entropy: liger"), "'cross_entropy' must be one of upcast, fused, vocab_parallel"),
    (("norm: fused", "norm: triton"), "'norm' must be fused or eager"),
    (("selective_recompute: op", "selective_recompute: layers"), "'selective_recompute' must be one of attention, op, none"),
    (("  cross_entropy: upcast\n", ""), "'training' lacks cross_entropy"),
    (("attention: {default: flash2}", "attention: {sm_90: flash9, default: flash2}"), "'attention.sm_90' must be one of"),
    (("attention: {default: flash2}", "attention: {sm_90: cudnn}"), "'attention' needs a default"),
    (("tp_comm_overlap: false", "tp_comm_overlap: {sm_90: false}"), "'tp_comm_overlap' needs a default"),
    (("tp_comm_overlap: false", "tp_comm_overlap: {hopper: false, default: false}"), "'tp_comm_overlap' keys are sm_NN, gfxNNN or default"),
    (("tp_comm_overlap: false", "tp_comm_overlap: {sm_90: maybe, default: false}"), "tp_comm_overlap.sm_90"),
    (("zero_stages: [0, 1, 2, 3]", "zero_stages: [0, 2]"), "'zero' 3 is not one of its zero_stages [0, 2]"),
    (("zero: 3\n", "zero: 4\n"), "'zero' must be an integer in [0, 3], got 4"),
    (("  overlap_grad_reduce: true\n", "  overlap_grad_reduce: true\n  prefetch: 2\n"), "unknown field 'training.prefetch'"),
    (("  training.gradient_dtype:", "  training.gradient_dtype_source:"), "names no source for training.gradient_dtype"),
    (("kind: training", "kind: serving"), "missing field 'serving'"),
    (("kind: training", "kind: inference"), "'kind' must be training"),
    (("tensor_parallel: true", "tensor_parallel: yes please"), "'tensor_parallel' must be true or false"),
    (("zero: 3\n", "zero: 3\nzero: 2\n"), ""),  # a key twice: the strict loader names it
    (("host_overhead_per_kernel_us: 30", "host_overhead_per_kernel_us: -1"), "must be at least 0"),
    (("host_overhead_per_kernel_us: 30", "host_overhead_per_kernel_us: 30\n  per_step_us: 5"),
     "unknown field 'runtime.per_step_us'"),
    (("  runtime.host_overhead_per_kernel_us:", "  runtime.host_cost:"),
     "names no source for runtime.host_overhead_per_kernel_us"),
])
def test_a_malformed_stack_file_is_one_line(tmp_path, edit, message):
    bad = _edited_stack_refused(GOOD, edit, message, tmp_path)
    r = run_cli(*TRAIN, "--stack", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1



def test_a_stack_charges_its_own_host_cost_per_kernel(tmp_path):
    # hf-accelerate's runtime section: 23 us per kernel, measured (HF eager steps on an H100 host).
    assert resolve_stack("hf-accelerate").host_overhead_per_kernel_s == pytest.approx(23e-6)
    assert resolve_stack("torchtitan").host_overhead_per_kernel_s == pytest.approx(30e-6)
    assert resolve_stack("megatron-core").host_overhead_per_kernel_s == 0.0  # the device's launch cost
    # GPT-2 at batch 1 x 64 tokens on one H100: most kernels are shorter than 23 us, so the step
    # waits on the host; at 4 us per kernel it waits far less (the optimizer's and the LM head's
    # kernels are longer than 23 us and cost the same in both). 4 us is the H100's bare launch
    # cost (h100_sxm.yaml), so a stack without a runtime section gives exactly that step.
    slow = tmp_path / "slow.yaml"
    slow.write_text(HF.read_text())
    fast = tmp_path / "fast.yaml"
    fast.write_text(HF.read_text().replace("host_overhead_per_kernel_us: 23", "host_overhead_per_kernel_us: 4"))
    base = ("train", "--model", "gpt2", "--system", "dgx_h100", "--gpus", "1", "--seq", "64", "--global-batch", "1",
            "--json")

    def step(stack: Path) -> dict:
        r = run_cli(*base, "--stack", str(stack))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    bare = tmp_path / "bare.yaml"
    bare.write_text("".join(line for line in HF.read_text().splitlines(keepends=True)
                            if not line.startswith(("runtime:", "  host_overhead_per_kernel_us:",
                                                    "  runtime.host_overhead_per_kernel_us:"))))
    a, b, c = step(slow), step(fast), step(bare)
    assert a["step_s"] > 2 * b["step_s"]
    assert c["step_s"] == pytest.approx(b["step_s"], rel=1e-12)


def test_stacks_lists_every_shipped_stack_with_its_choices(tmp_path):
    r = run_cli("stacks", "--json")
    assert r.returncode == 0, r.stderr
    listed = {s["id"]: s for s in json.loads(r.stdout)["stacks"]}
    assert set(SHIPPED) <= set(listed)
    assert [s for s in listed.values() if s["default"]] == [listed["megatron-core"]]
    assert listed["megatron-core"]["attention"] == {"sm_90": "cudnn", "sm_100": "cudnn", "default": "flash2"}
    assert listed["hf-accelerate"]["host_overhead_per_kernel_us"] == pytest.approx(23)
    assert listed["megatron-core"]["host_overhead_per_kernel_us"] is None  # the device's launch cost
    # LoRA adapters: Megatron's one per fused projection, HF PEFT's and DeepSpeed-Chat's one per
    # nn.Linear, none in torchtitan.
    assert {i: listed[i]["lora"] for i in ("megatron-core", "hf-accelerate", "deepspeed", "torchtitan")} == {
        "megatron-core": "fused", "hf-accelerate": "per_projection", "deepspeed": "per_projection",
        "torchtitan": "none"}
    engines = {s["id"]: s for s in json.loads(r.stdout)["serving_stacks"]}
    assert {"vllm", "sglang", "tensorrt-llm", "gpt-fast"} <= set(engines)
    assert engines["gpt-fast"]["decode_attention"] == {"default": "per_query_head"}
    assert engines["sglang"]["chunk"] is None and engines["sglang"]["max_batched_tokens"] == 8192
    text = run_cli("stacks")
    assert text.returncode == 0 and "megatron-core (default)" in text.stdout and "serving engines" in text.stdout
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD.read_text().replace("id: torchtitan", "id: mine"))
    extra = json.loads(run_cli("stacks", "--stack-file", str(mine), "--json").stdout)["stacks"]
    assert extra[0]["id"] == "mine" and extra[0]["path"] == str(mine)
    missing = run_cli("stacks", "--stack-file", str(tmp_path / "none.yaml"))
    assert missing.returncode == 2 and "stack file not found" in missing.stderr


# ---- --stack on simulate, compare and sweep ---------------------------------------------------

def test_each_stack_names_how_its_adamw_runs():
    # Megatron-Core, DeepSpeed and torchtitan: a fused multi-tensor kernel; HF Trainer 4.32-4.53:
    # torch.optim.AdamW's foreach; Composer's DecoupledAdamW and transformers' old AdamW: a loop.
    from accel_sim.commands.train import stack_builder_choices
    from accel_sim.io.stack_file import resolve_stack

    impl = {s: resolve_stack(s).training.optimizer_impl
            for s in ("megatron-core", "deepspeed", "torchtitan", "hf-accelerate", "llm-foundry", "hf-trainer-2021")}
    assert impl == {"megatron-core": "fused", "deepspeed": "fused", "torchtitan": "fused",
                    "hf-accelerate": "foreach", "llm-foundry": "for_loop", "hf-trainer-2021": "for_loop"}
    # simulate / compare / fit take it for a training step; Adafactor runs its own kernel.
    _, train = stack_builder_choices("llm-foundry", {}, "fused", "train", "adamw")
    _, ada = stack_builder_choices("llm-foundry", {}, "fused", "train", "adafactor")
    _, prefill = stack_builder_choices("llm-foundry", {}, "fused", "prefill", "adamw")
    assert (train["optimizer_impl"], ada["optimizer_impl"], prefill["optimizer_impl"]) == ("for_loop", "fused", "fused")


def test_simulate_runs_the_stack_s_optimizer():
    # GPT-2 (124M; 148 parameter tensors with a gradient: 12 layers x 12, the two embeddings and
    # the final norm's two) in fp32: transformers' loop AdamW launches eight kernels per tensor,
    # torch's foreach eight over the list, a fused AdamW one per layer and one for the rest.
    def optimizer_ops(stack: str) -> int:
        r = run_cli("simulate", "--model", "gpt2", "--device", "h100", "--phase", "train", "--seq", "64",
                    "--precision", "fp32", "--stack", stack, "--json", "--quiet")
        assert r.returncode == 0, r.stderr
        return sum(op["pass_name"] == "optimizer" and op["op"] != "_foreach_zero_" for op in json.loads(r.stdout)["ops"])

    assert optimizer_ops("hf-trainer-2021") == 8 * 148
    assert optimizer_ops("hf-accelerate") == 8
    assert optimizer_ops("megatron-core") == 13


def test_a_stack_s_optimizer_must_be_one_the_core_knows(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.read_text().replace("optimizer: fused", "optimizer: loop"))
    r = run_cli("stacks", "--stack-file", str(bad))
    assert r.returncode == 2 and "'optimizer' must be one of fused, foreach, for_loop" in r.stderr


def test_a_stack_s_lora_layout_must_be_known(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.read_text().replace("lora: none", "lora: shared"))
    r = run_cli("stacks", "--stack-file", str(bad))
    assert r.returncode == 2 and "'lora' must be one of fused, per_projection, none" in r.stderr


def _simulate(*extra: str) -> dict:
    r = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--json", "--no-ops", "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_simulate_runs_the_stack_s_kernels_and_names_it():
    # A training step (no optimizer; batch 4, so the peak is the activations at the loss, not the
    # 32 GB of fp32 gradients at the step's end) under torchtitan keeps silu(w1 x) beside w1 x and
    # w3 x, Megatron-Core's fused SwiGLU does not: 32 layers x 4 x 4,096 tokens x 14,336 x 2 bytes
    # more, on the same attention kernel; and at the loss's backward torchtitan's fp32 upcast loss
    # holds 12 bytes a logit where Megatron-Core's vocab-parallel loss holds 6 (see above): 6 more
    # over 4 x 4,096 rows of 128,256 logits.
    train = ("--phase", "train", "--batch", "4", "--seq", "4096", "--optimizer", "none", "--attention-impl", "flash2")
    mc, tt = _simulate(*train, "--stack", "megatron-core"), _simulate(*train, "--stack", "torchtitan")
    assert tt["peak_memory_bytes"] - mc["peak_memory_bytes"] == 32 * 4 * 4096 * 14336 * 2 + 4 * 4096 * 128256 * 6
    assert (mc["stack"]["id"], tt["stack"]["id"], mc["attention_impl"]) == ("megatron-core", "torchtitan", "flash2")
    # Without --attention-impl the stack picks: Transformer Engine's cuDNN attention on Hopper.
    assert _simulate("--stack", "megatron-core")["attention_impl"] == "cudnn"
    plain = _simulate()
    assert plain["stack"] is None and plain["attention_impl"] == "flash2"
    # HF's eager stack issues every kernel at 23 us: a batch-1 decode step cannot take less.
    decode = ("--phase", "decode", "--context", "1024")
    hf = _simulate(*decode, "--stack", "hf-accelerate")
    assert hf["latency_s"] >= hf["num_kernels"] * 23e-6 > _simulate(*decode)["latency_s"]


def test_compare_gives_each_device_the_kernel_the_stack_runs_there():
    r = run_cli("compare", "--model", "llama-3-8b", "--devices", "a100,h100", "--stack", "megatron-core", "--json")
    assert r.returncode == 0, r.stderr
    devices = {d["device"]["id"]: d for d in json.loads(r.stdout)["devices"]}
    assert devices["a100_80gb"]["attention_impl"] == "flash2" and devices["h100_sxm"]["attention_impl"] == "cudnn"
    assert {d["stack"]["id"] for d in devices.values()} == {"megatron-core"}


def test_sweep_runs_under_the_stack_and_a_stack_refuses_what_it_cannot_run():
    r = run_cli("sweep", "--model", "gpt2", "--seq", "128", "--stack", "hf-accelerate", "--vary", "batch=1,2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stack"]["id"] == "hf-accelerate"
    bad = run_cli("simulate", "--model", "llama-3-8b", "--stack", "deepspeed", "--tp", "2")
    assert bad.returncode == 2 and "--tp 2: deepspeed has no tensor parallelism" in bad.stderr
    unknown = run_cli("simulate", "--model", "gpt2", "--stack", "nemo-2")
    assert unknown.returncode == 2 and "unknown training stack 'nemo-2'" in unknown.stderr


def test_check_refuses_a_baseline_of_another_stack(tmp_path):
    baseline = tmp_path / "baseline.json"
    run = ("check", "--model", "gpt2", "--seq", "128", "--baseline", str(baseline), "--quiet")
    assert run_cli(*run, "--stack", "hf-accelerate", "--write-baseline").returncode == 0
    assert run_cli(*run, "--stack", "hf-accelerate").returncode == 0
    other = run_cli(*run, "--stack", "torchtitan")
    assert other.returncode == 2 and "--stack hf-accelerate there, --stack torchtitan here" in other.stderr
    none = run_cli(*run)
    assert none.returncode == 2 and "--stack hf-accelerate there, no --stack here" in none.stderr


def test_fit_builds_as_the_stack_runs():
    # The longest Llama-3-8B training step (no optimizer) on an H100 at its 8,192 positions: at
    # that length torchtitan's unfused SwiGLU keeps 32 x 8,192 x 14,336 x 2 bytes more, and its
    # fp32 upcast loss 6 bytes more for each of the 8,192 x 128,256 logits (see above).
    def peak(stack: str) -> int:
        r = run_cli("fit", "--model", "llama-3-8b", "--devices", "h100", "--phase", "train", "--axis", "seq",
                    "--optimizer", "none", "--stack", stack, "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["stack"]["id"] == stack and out["rows"][0]["largest"] == 8192
        return out["rows"][0]["peak_bytes"]

    assert peak("torchtitan") - peak("megatron-core") == 32 * 8192 * 14336 * 2 + 8192 * 128256 * 6
    script = run_cli("fit", str(Path(__file__).resolve().parents[1] / "examples" / "transformer_block.py"),
                     "--devices", "h100", "--axis", "batch", "--stack", "torchtitan")
    assert script.returncode == 2 and "--stack" in script.stderr


# ---- serving stacks and serve --stack ---------------------------------------------------------

ENGINES = ("vllm", "vllm-0.6", "sglang", "tensorrt-llm", "tensorrt-llm-0.6", "gpt-fast")
VLLM = Path(__file__).resolve().parents[1] / "python" / "accel_sim" / "data" / "stacks" / "vllm.yaml"
HOPPER, AMPERE = "Hopper GH100 (sm_90)", "Ampere GA100 (sm_80)"


def test_the_shipped_serving_stacks_name_a_source_for_every_choice():
    engines = {s.id: s for s in builtin_stacks("serving")}
    assert set(ENGINES) <= set(engines)
    for e in engines.values():
        assert e.kind == "serving" and e.training is None and Path(e.path).stem == e.id
        given = [k for k in ("prefill_attention", "decode_attention", "cuda_graphs", "scheduler", "max_seqs",
                             "max_batched_tokens", "chunk", "block_size", "gpu_memory_utilization")
                 if getattr(e.serving, k) is not None]
        assert all(f"serving.{k}" in e.sources for k in given), e.id
    # vLLM V1 runs FlashAttention 3 on Hopper, 2 before; chunked prefill (sarathi) at 8,192 tokens.
    v = engines["vllm"].serving
    assert (v.prefill_attention_for(HOPPER), v.prefill_attention_for(AMPERE)) == ("flash3", "flash2")
    assert (v.scheduler, v.chunk, v.max_seqs, v.block_size) == ("sarathi", 8192, 256, 16)
    # The masked multi-head attention of TensorRT-LLM 0.6 and gpt-fast's repeat_interleave read the
    # cache once per query head; XQA, FlashAttention's and FlashInfer's decode once per KV head.
    per_head = {i for i, e in engines.items() if e.serving.engine_for(HOPPER)["decode_attention"] == "per_query_head"}
    assert per_head == {"tensorrt-llm-0.6", "gpt-fast"}
    assert engines["tensorrt-llm"].serving.scheduler == "orca"   # GUARANTEED_NO_EVICT in-flight batching
    # vLLM, SGLang and TensorRT-LLM 1.x all-reduce with their own one-shot kernel; vLLM 0.5-0.7 had
    # none on ROCm (the MI300X's gfx942), TensorRT-LLM 0.6 and gpt-fast go through NCCL.
    own = {i for i, e in engines.items() if e.serving.engine_for(HOPPER)["custom_allreduce"]}
    assert own == {"vllm", "vllm-0.6", "sglang", "tensorrt-llm"}
    assert engines["vllm-0.6"].serving.engine_for("CDNA 3 (gfx942)")["custom_allreduce"] is False
    assert engines["vllm"].serving.engine_for("CDNA 3 (gfx942)")["custom_allreduce"] is True


@pytest.mark.parametrize("edit,message", [
    (("  chunk: 8192\n", "  max_batched_tokens: 8192\n"), "'max_batched_tokens' is not a token budget of the sarathi scheduler (it takes chunk)"),
    (("decode_attention: {default: grouped}", "decode_attention: {default: per_kv_head}"), "'decode_attention.default' must be one of grouped, per_query_head"),
    (("prefill_attention: {sm_90: flash3, default: flash2}", "prefill_attention: {default: eager}"), "'prefill_attention.default' must be one of"),
    (("  scheduler: sarathi\n", ""), "serving lacks scheduler"),
    (("  scheduler: sarathi\n", "  scheduler: fifo\n"), "'scheduler' must be one of vllm, sarathi, orca, static"),
    (("  gpu_memory_utilization: 0.9\n", "  gpu_memory_utilization: 0\n"), "gpu_memory_utilization"),
    (("  serving.block_size:", "  serving.block:"), "names no source for serving.block_size"),
    (("kind: serving\n", "kind: serving\ntraining: {}\n"), "a serving stack has no 'training' section"),
    (("custom_allreduce: {default: true}", "custom_allreduce: {default: maybe}"), "custom_allreduce.default"),
    (("custom_allreduce: {default: true}", "custom_allreduce: {cdna3: false, default: true}"),
     "'custom_allreduce' keys are sm_NN, gfxNNN or default, got 'cdna3'"),
])
def test_a_malformed_serving_stack_is_one_line(tmp_path, edit, message):
    bad = _edited_stack_refused(VLLM, edit, message, tmp_path)
    r = run_cli("serve", "--model", "gpt2", "--qps", "1", "--requests", "4", "--stack", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_a_stack_of_the_other_kind_is_refused():
    serve = run_cli("serve", "--model", "gpt2", "--qps", "1", "--requests", "4", "--stack", "megatron-core")
    assert serve.returncode == 2 and "'megatron-core' is a training stack; serve takes a serving stack" in serve.stderr
    train = run_cli(*TRAIN, "--stack", "vllm")
    assert train.returncode == 2 and "'vllm' is a serving stack" in train.stderr
    unknown = run_cli("serve", "--model", "gpt2", "--qps", "1", "--stack", "ollama")
    assert unknown.returncode == 2 and "unknown serving stack 'ollama' (known: gpt-fast, sglang" in unknown.stderr


def _serve(*extra: str) -> dict:
    r = run_cli("serve", "--device", "h100", "--qps", "1000", "--requests", "16", "--input-len", "256",
                "--output-len", "64", "--json", "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_serve_runs_the_engine_the_stack_names():
    out = _serve("--model", "llama-3-8b", "--stack", "tensorrt-llm-0.6")
    res = out["results"][0]
    assert out["stack"]["id"] == "tensorrt-llm-0.6" and out["scheduler"] == "static"
    assert res["engine"] == {"prefill_attention": "flash2", "decode_attention": "per_query_head", "cuda_graphs": False}
    assert _serve("--model", "llama-3-8b")["stack"] is None
    # Typed flags win over the stack's: the scheduler and the kernel.
    typed = _serve("--model", "llama-3-8b", "--stack", "tensorrt-llm-0.6", "--scheduler", "vllm",
                   "--attention-impl", "flash3")
    assert typed["scheduler"] == "vllm" and typed["results"][0]["engine"]["prefill_attention"] == "flash3"
    # vLLM's defaults: FlashAttention 3 on an H100, chunked prefill; a chunk typed under another
    # scheduler is refused as before.
    v = _serve("--model", "llama-3-8b", "--stack", "vllm")
    assert v["scheduler"] == "sarathi" and v["results"][0]["engine"]["prefill_attention"] == "flash3"
    bad = run_cli("serve", "--model", "gpt2", "--qps", "1", "--stack", "sglang", "--chunk", "512")
    assert bad.returncode == 2 and "--chunk" in bad.stderr
    # A disaggregated deployment runs chunked prefill: a stack scheduling otherwise is refused.
    split = run_cli("serve", "--model", "gpt2", "--qps", "1", "--replicas", "2", "--disaggregate", "1",
                    "--stack", "tensorrt-llm-0.6")
    assert split.returncode == 2 and "tensorrt-llm-0.6 schedules with static: add --scheduler sarathi" in split.stderr


def test_reading_the_cache_per_query_head_costs_only_grouped_models(tmp_path):
    # The same engine but for its decode kernel: Llama-3-8B (32 query heads on 8 KV heads) decodes
    # slower when each query head reads its KV head; GPT-2 (12 heads, 12 KV heads) the same.
    grouped = tmp_path / "grouped.yaml"
    grouped.write_text(Path(VLLM.parent / "tensorrt-llm-0.6.yaml").read_text()
                       .replace("decode_attention: {default: per_query_head}", "decode_attention: {default: grouped}"))
    for model, slower in (("llama-3-8b", True), ("gpt2", False)):
        a = _serve("--model", model, "--stack", "tensorrt-llm-0.6")["results"][0]
        b = _serve("--model", model, "--stack", str(grouped))["results"][0]
        if slower:
            assert a["tpot_s"]["p50"] > 1.05 * b["tpot_s"]["p50"]
        else:   # (the prefill runs the context kernel in both: the C++ test IterationModel.DecodeKernel...)
            assert (a["tpot_s"], a["ttft_s"]) == (b["tpot_s"], b["ttft_s"])


def test_a_stack_file_extends_a_shipped_stack(tmp_path):
    """`extends: ID` takes a shipped stack's choices and sources and replaces those the file
    gives, key by key; the file names itself. A base that is not shipped, or an extending file
    without its own id, is one line naming the file."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("id: mine\nextends: megatron-core\nname: Megatron, bf16 weights\nversion: local\n"
                    "training:\n  fp8_parameters: false\n  zero: 0\n"
                    "sources:\n  training.fp8_parameters: our launcher\n  training.zero: our launcher\n")
    base, entry = resolve_stack("megatron-core"), resolve_stack(str(mine))
    assert (entry.id, entry.kind, entry.version) == ("mine", "training", "local")
    assert (entry.training.fp8_parameters, entry.training.zero) == (False, 0)
    assert entry.training.attention == base.training.attention and entry.training.zero_stages == base.training.zero_stages
    assert entry.sources["training.zero"] == "our launcher"
    assert entry.sources["training.attention"] == base.sources["training.attention"]
    shipped = resolve_stack("megatron-core-24.07")   # a shipped stack written this way
    assert {k for k in vars(base.training) if getattr(base.training, k) != getattr(shipped.training, k)} == \
        {"fp8_parameters", "offload"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(mine.read_text().replace("extends: megatron-core", "extends: nemo-2"))
    with pytest.raises(UsageError, match=r"bad.yaml: 'extends' names no shipped stack 'nemo-2' \(known: .*megatron-core"):
        load_stack_file(bad)
    bad.write_text(mine.read_text().replace("id: mine\n", ""))
    with pytest.raises(UsageError, match="bad.yaml: missing field 'id'"):
        load_stack_file(bad)
    r = run_cli(*TRAIN, "--stack", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_torchtitans_logged_memory_is_what_the_caching_allocator_reserves():
    # torchtitan logs the caching allocator's peak reserved bytes (max_reserved_gib, metrics.py);
    # its December 2024 table gives 77.0 GiB for Llama 3.1 8B on 8 Grand Teton H100s, FSDP,
    # local batch 2 x 8,192 tokens, op-level selective checkpointing, torch.compile
    # (https://github.com/pytorch/torchtitan/blob/eaea6f6a2fa940f03a10906be1df3489cf30af85/docs/performance.md).
    # Live bytes alone (memory_per_gpu_bytes) come out under it; the free blocks the allocator
    # keeps in its segments once the loss's logits-sized tensors are freed and later requests do
    # not fit them bring the reserved figure within 5% (both figures hold the runtime's reserve,
    # about 0.5 GiB, which the log leaves out).
    r = run_cli("train", "--model", "llama-3-8b", "--system", "grand_teton_h100", "--gpus", "8", "--dp", "8",
                "--zero", "3", "--seq", "8192", "--global-batch", "16", "--microbatch", "2", "--recompute", "selective",
                "--compile", "--stack", "torchtitan-2024", "--precision", "bf16-mixed", "--json")
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    assert e["reserved_per_gpu_bytes"] > e["memory_per_gpu_bytes"]
    measured = 77.0 * 2**30
    assert abs(e["reserved_per_gpu_bytes"] / measured - 1) < 0.05
    assert e["memory_per_gpu_bytes"] / measured - 1 < -0.03


def test_a_stack_says_what_it_offloads(tmp_path):
    """training.offload: each entry a kind or a pair that goes together; the sets a run may ask
    for are their unions. Parameter offload needs ZeRO-3 among the stack's stages."""
    from accel_sim.errors import UsageError

    sets = lambda name: [sorted(s) for s in resolve_stack(name).training.offload_sets()]  # noqa: E731
    assert sets("deepspeed") == [[], ["optimizer"], ["parameters"], ["optimizer", "parameters"]]
    assert sets("torchtitan") == [[], ["optimizer", "parameters"]]
    assert sets("megatron-lm-2022") == [[]]
    for body, message in (("offload: [nvme]", "'offload' entries are optimizer, parameters, activations"),
                          ("offload: [parameters]\n  zero_stages: [0, 1]\n  zero: 1", "parameter offload needs ZeRO-3")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"id: bad\nextends: megatron-core\nname: x\nversion: x\ntraining:\n  {body}\n"
                       "sources:\n  training.offload: x\n  training.zero_stages: x\n  training.zero: x\n")
        with pytest.raises(UsageError, match=message):
            resolve_stack(str(bad))
