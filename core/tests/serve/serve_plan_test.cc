// The serving planner: the Pareto front, quantized models and fp8 support worked out by hand; a
// small search's verdicts, units and ranking checked against what they must be.
#include <gtest/gtest.h>

#include <cmath>

#include "accelsim/error.h"
#include "accelsim/serve_plan.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

TEST(ParetoFront, KeepsThePointsNoOtherBeatsInBoth) {
  // (2, 8) loses to (3, 9) in both; (0.5, 5) to (1, 10); the second (3, 9) repeats the first.
  const std::vector<std::pair<double, double>> points = {{1, 10}, {2, 8}, {3, 9}, {4, 1}, {3, 9}, {0.5, 5}};
  EXPECT_EQ(pareto_front(points), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_TRUE(pareto_front({}).empty());
  EXPECT_EQ(pareto_front({{1, 1}}), (std::vector<int64_t>{0}));
}

TEST(ServeQuantization, Fp8HalvesTheKvCacheAndInt4GroupsItsWeights) {
  const ModelSpec m = testing::llama3_8b();
  // K and V of 1,000 tokens: 2 x 32 layers x 8 KV heads x 128 x 1,000 tokens, 2 bytes in bf16.
  EXPECT_EQ(kv_cache_bytes(m, 1, 1000), 2LL * 32 * 8 * 128 * 1000 * 2);
  const ModelSpec f = quantized_model(m, ServeQuantization::fp8);
  EXPECT_EQ(f.weight_dtype, m.weight_dtype);  // the blocks' fp8 weights are the fp8 GEMMs' (BuildOptions)
  EXPECT_EQ(kv_cache_bytes(f, 1, 1000), 2LL * 32 * 8 * 128 * 1000);
  const ModelSpec i = quantized_model(m, ServeQuantization::int4);
  EXPECT_EQ(i.int4_group_size, 128);
  EXPECT_EQ(i.kv_cache_dtype, m.kv_cache_dtype);
  EXPECT_EQ(parse_quantization("fp8"), ServeQuantization::fp8);
  EXPECT_THROW(parse_quantization("fp7"), ConfigError);
}

TEST(ServeQuantization, Fp8NeedsAnFp8TensorRate) {
  DeviceSpec d = testing::round_device();
  EXPECT_FALSE(quantization_unsupported(d, ServeQuantization::fp8).empty());
  EXPECT_TRUE(quantization_unsupported(d, ServeQuantization::bf16).empty());
  d.fp8_matrix_flops_per_s = 200e12;
  EXPECT_TRUE(quantization_unsupported(d, ServeQuantization::fp8).empty());
}

TEST(ServeQuantization, Fp4NeedsFp4UnitsAndNvfp4AnNvidiaPart) {
  DeviceSpec d = testing::round_device();
  EXPECT_FALSE(quantization_unsupported(d, ServeQuantization::mxfp4).empty());
  d.fp4_matrix_flops_per_s = 400e12;
  d.vendor = "AMD";  // MX block scales only
  EXPECT_TRUE(quantization_unsupported(d, ServeQuantization::mxfp4).empty());
  EXPECT_FALSE(quantization_unsupported(d, ServeQuantization::nvfp4).empty());
  d.vendor = "NVIDIA";
  EXPECT_TRUE(quantization_unsupported(d, ServeQuantization::nvfp4).empty());
  // NVFP4 keeps the KV cache in fp8: half the bf16 cache of 1,000 tokens.
  const ModelSpec m = quantized_model(testing::llama3_8b(), ServeQuantization::nvfp4);
  EXPECT_EQ(m.fp4_weights, Fp4Format::nvfp4);
  EXPECT_EQ(kv_cache_bytes(m, 1, 1000), 2LL * 32 * 8 * 128 * 1000);
}

// Llama-3-8B (16.1 GB of bf16 weights) on round-number devices of 12 GB: one GPU cannot hold it,
// two can.
ServePlanRequest small_request() {
  ServePlanRequest q;
  q.model = testing::llama3_8b();
  ServePlanEngine e;
  e.label = "round";
  e.device = testing::round_device();
  e.device.memory_bytes = 12e9;
  e.replica.system = testing::round_system();
  e.replica.simulate.cost.cuda_graphs = true;
  e.scheduler.kind = SchedulerKind::sarathi;
  q.engines = {e};
  q.space.tp = {1, 2, 4};
  q.space.pp = {1};
  q.space.quantizations = {ServeQuantization::bf16, ServeQuantization::fp8};
  q.space.max_seqs = {16, 64};
  q.space.token_budgets = {2048};
  q.space.disaggregated = {{1, 1}};
  q.space.max_gpus = 16;
  q.workload.requests = 200;
  q.workload.input.value = 1000;
  q.workload.output.value = 100;
  q.target_qps = 4.0;
  q.slo_ttft_s = 2.0;
  q.slo_tpot_s = 0.2;
  q.threads = 2;
  return q;
}

TEST(PlanServing, VerdictsUnitsAndRanking) {
  const ServePlanRequest q = small_request();
  const ServePlanResult r = plan_serving(q);
  // 2 quantizations x 3 TP x (aggregated + 1:1) x 2 max_seqs x 1 budget.
  ASSERT_EQ(r.layouts.size(), 24u);
  EXPECT_DOUBLE_EQ(r.mean_input_tokens, 1000.0);
  EXPECT_DOUBLE_EQ(r.mean_output_tokens, 100.0);
  ASSERT_GT(r.ranked, 0);
  EXPECT_EQ(r.layouts[0].verdict, LayoutVerdict::best);
  int unsupported = 0, no_fit = 0;
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    const ServeLayoutResult& l = r.layouts[i];
    if (l.layout.quantization == ServeQuantization::fp8) {
      // The round device has no fp8 rate.
      EXPECT_EQ(l.verdict, LayoutVerdict::unsupported);
      ++unsupported;
      continue;
    }
    if (l.layout.tp == 1) {
      // 16.1 GB of weights in 12 x 0.9 - 0.54 = 10.26 GB.
      EXPECT_EQ(l.verdict, LayoutVerdict::does_not_fit) << l.reason;
      ++no_fit;
      continue;
    }
    if (static_cast<int64_t>(i) < r.ranked) {
      // Units enough for the target at the unit's own rate, and the GPUs they take.
      EXPECT_EQ(l.units, static_cast<int64_t>(std::ceil(q.target_qps / l.qps_per_unit - 1e-9)));
      EXPECT_EQ(l.gpus, l.units * l.layout.unit_gpus());
      EXPECT_LE(l.gpus, q.space.max_gpus);
      EXPECT_DOUBLE_EQ(l.usd_per_hour, static_cast<double>(l.gpus) * 2.0);
      if (i > 0) {
        EXPECT_GE(l.gpus, r.layouts[i - 1].gpus);  // fewest GPUs first
      }
      EXPECT_LE(l.ttft_floor_s, q.slo_ttft_s);
      EXPECT_LE(l.tpot_floor_s, q.slo_tpot_s);
    }
  }
  EXPECT_EQ(unsupported, 12);
  EXPECT_EQ(no_fit, 4);
  // The best layouts, simulated whole at the target rate.
  EXPECT_TRUE(r.layouts[0].verified);
  EXPECT_GT(r.layouts[0].slo_attainment, 0.9);
  for (int64_t i : r.pareto) EXPECT_LT(i, r.ranked);
}

