// Every figure the core returns is finite: validation refuses inputs that are not finite or make
// no physical sense, naming the field, and the entry points refuse a result with an infinite,
// NaN or negative figure (an input out of physical range that validation let through) instead of
// returning `latency inf s`.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/collective.h"
#include "accelsim/error.h"
#include "accelsim/kernel_query.h"
#include "accelsim/physical_range.h"
#include "accelsim/pipeline.h"
#include "accelsim/serve.h"
#include "accelsim/simulate.h"
#include "accelsim/plan.h"
#include "accelsim/training.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

// The message of the ConfigError `f` throws, or "(no error)".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PhysicalRangeTest, DeviceValidationRejectsNonFiniteAndUnphysicalNumbersNamingTheField) {
  const DeviceSpec d = testing::round_device();
  auto rejects = [&](auto set, const std::string& expected) {
    DeviceSpec bad = d;
    set(bad);
    EXPECT_EQ(error_of([&] { bad.validate(); }), expected);
  };
  rejects([](DeviceSpec& x) { x.kernel.kernel_floor_s = kInf; },
          "device 'round': kernel.kernel_floor_s must be finite (got inf)");
  rejects([](DeviceSpec& x) { x.memory_bandwidth_bytes_per_s = kInf; },
          "device 'round': memory bandwidth must be finite (got inf)");
  rejects([](DeviceSpec& x) { x.bf16_matrix_flops_per_s = kNaN; },
          "device 'round': peak rate bf16 must be finite (got nan)");
  rejects([](DeviceSpec& x) { x.kernel_launch_overhead_s = kInf; },
          "device 'round': launch overhead must be finite (got inf)");
  rejects([](DeviceSpec& x) { x.runtime_reserved_bytes = -1; },
          "device 'round': runtime_reserved_bytes must not be negative (got -1)");
  rejects([](DeviceSpec& x) { x.tdp_w = kNaN; }, "device 'round': tdp_w must be finite (got nan)");
  rejects([](DeviceSpec& x) { x.clock_hz = -1e9; }, "device 'round': clock_hz must not be negative (got -1e+09)");
  rejects([](DeviceSpec& x) { x.kernel.matmul_efficiency = 1.5; },
          "device 'round': kernel.matmul_efficiency must be in (0, 1] (got 1.5)");
  rejects([](DeviceSpec& x) { x.kernel.memory_efficiency = 0; },
          "device 'round': kernel.memory_efficiency must be in (0, 1] (got 0)");
  rejects([](DeviceSpec& x) { x.kernel.fp8_matmul_efficiency = -0.5; },
          "device 'round': kernel.fp8_matmul_efficiency must be in [0, 1] (got -0.5)");
  rejects([](DeviceSpec& x) { x.kernel.stream_floor_s = -1e-6; },
          "device 'round': kernel.stream_floor_s must not be negative (got -1e-06)");
  // An infinite kernel floor used to reach the simulation and come out as an infinite latency.
  DeviceSpec floor = d;
  floor.kernel.kernel_floor_s = kInf;
  const Graph g = build_graph(testing::small_gpt(2), {.seq = 16});
  SimulateOptions kernel_model;
  kernel_model.cost_model = "kernel";
  EXPECT_THROW(simulate(g, floor, kernel_model), ConfigError);
}

TEST(PhysicalRangeTest, SystemModelAndOptionValidationRejectNonFiniteNumbers) {
  SystemSpec s = testing::round_system();
  s.scaleup.latency_s = kInf;
  EXPECT_EQ(error_of([&] { s.validate(); }), "system 'round': scaleup.latency_s must be finite (got inf)");
  s = testing::round_system();
  s.scaleout.bandwidth_bytes_per_s = kInf;
  EXPECT_EQ(error_of([&] { s.validate(); }),
            "system 'round': scaleout.bandwidth_bytes_per_s must be finite (got inf)");
  s = testing::round_system();
  s.nics_per_gpu = kNaN;
  EXPECT_EQ(error_of([&] { s.validate(); }), "system 'round': nics_per_gpu must be finite (got nan)");
  // An infinite per-step latency used to give an infinite collective time.
  SystemSpec slow = testing::round_system();
  slow.scaleup.latency_s = kInf;
  EXPECT_THROW(estimate_collective({.kind = CollectiveKind::all_reduce, .bytes = 1e6, .ranks = 8}, slow),
               ConfigError);
  EXPECT_THROW(estimate_collective({.kind = CollectiveKind::all_reduce, .bytes = kInf, .ranks = 8},
                                   testing::round_system()),
               ConfigError);

  ModelSpec m = testing::small_gpt(2);
  m.hidden_dropout = kNaN;
  EXPECT_EQ(error_of([&] { m.validate(); }),
            "model 'small': hidden_dropout (a dropout probability) must be in [0, 1)");

  SimulateOptions o;
  o.cost.clock_hz = kInf;
  EXPECT_EQ(error_of([&] { o.validate(); }),
            "the clock override (clock_hz; 0: the device's) must be finite (got inf)");
  o = SimulateOptions{};
  o.cost.host_overhead_per_kernel_s = -1e-6;
  EXPECT_NE(error_of([&] { o.validate(); }).find("the host overhead per kernel (host_overhead_per_kernel_s"),
            std::string::npos);
  o = SimulateOptions{};
  o.system = slow;
  EXPECT_THROW(simulate(build_graph(testing::small_gpt(2), {.seq = 16}), testing::round_device(), o), ConfigError);
  BuildOptions b{.seq = 16, .expert_imbalance = kNaN};
  EXPECT_THROW(b.validate(testing::small_gpt(2)), ConfigError);
}

