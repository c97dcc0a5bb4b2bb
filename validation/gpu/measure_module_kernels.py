"""The CUDA kernels behind an op as the PyTorch code people train with runs it, on a local GPU.

    python validation/gpu/measure_module_kernels.py --out DIR [--quick --device cpu]

writes DIR/module_kernels.csv: for each case, forward and backward, every CUDA kernel one call
launches (torch.profiler), in launch order, with its time, beside the whole call timed between
CUDA events (median of 20, L2 flushed before each, as `calibrate` times kernels). Cases:

- the reference modules of Liger-Kernel's benchmarks (HF transformers' LlamaRMSNorm and
  apply_rotary_pos_emb, torch.nn.LayerNorm and GroupNorm, a residual add then LlamaRMSNorm),
  at one size each: the chains the package's kernels.csv holds measured as wholes;
- scaled_dot_product_attention's backward with q, k and v laid out as an HF attention module
  makes them (views of [batch, seq, heads, dim] projections) and the gradient arriving through
  the output's transpose, beside contiguous [batch, heads, seq, dim] inputs as `calibrate`
  times them: which copies each layout adds around the backward kernel.

Every row names the GPU, its power limit and clocks, the driver, torch, CUDA and transformers
versions and the date.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import _timer, compute_dtype, provenance, script_arguments, write_rows  # noqa: E402

COLUMNS = ["case", "direction", "shape", "call_s", "index", "kernel", "kernel_s", "source"]


def main() -> int:
    args = script_arguments(__doc__, "shapes")
    import torch
    import torch.nn.functional as F
    import transformers
    from torch.profiler import ProfilerActivity, profile
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

    dev = args.device
    cuda, dtype = compute_dtype(torch, dev)
    source = provenance(torch, dev) + f", transformers {transformers.__version__}"
    timed = _timer(torch, dev, repeats=3 if args.quick else 20, flush_l2=True)
    rows = []

    def record(case, shape, forward, backward_of=None):
        """forward(): the op; backward_of(out) -> a callable running its backward once."""
        calls = [("forward", forward)]
        if backward_of is not None:
            calls.append(("backward", backward_of(forward())))
        for direction, fn in calls:
            seconds = timed(fn)
            with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
                fn()
                if cuda:
                    torch.cuda.synchronize()
            kernels = [e for e in prof.events() if not cuda or e.device_type == torch.autograd.DeviceType.CUDA]
            kernels.sort(key=lambda e: e.time_range.start)
            for i, e in enumerate(kernels):
                rows.append(dict(case=case, direction=direction, shape=shape, call_s=f"{seconds:.6g}", index=i,
                                 kernel=e.name[:160], kernel_s=f"{e.time_range.elapsed_us() * 1e-6:.6g}",
                                 source=source))
            print(case, direction, shape, f"{seconds * 1e6:.1f} us", len(kernels), "kernels", flush=True)

    def grads_of(inputs):
        def backward_of(out):
            g = torch.randn_like(out)
            return lambda: torch.autograd.grad(out, inputs, g, retain_graph=True)
        return backward_of

    tokens, hidden = (64, 256) if args.quick else (4096, 4096)
    x = torch.randn(tokens, hidden, device=dev, dtype=dtype, requires_grad=True)
    r = torch.randn_like(x, requires_grad=True)
    norm = LlamaRMSNorm(hidden).to(dev, dtype)
    shape = f"{tokens}x{hidden}"
    record("hf LlamaRMSNorm", shape, lambda: norm(x), grads_of((x, norm.weight)))
    record("hf add + LlamaRMSNorm", shape, lambda: norm(x + r), grads_of((x, r, norm.weight)))
    ln = torch.nn.LayerNorm(hidden).to(dev, dtype)
    record("torch nn.LayerNorm", shape, lambda: ln(x), grads_of((x, ln.weight, ln.bias)))
    record("torch F.rms_norm", shape, lambda: F.rms_norm(x, (hidden,), norm.weight), grads_of((x, norm.weight)))
    gn = torch.nn.GroupNorm(32 if not args.quick else 4, 256 if not args.quick else 16).to(dev, dtype)
    img = torch.randn(*((4, 16, 32, 32) if args.quick else (64, 256, 64, 64)), device=dev, dtype=dtype,
                      requires_grad=True)
    record("torch nn.GroupNorm", "x".join(map(str, img.shape)), lambda: gn(img), grads_of((img, gn.weight, gn.bias)))
    up = torch.randn(tokens, 2 * hidden, device=dev, dtype=dtype, requires_grad=True)
    record("torch silu(a) * b", f"{tokens}x{hidden}", lambda: F.silu(up[:, :hidden]) * up[:, hidden:], grads_of((up,)))

    b, h, kvh, s, d = (1, 4, 2, 32, 16) if args.quick else (1, 32, 8, 4096, 128)
    q = torch.randn(b, s, h, d, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(b, s, kvh, d, device=dev, dtype=dtype, requires_grad=True)
    cos = torch.randn(b, s, d, device=dev, dtype=dtype)
    sin = torch.randn(b, s, d, device=dev, dtype=dtype)

    def rope():
        return torch.cat([t.flatten() for t in apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)])

    record("hf apply_rotary_pos_emb", f"b{b} h{h}/{kvh} s{s} d{d}", rope, grads_of((q, k)))

    # SDPA backward: calibrate's layout against an HF attention module's.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [("flash2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)] if cuda else [
        ("math", SDPBackend.MATH)]
    for bb, ss in (((2, 32),) if args.quick else ((256, 128), (16, 512))):
        hh, dd = (4, 16) if args.quick else (32, 128)
        for impl, backend in backends:
            with sdpa_kernel([backend]):
                qc = torch.randn(bb, hh, ss, dd, device=dev, dtype=dtype, requires_grad=True)
                kc, vc = torch.randn_like(qc, requires_grad=True), torch.randn_like(qc, requires_grad=True)
                record(f"sdpa {impl} contiguous [b,h,s,d]", f"b{bb} h{hh} s{ss} d{dd}",
                       lambda: F.scaled_dot_product_attention(qc, kc, vc), grads_of((qc, kc, vc)))
                qkv = torch.randn(bb, ss, 3 * hh * dd, device=dev, dtype=dtype, requires_grad=True)

                def hf_layout():
                    qh, kh, vh = (t.view(bb, ss, hh, dd).transpose(1, 2) for t in qkv.split(hh * dd, dim=-1))
                    return F.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2).reshape(bb, ss, hh * dd)

                record(f"sdpa {impl} HF layout", f"b{bb} h{hh} s{ss} d{dd}", hf_layout, grads_of((qkv,)))
    out = Path(args.out)
    write_rows(rows, out / "module_kernels.csv", COLUMNS)
    print(f"# wrote {len(rows)} kernel rows to {out / 'module_kernels.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
