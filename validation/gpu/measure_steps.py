"""Whole-step measurements on a local GPU that `accel-sim calibrate` does not take: where the time
of an HF step goes, decode under CUDA graphs, and a torch.compile'd training step.

    python validation/gpu/measure_steps.py --out DIR [--quick --device cpu]

writes DIR/step_profile.csv (per step: CUDA kernels launched, their summed GPU time by class, and
the wall time; torch.profiler) and DIR/step_times.csv (decode steps replayed as one CUDA graph with
a static KV cache, as gpt-fast and the serving engines run them; a torch.compile'd training step),
each row with the GPU, driver, torch, CUDA and transformers versions and the date. The models are
built from the shipped configs with random weights (no hub access).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import build_hf_model, capture_graph, compute_dtype, provenance, script_arguments, wall_seconds, write_rows  # noqa: E402

PROFILE_COLUMNS = ["case", "model", "phase", "batch", "seq", "context", "layers", "kernels", "gemm_s",
                   "attention_s", "other_s", "kernel_sum_s", "wall_s", "source"]
TIME_COLUMNS = ["case", "model", "phase", "batch", "seq", "context", "layers", "mode", "measured_s",
                "peak_allocated_bytes", "source", "notes"]


def _classify(name: str) -> str:
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "cudnn", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("gemm", "nvjet", "cutlass", "xmma", "matmul", "cublas", "gemv", "splitk")):
        return "gemm"
    return "other"


def profile_by_class(torch, step, cuda: bool) -> tuple[dict, int]:
    """One step under torch.profiler: its CUDA kernels' summed seconds by class (gemm, attention,
    other) and how many it launched (none on a CPU run)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    sums = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    kernels = 0
    for e in prof.events():
        if cuda and e.device_type == torch.autograd.DeviceType.CUDA:
            sums[_classify(e.name)] += e.time_range.elapsed_us() * 1e-6
            kernels += 1
    return sums, kernels


