"""Two training paths `accel-sim calibrate` samples thinly, measured on a local GPU.

    python validation/gpu/measure_train_paths.py --out DIR [--quick --device cpu]

1. DIR/attention_sweep.csv: SDPA attention with the FlashAttention-2 and cuDNN backends pinned,
   forward and backward, at the short and middle sequence lengths fine-tuning runs use (128 to
   2,048 tokens, 8k and 32k tokens per call, head dims 64 and 128, causal or not, GQA 32/8), in the
   columns and with the split rule of the package's kernels.csv (timed as `calibrate` times them:
   CUDA events around each launch, L2 flushed before it, median of 20).
   DIR/attention_kernels.csv: the CUDA kernels one backward launches (torch.profiler), by name,
   with their count and summed time, for three shapes: what runs besides the main kernel.
2. DIR/amp_steps.csv: HF transformers training steps (random weights, shipped configs) under the
   precisions HF Trainer offers: fp32, fp32 weights under fp16 autocast with a GradScaler
   (`--fp16`), the same under bf16 autocast (`--bf16`), and pure bf16; torch.optim.AdamW as the
   Trainer's default `adamw_torch` builds it (foreach on CUDA), and the per-parameter loop
   (`foreach=False`) for comparison; with and without gradient checkpointing. Each row: the
   median wall time of 10 steps, torch.cuda's peak allocated and reserved bytes, and the step's
   CUDA kernels by class (torch.profiler). Columns of the package's end_to_end.csv plus the
   profile's.

Every row names the GPU, its power limit and clocks, the driver, torch, CUDA and transformers
versions and the date.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import (COLUMNS, E2E_COLUMNS, _timer, build_hf_model, compute_dtype, provenance,  # noqa: E402
                                   script_arguments, split_of, wall_seconds, write_rows)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_steps import profile_by_class  # noqa: E402  (a step's CUDA kernels by class)

KERNEL_COLUMNS = ["shape", "impl", "kernel", "count", "total_s", "source"]
STEP_COLUMNS = E2E_COLUMNS + ["optimizer_impl", "checkpointing", "kernels_launched", "gemm_s", "attention_s",
                              "other_s", "kernel_sum_s"]


def attention_sweep(torch, args, source):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    cuda, dtype = compute_dtype(torch, args.device)
    timed = _timer(torch, args.device, repeats=3 if args.quick else 20, flush_l2=True)
    backends = ([("flash2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)] if cuda
                else [("flash2", SDPBackend.MATH)])
    rows, kernels = [], []
    seqs = (32, 64) if args.quick else (128, 256, 512, 1024, 2048)
    token_counts = (128,) if args.quick else (8192, 32768)
    heads = 4 if args.quick else 32
    shapes = [(t // s, heads, heads, s, d, c) for s in seqs for t in token_counts for d in (64, 128)
              for c in (False, True)]
    shapes += [(token_counts[-1] // s, heads, heads // 4, s, 128, True) for s in seqs]
    profiled = {(128, 128), (512, 128), (4096, 128)} if not args.quick else {(32, 128)}
    if not args.quick:
        shapes += [(32768 // 4096, heads, heads, 4096, 128, True)]

    def add(**fields):
        row = {c: "" for c in COLUMNS}
        row.update({k: ("true" if v is True else "false" if v is False else v) for k, v in fields.items()})
        row.update(device=args.device_id, dtype="bf16" if cuda else "fp32", source=source, timing="events")
        row["split"] = split_of(row)
        rows.append(row)

    for impl, backend in backends:
        for batch, h, kv, s, d, causal in shapes:
            try:
                q = torch.randn(batch, h, s, d, device=args.device, dtype=dtype, requires_grad=True)
                k = torch.randn(batch, kv, s, d, device=args.device, dtype=dtype, requires_grad=True)
                v = torch.randn_like(k, requires_grad=True)
                gqa = {"enable_gqa": True} if kv != h else {}
                fields = dict(kind="attention", op="attention", batch=batch, heads=h, kv_heads=kv, seq_q=s, seq_k=s,
                              head_dim=d, causal=causal, impl=impl,
                              notes=f"F.scaled_dot_product_attention, backend {backend.name}")
                with sdpa_kernel([backend]):
                    add(direction="forward", measured_s=f"{timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)):.6g}", **fields)
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                    grad = torch.randn_like(out)

                    def backward():
                        return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

                    add(direction="backward", measured_s=f"{timed(backward):.6g}", **fields)
                    if (s, d) in profiled and not causal and kv == h:
                        with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
                            backward()
                            if cuda:
                                torch.cuda.synchronize()
                        by_name = collections.defaultdict(lambda: [0, 0.0])
                        for e in prof.events():
                            if e.device_type != torch.autograd.DeviceType.CUDA:
                                continue
                            by_name[e.name][0] += 1
                            by_name[e.name][1] += e.time_range.elapsed_us() * 1e-6
                        for name, (count, total) in by_name.items():
                            kernels.append(dict(shape=f"b{batch} h{h} s{s} d{d}", impl=impl, kernel=name[:160],
                                                count=count, total_s=f"{total:.6g}", source=source))
            except Exception as e:  # noqa: BLE001 - reported and left out
                print(f"# left out {impl} b{batch} h{h}/{kv} s{s} d{d} causal={causal}: {type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr, flush=True)
    for i, row in enumerate(rows, 1):
        row["id"] = f"a{i:04d}"
    print(f"# attention: {len(rows)} rows, {len(kernels)} kernel lines", flush=True)
    return rows, kernels


def amp_steps(torch, args, source):

    cuda = args.device.startswith("cuda")
    small = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=256, head_dim=16, n_embd=64, n_head=4, n_layer=2, num_hidden_layers=2)
    steps = []
    # (model, overrides, batch, seq, precision, optimizer foreach, gradient checkpointing)
    cases = []
    for precision in ("fp32", "amp-fp16", "amp-bf16", "bf16"):
        cases.append(("bert-large-uncased", {}, 4, 512, precision, True, False))
        cases.append(("bert-large-uncased", {}, 1, 512, precision, True, True))
        cases.append(("gpt2", {}, 8, 1024, precision, True, False))
    cases.append(("bert-large-uncased", {}, 4, 512, "amp-fp16", False, False))
    cases.append(("bert-large-uncased", {}, 4, 512, "fp32", False, False))
    for precision in ("amp-fp16", "fp32"):
        cases.append(("llama-3-8b", {"num_hidden_layers": 4}, 1, 4096, precision, True, False))
    cases.append(("llama-3-8b", {"num_hidden_layers": 4}, 1, 4096, "amp-fp16", True, True))
    if args.quick:
        cases = [(m, {**o, **small}, 2, 32, p, f, g) for (m, o, _, _, p, f, g) in cases[:4]]

    for i, (model_id, overrides, batch, seq, precision, foreach, checkpointing) in enumerate(cases, 1):
        try:
            if cuda:
                torch.cuda.empty_cache()
                torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: fp32 GEMMs in fp32
            weights = torch.bfloat16 if precision == "bf16" else torch.float32
            model, hf = build_hf_model(model_id, overrides, args.device, weights)
            model.train()
            if checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=foreach)
            scaler = torch.amp.GradScaler("cuda" if cuda else "cpu") if precision == "amp-fp16" else None
            autocast_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
            ids = torch.randint(0, hf.vocab_size, (batch, seq), device=args.device)

            def step():
                if autocast_dtype is not None:
                    with torch.autocast("cuda" if cuda else "cpu", dtype=autocast_dtype):
                        loss = model(input_ids=ids, labels=ids).loss
                else:
                    loss = model(input_ids=ids, labels=ids).loss
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
                opt.zero_grad(set_to_none=True)

            step()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            seconds = wall_seconds(torch, step, 3 if args.quick else 10, cuda)
            peak_alloc = torch.cuda.max_memory_allocated() if cuda else 0
            peak_res = torch.cuda.max_memory_reserved() if cuda else 0
            sums, launched = profile_by_class(torch, step, cuda)
            short = model_id.replace("-uncased", "")
            steps.append(dict(
                id=f"p{i:04d}", device=args.device_id, model=short, phase="train", batch=batch, seq=seq,
                dtype={"amp-fp16": "fp16", "amp-bf16": "bf16"}.get(precision, precision), kernels="hf-eager",
                optimizer="adamw", measured_s=f"{seconds:.6g}", peak_allocated_bytes=peak_alloc,
                peak_reserved_bytes=peak_res, split="report", source=source,
                notes=(f"HF transformers {args.transformers}, SDPA attention, {type(model).__name__}; "
                       f"torch.optim.AdamW(foreach={foreach})"
                       + ("; torch.amp.GradScaler" if scaler is not None else "")
                       + ("; gradient checkpointing (non-reentrant)" if checkpointing else "")),
                overrides="" if not overrides or args.quick else __import__("json").dumps(overrides),
                precision=precision, recompute="full" if checkpointing else "none", context=0,
                optimizer_impl="foreach" if foreach else "for-loop", checkpointing=str(checkpointing).lower(),
                kernels_launched=launched, gemm_s=f"{sums['gemm']:.6g}", attention_s=f"{sums['attention']:.6g}",
                other_s=f"{sums['other']:.6g}", kernel_sum_s=f"{sum(sums.values()):.6g}"))
            print(steps[-1]["model"], precision, batch, seq, foreach, checkpointing, steps[-1]["measured_s"],
                  peak_alloc, launched, sums, flush=True)
            model = opt = scaler = None  # free this case's GPU memory before the next is built
        except Exception as e:  # noqa: BLE001 - reported and left out
            print(f"# left out {model_id} {precision} b{batch} s{seq}: {type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr, flush=True)
    return steps


def main() -> int:
    def own(ap):
        ap.add_argument("--device-id", default="h100_sxm", help="accel-sim's id of the GPU measured")
        ap.add_argument("--only", choices=("attention", "amp"), help="one part only")

    args = script_arguments(__doc__, "shapes", own)
    import torch
    import transformers

    args.transformers = transformers.__version__
    source = provenance(torch, args.device) + f", transformers {transformers.__version__}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "attention"):
        rows, kernels = attention_sweep(torch, args, source)
        write_rows(rows, out / "attention_sweep.csv", COLUMNS)
        write_rows(kernels, out / "attention_kernels.csv", KERNEL_COLUMNS)
    if args.only in (None, "amp"):
        write_rows(amp_steps(torch, args, source), out / "amp_steps.csv", STEP_COLUMNS)
    print(f"# wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