TEST(PlanServing, TheAnswerDoesNotDependOnTheThreads) {
  ServePlanRequest q = small_request();
  q.threads = 1;
  const ServePlanResult one = plan_serving(q);
  q.threads = 3;
  const ServePlanResult three = plan_serving(q);
  ASSERT_EQ(one.layouts.size(), three.layouts.size());
  for (size_t i = 0; i < one.layouts.size(); ++i) {
    EXPECT_EQ(one.layouts[i].layout.tp, three.layouts[i].layout.tp);
    EXPECT_EQ(one.layouts[i].layout.max_seqs, three.layouts[i].layout.max_seqs);
    EXPECT_EQ(one.layouts[i].verdict, three.layouts[i].verdict);
    EXPECT_DOUBLE_EQ(one.layouts[i].qps_per_unit, three.layouts[i].qps_per_unit);
  }
}

TEST(PlanServing, ATpotTargetBelowOneDecodeStepMissesEverywhere) {
  ServePlanRequest q = small_request();
  q.space.quantizations = {ServeQuantization::bf16};
  q.space.tp = {2};
  // A decode step reads the rank's half of the 32 layers (32 x 218.1M parameters) and of the LM head
  // (128,256 x 4,096 = 525.3M), 2 bytes each: 7.50 GB at 1 TB/s, 7.5 ms at least.
  q.slo_tpot_s = 1e-3;
  const ServePlanResult r = plan_serving(q);
  EXPECT_EQ(r.ranked, 0);
  for (const ServeLayoutResult& l : r.layouts) {
    EXPECT_EQ(l.verdict, LayoutVerdict::misses_tpot);
    EXPECT_GT(l.tpot_floor_s, 7.5e-3);
  }
}

TEST(PlanServing, AUnitOverTheBudgetIsNotSimulated) {
  ServePlanRequest q = small_request();
  q.space.quantizations = {ServeQuantization::bf16};
  q.space.tp = {4};
  q.space.max_gpus = 6;  // a 1:1 unit of TP 4 takes 8
  const ServePlanResult r = plan_serving(q);
  for (const ServeLayoutResult& l : r.layouts) {
    if (l.layout.disaggregated()) {
      EXPECT_EQ(l.verdict, LayoutVerdict::over_budget);
      EXPECT_FALSE(l.simulated);
    }
  }
}

TEST(PlanServing, RefusesWhatItCannotAnswer) {
  ServePlanRequest q = small_request();
  q.slo_ttft_s = q.slo_tpot_s = 0;
  EXPECT_THROW(plan_serving(q), ConfigError);
  q = small_request();
  q.objective = ServeObjective::throughput;  // with a target rate
  EXPECT_THROW(plan_serving(q), ConfigError);
  q = small_request();
  q.engines[0].device.price_usd_per_hour = 0;
  q.objective = ServeObjective::cost;
  EXPECT_THROW(plan_serving(q), ConfigError);
  q = small_request();
  q.space.tp.clear();
  EXPECT_THROW(plan_serving(q), ConfigError);
  q = small_request();
  q.engines.clear();
  EXPECT_THROW(plan_serving(q), ConfigError);
}

}  // namespace
}  // namespace accelsim
