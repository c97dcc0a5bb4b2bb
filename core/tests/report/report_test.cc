#include <gtest/gtest.h>

#include <limits>

#include "accelsim/advice.h"
#include "accelsim/breakdown.h"
#include "accelsim/error.h"
#include "testing/graph_builder.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

using testing::new_tensor;

TEST(BreakdownTest, LayerOfCutsAfterTheFirstIndex) {
  EXPECT_EQ(layer_of("model.layers.3.mlp.up_proj"), "model.layers.3");
  EXPECT_EQ(layer_of("h.11.attn"), "h.11");
  EXPECT_EQ(layer_of("lm_head"), "lm_head");
  EXPECT_EQ(layer_of("0"), "0");
}

// Eager attention in a layer: scores = bmm(q, k^T); scaled; softmax; bmm with v. With
// `causal_masks`, both GEMMs are marked as an eager core under a causal mask.
Graph eager_attention_graph(bool causal_masks = false) {
  Graph g;
  TensorId q = new_tensor(g, {8, 256, 64}, DType::fp32, StorageKind::input);
  TensorId kt = new_tensor(g, {8, 64, 256}, DType::fp32, StorageKind::input);
  TensorId v = new_tensor(g, {8, 256, 64}, DType::fp32, StorageKind::input);
  TensorId s = new_tensor(g, {8, 256, 256});
  TensorId s2 = new_tensor(g, {8, 256, 256});
  TensorId p = new_tensor(g, {8, 256, 256});
  TensorId o = new_tensor(g, {8, 256, 64});
  auto node = [&](std::string op, std::vector<TensorId> in, std::vector<TensorId> out,
                  std::string module, std::vector<Attr> attrs = {}) {
    g.add_node(Node{.op = op, .inputs = in, .outputs = out, .attrs = std::move(attrs),
                    .module_path = module, .module_type = "Attention"});
  };
  auto mask = [&](const char* gemm) {
    return causal_masks ? std::vector<Attr>{{"attention_gemm", std::string(gemm)}, {"mask_is_causal", true}}
                        : std::vector<Attr>{};
  };
  node("bmm", {q, kt}, {s}, "blocks.0.attn", mask("qk"));
  node("mul", {s}, {s2}, "blocks.0.attn");
  node("_softmax", {s2}, {p}, "blocks.0.attn");
  node("bmm", {p, v}, {o}, "blocks.1.attn", mask("pv"));
  return g;
}

TEST(BreakdownTest, GroupsSumTheirOpsAndSortByTime) {
  const Graph g = eager_attention_graph();
  const SimulationResult r = simulate(g, testing::round_device(), {});
  const std::vector<Group> by_op = group_ops(g, r, GroupBy::op);
  ASSERT_EQ(by_op.size(), 3u);
  // Two bmm of 2*8*256*64*256 = 67.1 MFLOP each at 1 TFLOP/s (fp32, no TF32) lead.
  EXPECT_EQ(by_op[0].name, "bmm");
  EXPECT_EQ(by_op[0].count, 2);
  EXPECT_NEAR(by_op[0].time_s, r.ops[0].cost.time_s + r.ops[3].cost.time_s, 1e-15);
  double total = 0;
  for (const Group& grp : by_op) total += grp.fraction;
  EXPECT_NEAR(total, 1.0, 1e-12);
  const std::vector<Group> by_layer = group_ops(g, r, GroupBy::layer);
  ASSERT_EQ(by_layer.size(), 2u);
  EXPECT_EQ(by_layer[0].name, "blocks.0");
  EXPECT_EQ(by_layer[0].count, 3);
}

TEST(AdviceTest, FlagsEagerAttentionAndFp32Matmuls) {
  const Graph g = eager_attention_graph();
  const DeviceSpec d = testing::round_device();
  const SimulationResult r = simulate(g, d, {});
  bool flash = false, low_precision = false;
  for (const Hint& h : advise(g, r, d)) {
    if (h.kind == HintKind::use_flash_attention) {
      flash = true;
      EXPECT_DOUBLE_EQ(h.value, 1.0);
      EXPECT_EQ(h.subject, "blocks.0.attn");
    }
    if (h.kind == HintKind::low_precision_available) {
      low_precision = true;
      EXPECT_DOUBLE_EQ(h.value, 100.0);  // 100 TFLOP/s bf16 vs 1 TFLOP/s fp32
    }
  }
  EXPECT_TRUE(flash);
  EXPECT_TRUE(low_precision);
}