// A device every number of which is finite and positive, whose bandwidth is the smallest positive
// double (5e-324 B/s): it passes validation, but any byte moved takes infinitely long.
DeviceSpec trickle_device() {
  DeviceSpec d = testing::round_device();
  d.memory_bandwidth_bytes_per_s = std::numeric_limits<double>::denorm_min();
  return d;
}

TEST(PhysicalRangeTest, SimulateRefusesAnInfiniteResultNamingTheFigure) {
  const DeviceSpec d = trickle_device();
  ASSERT_NO_THROW(d.validate());
  const Graph g = build_graph(testing::small_gpt(2), {.seq = 16});
  const std::string message = error_of([&] { simulate(g, d, SimulateOptions{}); });
  // The first op, the embedding lookup, moves bytes: its time is infinite.
  EXPECT_EQ(message, "simulate: op #0 (embedding): time_s is not finite (inf); an input is out of "
                     "physical range");
  EXPECT_THROW(simulate(g, d, SimulateOptions{}), PhysicalRangeError);
}

TEST(PhysicalRangeTest, TrainingServingCollectiveAndKernelEntryPointsRefuseInfiniteResults) {
  const DeviceSpec d = trickle_device();
  const SystemSpec sys = testing::round_system();
  // A training step on that device: the stage's simulation refuses it, and so does the estimate
  // (it is an input out of range, not a layout the builder rejects).
  const ParallelLayout l{.tp = 2, .dp = 2, .micro_batch = 1, .global_batch = 4};
  EXPECT_THROW(estimate_training(testing::small_gpt(2), {.seq = 16}, l, d, sys, SimulateOptions{}), PhysicalRangeError);
  PlanSpace space = default_plan_space(testing::small_gpt(2), 4, 4, 16);
  space.virtual_stages = {1};
  space.micro_batch = {1};
  EXPECT_THROW(plan_training(testing::small_gpt(2), {.seq = 16}, space, d, sys, SimulateOptions{}, 3, 1),
               PhysicalRangeError);
  // A serving replica on it.
  EXPECT_THROW(IterationModel(testing::llama3_8b(), d, ReplicaConfig{}), PhysicalRangeError);
  // One collective over a scale-up fabric of 5e-324 B/s.
  SystemSpec trickle = sys;
  trickle.scaleup.bandwidth_bytes_per_s = std::numeric_limits<double>::denorm_min();
  ASSERT_NO_THROW(trickle.validate());
  EXPECT_EQ(error_of([&] {
              estimate_collective({.kind = CollectiveKind::all_reduce, .bytes = 1e6, .ranks = 8}, trickle);
            }),
            "estimate_collective: the time to move the bytes over the scale-up fabric is not finite (inf); an "
            "input is out of physical range");
  // One kernel: a 4096^3 bf16 GEMM reads its operands over that bandwidth.
  EXPECT_THROW(estimate_kernel({.kind = KernelKind::matmul, .m = 4096, .n = 4096, .k = 4096}, d, "kernel",
                               CostOptions{}),
               PhysicalRangeError);
  EXPECT_THROW(estimate_kernel({.kind = KernelKind::memory, .bytes = kInf, .elements = 1}, testing::round_device(),
                               "roofline", CostOptions{}),
               ConfigError);
}

TEST(PhysicalRangeTest, ServingInputsMustBeFinite) {
  ServeConfig c;
  c.kv_transfer_bytes_per_s = kInf;
  c.prefill_replicas = 1;
  c.replicas = 2;
  IterationModel costs(testing::small_gpt(2), testing::round_device(), ReplicaConfig{});
  Workload w = generate_workload({.requests = 4, .qps = 1.0, .input = {.value = 8}, .output = {.value = 4}});
  EXPECT_EQ(error_of([&] { simulate_serving(costs, w, c); }),
            "the KV transfer bandwidth must be finite (got inf)");
  ServeConfig priced;
  priced.price_usd_per_gpu_hour = kNaN;
  EXPECT_THROW(simulate_serving(costs, w, priced), ConfigError);
  EXPECT_THROW(generate_workload({.requests = 4, .qps = kNaN, .input = {.value = 8}, .output = {.value = 4}}),
               ConfigError);
  EXPECT_THROW(generate_workload({.requests = 4, .qps = 1.0, .arrival = ArrivalProcess::gamma, .burstiness = kInf,
                                  .input = {.value = 8}, .output = {.value = 4}}),
               ConfigError);
  // A length beyond a request's 32-bit count used to wrap to a negative one.
  EXPECT_THROW(generate_workload({.requests = 4, .input = {.value = int64_t{1} << 32}, .output = {.value = 4}}),
               ConfigError);
  // A finite run: every figure is finite.
  const ServeResult r = simulate_serving(costs, w, ServeConfig{});
  EXPECT_EQ(r.completed, 4);
  EXPECT_TRUE(std::isfinite(r.makespan_s) && r.makespan_s > 0);
}

