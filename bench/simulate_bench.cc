// Times simulate() on a synthetic Llama-3-8B-shaped forward graph (32 layers, batch 1,
// seq 2048, bf16) built in code, so the C++ core's speed is measured without Python.
// Usage: simulate_bench [repetitions]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accelsim/simulate.h"

using namespace accelsim;

namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

TensorId tensor(Graph& g, std::vector<int64_t> shape, StorageKind kind = StorageKind::activation) {
  TensorMeta t{.shape = shape, .strides = strides_of(shape), .dtype = DType::bf16};
  t.storage = g.add_storage({.size_bytes = t.logical_bytes(), .kind = kind});
  return g.add_tensor(t);
}

void op(Graph& g, const char* name, std::vector<TensorId> in, std::vector<TensorId> out,
        const std::string& module) {
  g.add_node(Node{.op = name, .inputs = in, .outputs = out, .module_path = module});
}

// Roughly the op mix of a captured HF Llama layer (~40 kernels and views per layer).
Graph llama_like(int layers, int64_t tokens, int64_t hidden, int64_t ffn, int64_t heads,
                 int64_t kv_heads) {
  Graph g;
  const int64_t hd = hidden / heads;
  TensorId x = tensor(g, {tokens, hidden}, StorageKind::input);
  for (int l = 0; l < layers; ++l) {
    const std::string m = "model.layers." + std::to_string(l);
    TensorId wq = tensor(g, {hidden, hidden}, StorageKind::parameter);
    TensorId wk = tensor(g, {hidden, kv_heads * hd}, StorageKind::parameter);
    TensorId wv = tensor(g, {hidden, kv_heads * hd}, StorageKind::parameter);
    TensorId wo = tensor(g, {hidden, hidden}, StorageKind::parameter);
    TensorId wg = tensor(g, {hidden, ffn}, StorageKind::parameter);
    TensorId wu = tensor(g, {hidden, ffn}, StorageKind::parameter);
    TensorId wd = tensor(g, {ffn, hidden}, StorageKind::parameter);
    for (int i = 0; i < 6; ++i) {  // RMSNorm written out: pow, mean, add, rsqrt, mul, mul
      TensorId y = tensor(g, {tokens, hidden});
      op(g, "mul", {x}, {y}, m + ".input_layernorm");
      x = y;
    }
    TensorId q = tensor(g, {tokens, hidden});
    TensorId k = tensor(g, {tokens, kv_heads * hd});
    TensorId v = tensor(g, {tokens, kv_heads * hd});
    op(g, "mm", {x, wq}, {q}, m + ".self_attn.q_proj");
    op(g, "mm", {x, wk}, {k}, m + ".self_attn.k_proj");
    op(g, "mm", {x, wv}, {v}, m + ".self_attn.v_proj");
    for (int i = 0; i < 12; ++i) {  // RoPE: slices, neg, cat, mul, add on q and k
      TensorId y = tensor(g, {tokens, hidden});
      op(g, i % 3 == 0 ? "view" : "mul", {q}, {y}, m + ".self_attn");
      q = y;
    }
    TensorId a = tensor(g, {1, heads, tokens, hd});
    TensorMeta qm = g.tensor(q);
    qm.shape = {1, heads, tokens, hd};
    qm.strides = strides_of(qm.shape);
    TensorId q4 = g.add_tensor(qm);
    TensorMeta km = g.tensor(k);
    km.shape = {1, kv_heads, tokens, hd};
    km.strides = strides_of(km.shape);
    TensorId k4 = g.add_tensor(km);
    TensorMeta vm = g.tensor(v);
    vm.shape = {1, kv_heads, tokens, hd};
    vm.strides = strides_of(vm.shape);
    TensorId v4 = g.add_tensor(vm);
    g.add_node(Node{.op = "accel_sim::attention", .inputs = {q4, k4, v4}, .outputs = {a},
                    .attrs = {{"is_causal", true}}, .module_path = m + ".self_attn"});
    TensorMeta am = g.tensor(a);
    am.shape = {tokens, hidden};
    am.strides = strides_of(am.shape);
    TensorId a2 = g.add_tensor(am);
    op(g, "view", {a}, {a2}, m + ".self_attn");
    TensorId o = tensor(g, {tokens, hidden});
    op(g, "mm", {a2, wo}, {o}, m + ".self_attn.o_proj");
    TensorId r = tensor(g, {tokens, hidden});
    op(g, "add", {o, x}, {r}, m);
    for (int i = 0; i < 6; ++i) {
      TensorId y = tensor(g, {tokens, hidden});
      op(g, "mul", {r}, {y}, m + ".post_attention_layernorm");
      r = y;
    }
    TensorId gt = tensor(g, {tokens, ffn});
    TensorId up = tensor(g, {tokens, ffn});
    TensorId act = tensor(g, {tokens, ffn});
    TensorId prod = tensor(g, {tokens, ffn});
    TensorId down = tensor(g, {tokens, hidden});
    op(g, "mm", {r, wg}, {gt}, m + ".mlp.gate_proj");
    op(g, "mm", {r, wu}, {up}, m + ".mlp.up_proj");
    op(g, "silu", {gt}, {act}, m + ".mlp.act_fn");
    op(g, "mul", {act, up}, {prod}, m + ".mlp");
    op(g, "mm", {prod, wd}, {down}, m + ".mlp.down_proj");
    TensorId next = tensor(g, {tokens, hidden});
    op(g, "add", {down, r}, {next}, m);
    x = next;
  }
  g.add_output(x);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  const Graph g = llama_like(32, 2048, 4096, 14336, 32, 8);
  DeviceSpec h100{.id = "h100-like", .memory_bytes = 80.0 * (1 << 30),
                  .memory_bandwidth_bytes_per_s = 3.35e12, .fp32_flops_per_s = 66.9e12,
                  .bf16_matrix_flops_per_s = 989.4e12, .kernel_launch_overhead_s = 4e-6};
  double best_s = 1e30;
  double latency = 0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const SimulationResult r = simulate(g, h100, {});
    const auto t1 = std::chrono::steady_clock::now();
    latency = r.latency_s;
    best_s = std::min(best_s, std::chrono::duration<double>(t1 - t0).count());
  }
  std::printf("nodes=%zu simulate_best_ms=%.3f per_op_ns=%.1f (simulated latency %.3f ms)\n",
              g.nodes().size(), best_s * 1e3, best_s * 1e9 / g.nodes().size(), latency * 1e3);
  return 0;
}