TEST(AdviceTest, CountsTheWorkEagerAttentionDoesOnMaskedPairs) {
  // The eager core above with causal masks on both GEMMs: of 256 x 256 pairs per head the
  // queries see 256 * 257 / 2 = 32,896; the other 32,640 cost 2 * 8 heads * 64 FLOPs each in QK^T
  // and again in P V: 2 * 2 * 8 * 32640 * 64 = 66,846,720 FLOPs, 32640 / 65536 of the attention.
  const DeviceSpec d = testing::round_device();
  auto has_masked_hint = [&](const Graph& graph) {
    for (const Hint& h : advise(graph, simulate(graph, d, {}), d)) {
      if (h.kind != HintKind::masked_attention_pairs) continue;
      EXPECT_DOUBLE_EQ(h.value, 66846720.0);
      EXPECT_DOUBLE_EQ(h.fraction, 32640.0 / 65536.0);
      EXPECT_EQ(h.subject, "blocks.0.attn");
      return true;
    }
    return false;
  };
  EXPECT_FALSE(has_masked_hint(eager_attention_graph()));
  EXPECT_TRUE(has_masked_hint(eager_attention_graph(/*causal_masks=*/true)));
}

TEST(AdviceTest, NamesTheUnitsADeviceRanAtInsteadOfTheDtypes) {
  // A chip on paper with only a bf16 matrix rate: the fp32 eager attention's two bmm run on it
  // in a narrower format, its scale and softmax (vector ops) at the same rate, exactly.
  DeviceSpec paper = testing::round_device();
  paper.fp64_flops_per_s = paper.fp32_flops_per_s = paper.tf32_matrix_flops_per_s = 0;
  paper.fp16_matrix_flops_per_s = 0;
  const Graph g = eager_attention_graph();
  const SimulationResult r = simulate(g, paper, {});
  ASSERT_EQ(r.substitutions.size(), 2u);
  EXPECT_EQ(r.substitutions[0].dtype, DType::fp32);
  EXPECT_TRUE(r.substitutions[0].matrix);
  EXPECT_EQ(r.substitutions[0].unit, "bf16_matrix");
  EXPECT_TRUE(r.substitutions[0].narrower);
  EXPECT_EQ(r.substitutions[0].ops, 2);
  EXPECT_DOUBLE_EQ(r.substitutions[0].time_s, r.ops[0].cost.time_s + r.ops[3].cost.time_s);
  EXPECT_FALSE(r.substitutions[1].matrix);
  EXPECT_EQ(r.substitutions[1].unit, "bf16_matrix");
  EXPECT_FALSE(r.substitutions[1].narrower);
  EXPECT_EQ(r.substitutions[1].ops, 2);
  EXPECT_TRUE(r.narrower_precision);
  int fallback_hints = 0;
  for (const Hint& h : advise(g, r, paper)) {
    if (h.kind != HintKind::peak_fallback) continue;
    ++fallback_hints;
    EXPECT_EQ(h.subject, "fp32 matrix, fp32 vector");
  }
  EXPECT_EQ(fallback_hints, 1);
  // The device's own units: nothing substituted, no hint.
  const SimulationResult own = simulate(g, testing::round_device(), {});
  EXPECT_TRUE(own.substitutions.empty());
  for (const Hint& h : advise(g, own, testing::round_device())) EXPECT_NE(h.kind, HintKind::peak_fallback);
}

TEST(CompareTest, DominantBoundHoldsMostOfTheTime) {
  SimulationResult r;
  r.compute_bound_time_s = 2e-3;
  r.memory_bound_time_s = 1e-3;
  EXPECT_EQ(dominant_bound(r), Bound::compute);
  r.memory_bound_time_s = 2e-3;  // a tie goes to compute, as compare_devices has it
  EXPECT_EQ(dominant_bound(r), Bound::compute);
  r.memory_bound_time_s = 3e-3;
  EXPECT_EQ(dominant_bound(r), Bound::memory);
}