def main() -> int:
    args = script_arguments(__doc__, "models")
    import torch
    import transformers

    cuda, dtype = compute_dtype(torch, args.device)
    source = provenance(torch, args.device) + f", transformers {transformers.__version__}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    full = 2 if args.quick else None  # decoder layers: the config's 32, or 2 in a quick run
    four = 1 if args.quick else 4
    small = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=256, head_dim=16)
    profiles, times = [], []

    def one(label, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported and left out
            print(f"# left out {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  file=sys.stderr, flush=True)

    def model_of(layers):
        # Quick runs shrink the shipped config to a few-thousand-parameter Llama (a test of the script).
        overrides = {**(small if args.quick else {}), **({"num_hidden_layers": layers} if layers else {})}
        return build_hf_model("llama-3-8b", overrides, args.device, dtype)

    # 1. Where the time of an HF eager step goes.
    def profiled(case, phase, batch, seq, context, layers):
        model, hf = model_of(layers)
        ids = torch.randint(0, hf.vocab_size, (batch, seq), device=args.device)
        if phase == "train":
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)

            def step():
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        elif phase == "prefill":
            model.eval()

            def step():
                with torch.no_grad():
                    model(input_ids=ids, logits_to_keep=1)
        else:
            model.eval()
            with torch.no_grad():
                cache = model(input_ids=torch.randint(0, hf.vocab_size, (batch, context), device=args.device),
                              use_cache=True, logits_to_keep=1).past_key_values

            def step():
                with torch.no_grad():
                    model(input_ids=ids, past_key_values=cache, use_cache=True)
                cache.crop(-1)
        seconds = wall_seconds(torch, step, 3 if args.quick else 10, cuda)
        sums, kernels = profile_by_class(torch, step, cuda)
        profiles.append(dict(case=case, model="llama-3-8b", phase=phase, batch=batch, seq=seq, context=context,
                             layers=layers or 32, kernels=kernels, gemm_s=f"{sums['gemm']:.6g}",
                             attention_s=f"{sums['attention']:.6g}", other_s=f"{sums['other']:.6g}",
                             kernel_sum_s=f"{sum(sums.values()):.6g}", wall_s=f"{seconds:.6g}", source=source))
        print(profiles[-1], flush=True)

    for args_ in (("decode b1", "decode", 1, 1, 16 if args.quick else 1024, full),
                  ("decode b32", "decode", 8 if args.quick else 32, 1, 16 if args.quick else 1024, full),
                  ("prefill b1 s2048", "prefill", 1, 16 if args.quick else 2048, 0, full),
                  ("train L4 b1 s4096", "train", 1, 16 if args.quick else 4096, 0, four)):
        one(args_[0], lambda: profiled(*args_))
        if cuda:
            torch.cuda.empty_cache()

    # 2. Decode with a static cache, replayed as one CUDA graph per step.
    def graphed_decode(batch, context, max_len):
        from transformers import StaticCache

        model, hf = model_of(full)
        model.eval()
        cache = StaticCache(config=hf, max_cache_len=max_len)
        prompt = torch.randint(0, hf.vocab_size, (batch, context), device=args.device)
        with torch.no_grad():
            model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1,
                  cache_position=torch.arange(context, device=args.device))
        ids = torch.randint(0, hf.vocab_size, (batch, 1), device=args.device)
        position = torch.tensor([context], device=args.device)

        def step():
            with torch.no_grad():
                return model(input_ids=ids, past_key_values=cache, use_cache=True, cache_position=position,
                             position_ids=position.expand(batch, 1)).logits

        eager = wall_seconds(torch, step, 3 if args.quick else 10, cuda)
        row = dict(case=f"decode b{batch} ctx{context}", model="llama-3-8b", phase="decode", batch=batch, seq=1,
                   context=context, layers=full or 32, source=source)
        times.append(dict(row, mode="eager static cache", measured_s=f"{eager:.6g}",
                          peak_allocated_bytes=torch.cuda.max_memory_allocated() if cuda else 0,
                          notes=f"HF StaticCache of {max_len} tokens, launched from Python"))
        print(times[-1], flush=True)
        if cuda:
            graph = capture_graph(torch, step)
            torch.cuda.reset_peak_memory_stats()
            seconds = wall_seconds(torch, graph.replay, 20, cuda)
            times.append(dict(row, mode="cuda graph", measured_s=f"{seconds:.6g}",
                              peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                              notes=f"HF StaticCache of {max_len} tokens, the step captured once and replayed"))
            print(times[-1], flush=True)

    for batch in ((1, 4) if args.quick else (1, 8, 32, 64)):
        for context in ((16,) if args.quick else (1024, 4096)):
            one(f"graphed decode b{batch} ctx{context}",
                lambda: graphed_decode(batch, context, context + 64))
            if cuda:
                torch.cuda.empty_cache()

    # 3. A compiled training step (what torchtitan and llm-foundry users run with compile on).
    def compiled_train(batch, seq, layers):
        model, hf = model_of(layers)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
        compiled = torch.compile(model)
        ids = torch.randint(0, hf.vocab_size, (batch, seq), device=args.device)

        def step():
            compiled(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        t0 = time.perf_counter()
        step()
        compile_s = time.perf_counter() - t0
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        seconds = wall_seconds(torch, step, 3 if args.quick else 10, cuda)
        times.append(dict(case=f"compiled train b{batch} s{seq}", model="llama-3-8b", phase="train", batch=batch,
                          seq=seq, context=0, layers=layers, mode="torch.compile", measured_s=f"{seconds:.6g}",
                          peak_allocated_bytes=torch.cuda.max_memory_allocated() if cuda else 0, source=source,
                          notes=f"torch.compile(model), default mode; weights, grads and fused AdamW states in "
                                f"{str(dtype).split('.')[-1]}; first step with compilation {compile_s:.1f} s"))
        print(times[-1], flush=True)

    one("compiled train", lambda: compiled_train(1, 16 if args.quick else 4096, four))

    for name, rows, columns in (("step_profile.csv", profiles, PROFILE_COLUMNS), ("step_times.csv", times, TIME_COLUMNS)):
        write_rows(rows, out / name, columns)
    print(f"# wrote {len(profiles)} profiles and {len(times)} step times to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