TEST(PhysicalRangeTest, TheInputCheckNamesTheFieldTheRangeAndTheValue) {
  EXPECT_EQ(error_of([] { require_in_range("device 'x'", "tdp_w", kNaN, kNonNegative); }),
            "device 'x': tdp_w must be finite (got nan)");
  EXPECT_EQ(error_of([] { require_in_range("device 'x'", "tdp_w", -kInf); }), "device 'x': tdp_w must be finite (got -inf)");
  EXPECT_EQ(error_of([] { require_in_range("device 'x'", "tdp_w", -3.0, kNonNegative); }),
            "device 'x': tdp_w must not be negative (got -3)");
  EXPECT_EQ(error_of([] { require_in_range("", "the rate", 0.0, kPositive); }), "the rate must be positive (got 0)");
  EXPECT_EQ(error_of([] { require_in_range("s", "e", 1.25, kPositiveFraction); }), "s: e must be in (0, 1] (got 1.25)");
  EXPECT_EQ(error_of([] { require_in_range("s", "w", 1.0, {.lo = 0.0, .hi = 1.0, .hi_open = true}); }),
            "s: w must be in [0, 1) (got 1)");
  EXPECT_EQ(error_of([] { require_in_range("s", "n", 0.5, {.lo = 1.0}); }), "s: n must be at least 1 (got 0.5)");
  EXPECT_EQ(error_of([] { require_in_range("s", "n", 2e6, {.hi = 1e6}); }), "s: n must be at most 1e+06 (got 2e+06)");
  // The ends themselves: in unless open.
  EXPECT_NO_THROW(require_in_range("s", "e", 1.0, kPositiveFraction));
  EXPECT_NO_THROW(require_in_range("s", "e", 0.0, kFraction));
  EXPECT_NO_THROW(require_in_range("s", "x", -1e300));
  EXPECT_THROW(require_in_range("s", "e", 0.0, kPositiveFraction), ConfigError);
}

// The values for_each_figure visits, in order.
template <typename T>
std::vector<double> figures_of(const T& value) {
  std::vector<double> seen;
  for_each_figure(value, [&](const char*, double v) { seen.push_back(v); });
  return seen;
}

TEST(PhysicalRangeTest, TheChecksSeeEveryFigureOfAResult) {
  // Each double given its own value: the list of each struct holds every one once.
  OpResult op;
  op.count = {.flops = 1, .masked_flops = 2, .bytes_read = 3, .bytes_written = 4, .communication_bytes = 5};
  op.cost = {.time_s = 6, .compute_time_s = 7, .memory_time_s = 8, .launch_overhead_s = 9, .peak_flops_per_s = 10};
  op.start_s = 11;
  op.end_s = 12;
  op.energy_j = 13;
  op.overlapped_s = 14;
  EXPECT_EQ(figures_of(op), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));
  const TimelinePoint bin{.start_s = 1, .t_s = 2, .kv_utilization = 3, .waiting = 4, .running = 5,
                          .kv_utilization_max = 6, .waiting_max = 7, .running_max = 8};
  EXPECT_EQ(figures_of(bin), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  const StepRecord step{.start_s = 1, .end_s = 2, .kv_utilization = 3};
  EXPECT_EQ(figures_of(step), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(figures_of(Percentiles{1, 2, 3, 4, 5}), (std::vector<double>{1, 2, 3, 4, 5}));
  // A serving run's list holds its timeline, so the check reaches every figure of every bin.
  ServeResult r;
  r.timeline.push_back({.t_s = 1, .waiting_max = kInf});
  int timelines = 0;
  for_each_figure(r, [&](const char* figure, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<TimelinePoint>>) {
      EXPECT_STREQ(figure, "timeline");
      EXPECT_EQ(figures_of(value.front())[6], kInf);
      ++timelines;
    }
  });
  EXPECT_EQ(timelines, 1);
}

TEST(PhysicalRangeTest, TheCheckNamesWhereAndWhat) {
  EXPECT_EQ(error_of([] { require_non_negative("simulate", "latency_s", kInf); }),
            "simulate: latency_s is not finite (inf); an input is out of physical range");
  EXPECT_EQ(error_of([] { require_non_negative("simulate", "latency_s", -2.5); }),
            "simulate: latency_s is negative (-2.5); an input is out of physical range");
  EXPECT_EQ(error_of([] { require_finite("x", "a difference", -2.5); }), "(no error)");
  EXPECT_NO_THROW(require_non_negative("x", "zero", 0.0));
  // A pipeline of one stage has no bubble, whatever the rounding of its sum.
  const PipelineSchedule one = schedule_pipeline(1, 1, 7, 0.1, 0.2, 0.0);
  EXPECT_GE(one.bubble_s, 0.0);
  EXPECT_NEAR(one.bubble_s, 0.0, 1e-12);
}

}  // namespace
}  // namespace accelsim