TEST(CompareTest, FastestBestValueAndOverkill) {
  // Three devices; hand-set results. a: 10 ms at $4/h; b: 12 ms at $1/h; c: 5 ms, OOM.
  std::vector<DeviceSpec> devices(3, testing::round_device());
  devices[0].id = "a";
  devices[0].price_usd_per_hour = 4.0;
  devices[1].id = "b";
  devices[1].price_usd_per_hour = 1.0;
  devices[2].id = "c";
  std::vector<SimulationResult> results(3);
  results[0].latency_s = 0.010;
  results[1].latency_s = 0.012;
  results[2].latency_s = 0.005;
  results[2].fits = false;
  const Comparison c = compare_devices(results, devices);
  EXPECT_EQ(c.fastest_index, 0);     // c is faster but does not fit
  EXPECT_EQ(c.best_value_index, 1);  // 0.012 s * $1/h < 0.010 s * $4/h
  EXPECT_NEAR(c.devices[0].cost_per_run_usd, 0.010 * 4.0 / 3600.0, 1e-15);
  EXPECT_DOUBLE_EQ(c.devices[2].speedup_vs_slowest, 0.012 / 0.005);
  EXPECT_TRUE(c.devices[0].overkill);  // b is cheaper and only 20% slower
  EXPECT_EQ(c.devices[0].overkill_reason, "b");
  EXPECT_FALSE(c.devices[1].overkill);
  EXPECT_TRUE(c.devices[0].ranked && c.devices[1].ranked);
  EXPECT_FALSE(c.devices[2].ranked);  // out of memory
  EXPECT_THROW(compare_devices(results, {}), ConfigError);
}

TEST(CompareTest, NarrowerPrecisionIsNotRanked) {
  // a: 10 ms at $4/h in the graph's precision; t: 2 ms at $1/h, but its matmuls ran in a
  // narrower format (fp32 on bf16 units): it is neither fastest, best value, nor the cheaper
  // device that would make a overkill.
  std::vector<DeviceSpec> devices(2, testing::round_device());
  devices[0].id = "a";
  devices[0].price_usd_per_hour = 4.0;
  devices[1].id = "t";
  devices[1].price_usd_per_hour = 1.0;
  std::vector<SimulationResult> results(2);
  results[0].latency_s = 0.010;
  results[1].latency_s = 0.002;
  results[1].narrower_precision = true;
  const Comparison c = compare_devices(results, devices);
  EXPECT_EQ(c.fastest_index, 0);
  EXPECT_EQ(c.best_value_index, 0);
  EXPECT_FALSE(c.devices[0].overkill);
  EXPECT_TRUE(c.devices[1].narrower_precision);
  EXPECT_TRUE(c.devices[0].ranked);
  EXPECT_FALSE(c.devices[1].ranked);
  EXPECT_DOUBLE_EQ(c.devices[1].speedup_vs_slowest, 5.0);  // still shown, not ranked
}

}  // namespace
}  // namespace accelsim

#include "accelsim/regression.h"

namespace accelsim {
namespace {

TEST(RegressionTest, GrowthBeyondTheAllowedFractionIsExceeded) {
  // 10 ms -> 10.6 ms is +6%: over a 5% budget, within a 10% one.
  const MetricCheck c = check_metric("latency_s", 0.010, 0.0106, 0.05);
  EXPECT_NEAR(c.change_fraction, 0.06, 1e-12);
  EXPECT_TRUE(c.exceeded);
  EXPECT_FALSE(check_metric("latency_s", 0.010, 0.0106, 0.10).exceeded);
  EXPECT_FALSE(check_metric("peak_memory_bytes", 100, 80, 0.0).exceeded);  // shrinking is fine
  EXPECT_TRUE(check_metric("peak_memory_bytes", 0, 1, 0.5).exceeded);
  EXPECT_THROW(check_metric("x", -1, 1, 0.1), ConfigError);
  // NaN or infinity anywhere would read as "not exceeded" and pass: refused instead.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(check_metric("x", nan, 1, 0.1), ConfigError);
  EXPECT_THROW(check_metric("x", inf, 1, 0.1), ConfigError);
  EXPECT_THROW(check_metric("x", 1, nan, 0.1), ConfigError);
  EXPECT_THROW(check_metric("x", 1, inf, 0.1), ConfigError);
  EXPECT_THROW(check_metric("x", 1, 2, nan), ConfigError);
  EXPECT_THROW(check_metric("x", 1, 2, inf), ConfigError);
}

}  // namespace
}  // namespace accelsim
