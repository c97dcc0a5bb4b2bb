"""The host's cost per CUDA kernel of PyTorch programs written the way the stacks write them:
HF transformers' modules, and plain PyTorch modules as torchtitan writes its Llama (nn.Linear,
F.rms_norm, F.scaled_dot_product_attention, complex-number RoPE). Each step is small enough for
the host to be the bottleneck, so wall time / kernels launched is the host's cost per kernel.
The forward (Python module code) and the backward (autograd's C++ engine) are timed apart.

    python validation/gpu/measure_host.py --out DIR [--device cpu --quick]

writes DIR/host_stacks.csv, each row with the GPU, host CPU, driver, torch and CUDA versions and the
date. The models are built from the shipped Llama-3-8B config with random weights.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import compute_dtype, provenance, script_arguments, wall_seconds, write_rows  # noqa: E402
from accel_sim.io.model_config import load_model_config  # noqa: E402

COLUMNS = ["framework", "phase", "layers", "batch", "seq", "kernels", "wall_s", "kernel_sum_s",
           "seconds_per_kernel", "repeat", "source"]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def plain_llama(torch, config: dict, layers: int):
    """A Llama decoder written as torchtitan writes it (torchtitan/models/llama3/model.py)."""
    nn, F = torch.nn, torch.nn.functional
    dim, heads, kv = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    hd, ffn, vocab = dim // heads, config["intermediate_size"], config["vocab_size"]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk = nn.Linear(dim, heads * hd, bias=False), nn.Linear(dim, kv * hd, bias=False)
            self.wv, self.wo = nn.Linear(dim, kv * hd, bias=False), nn.Linear(heads * hd, dim, bias=False)

        def forward(self, x, freqs):
            b, s, _ = x.shape
            q = self.wq(x).view(b, s, heads, hd)
            k = self.wk(x).view(b, s, kv, hd)
            v = self.wv(x).view(b, s, kv, hd)
            q_ = torch.view_as_complex(q.float().reshape(b, s, heads, hd // 2, 2))
            k_ = torch.view_as_complex(k.float().reshape(b, s, kv, hd // 2, 2))
            q = torch.view_as_real(q_ * freqs).flatten(3).type_as(x)
            k = torch.view_as_real(k_ * freqs).flatten(3).type_as(x)
            k = k.repeat_interleave(heads // kv, dim=2)
            v = v.repeat_interleave(heads // kv, dim=2)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            return self.wo(out.transpose(1, 2).reshape(b, s, -1))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.attention_norm, self.ffn_norm = Attention(), nn.RMSNorm(dim), nn.RMSNorm(dim)
            self.w1, self.w2 = nn.Linear(dim, ffn, bias=False), nn.Linear(ffn, dim, bias=False)
            self.w3 = nn.Linear(dim, ffn, bias=False)

        def forward(self, x, freqs):
            h = x + self.attention(self.attention_norm(x), freqs)
            y = self.ffn_norm(h)
            return h + self.w2(F.silu(self.w1(y)) * self.w3(y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList(Block() for _ in range(layers))
            self.norm, self.output = nn.RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

        def forward(self, ids):
            s = ids.shape[1]
            t = torch.arange(s, device=ids.device, dtype=torch.float32)
            inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=ids.device, dtype=torch.float32) / hd))
            freqs = torch.polar(torch.ones(s, hd // 2, device=ids.device), torch.outer(t, inv)).view(1, s, 1, hd // 2)
            h = self.tok_embeddings(ids)
            for layer in self.layers:
                h = layer(h, freqs)
            return self.output(self.norm(h))

    return Model()


def main() -> int:
    args = script_arguments(__doc__, "models")
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile

    cuda, dtype = compute_dtype(torch, args.device)
    source = (provenance(torch, args.device) + f", transformers {transformers.__version__}, host CPU {cpu_name()} "
              f"({__import__('os').cpu_count()} threads)")
    config, _ = load_model_config("llama-3-8b")
    if args.quick:
        config = {**config, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 256, "head_dim": 16}
    layers = 2 if args.quick else 8
    rows = []

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def measure(framework, phase, model, ids, repeat):
        if phase == "forward":
            model.eval()

            def step():
                with torch.no_grad():
                    model(ids)
        else:
            model.train()

            def step():
                out = model(ids)
                logits = out.logits if hasattr(out, "logits") else out
                logits.float().sum().backward()
                for p in model.parameters():
                    p.grad = None
        wall = wall_seconds(torch, step, 5 if args.quick else 20, cuda)
        with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
            step()
            sync()
        kernels = [e for e in prof.events() if cuda and e.device_type == torch.autograd.DeviceType.CUDA]
        n = len(kernels) if cuda else 1
        kernel_sum = sum(e.time_range.elapsed_us() for e in kernels) * 1e-6
        rows.append(dict(framework=framework, phase=phase, layers=layers, batch=ids.shape[0], seq=ids.shape[1],
                         kernels=n, wall_s=f"{wall:.6g}", kernel_sum_s=f"{kernel_sum:.6g}",
                         seconds_per_kernel=f"{wall / n:.6g}", repeat=repeat, source=source))
        print(rows[-1]["framework"], phase, n, rows[-1]["wall_s"], rows[-1]["seconds_per_kernel"], flush=True)

    hf_config = transformers.LlamaConfig(**{k: v for k, v in config.items() if k in (
        "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
        "rms_norm_eps", "rope_theta", "max_position_embeddings")}, num_hidden_layers=layers)
    hf_config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    with torch.device(args.device):
        models = {"hf-transformers": transformers.LlamaForCausalLM(hf_config),
                  "plain-pytorch (torchtitan-style)": plain_llama(torch, config, layers)}
    torch.set_default_dtype(previous)
    ids = torch.randint(0, config["vocab_size"], (1, 16), device=args.device)
    for repeat in range(1, 4):
        for name, model in models.items():
            for phase in ("forward", "forward+backward"):
                try:
                    measure(name, phase, model, ids, repeat)
                except Exception as e:  # noqa: BLE001 - reported and left out
                    print(f"# left out {name} {phase}: {type(e).__name__}: {e}", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(rows, out / "host_stacks.csv", COLUMNS)
    print(f"# wrote {len(rows)} rows to {out / 'host_stacks.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
