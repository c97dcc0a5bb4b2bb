#include "accelsim/timeline.h"

#include <gtest/gtest.h>

#include <cmath>

#include "accelsim/error.h"
#include "testing/graph_builder.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

using testing::new_tensor;

NodeId add_in(Graph& g, std::string op, std::vector<TensorId> in, std::vector<TensorId> out,
              Pass pass = Pass::forward) {
  return g.add_node(Node{.op = std::move(op), .overload = "default", .inputs = std::move(in),
                         .outputs = std::move(out), .pass = pass});
}

// testing::sample_graph(): mm 21 us (compute), view 0 s, gelu 5 us (memory), frobnicate 5 us
// (unknown, no FLOPs) on the round device. Memory: resident x + W = 4 MB; y (2 MB) n0..n2,
// z (2 MB) n2..n3, u (2 MB) n3..end.
using testing::sample_graph;

TEST(TimelineTest, SpansTileTheRunAndMemoryStepsWithLiveBytes) {
  const Graph g = sample_graph();
  const SimulateOptions options;
  const SimulationResult r = simulate(g, testing::round_device(), options);
  const ExecutionTimeline t = execution_timeline(g, r, options);
  ASSERT_EQ(t.spans.size(), 3u);  // the view takes no time
  EXPECT_EQ(t.spans[0].node, 0);
  EXPECT_EQ(t.spans[1].node, 2);
  EXPECT_EQ(t.spans[2].node, 3);
  EXPECT_NEAR(t.spans[0].end_s, 21e-6, 1e-15);
  EXPECT_NEAR(t.spans[1].start_s, 21e-6, 1e-15);
  EXPECT_NEAR(t.spans[1].end_s, 26e-6, 1e-15);
  EXPECT_NEAR(t.spans[2].end_s, 31e-6, 1e-15);
  for (const TimelineSpan& s : t.spans) EXPECT_EQ(s.stream, Stream::compute);
  EXPECT_NEAR(t.latency_s, 31e-6, 1e-15);
  // 6 MB while mm runs (x, W, y); 8 MB from gelu (+z) on (y freed after gelu, u allocated by
  // frobnicate: still 8 MB); 6 MB after the last op (x, W, u).
  ASSERT_EQ(t.memory.size(), 3u);
  EXPECT_DOUBLE_EQ(t.memory[0].t_s, 0.0);
  EXPECT_EQ(t.memory[0].live_bytes, 6000000);
  EXPECT_NEAR(t.memory[1].t_s, 21e-6, 1e-15);
  EXPECT_EQ(t.memory[1].live_bytes, 8000000);
  EXPECT_NEAR(t.memory[2].t_s, 31e-6, 1e-15);
  EXPECT_EQ(t.memory[2].live_bytes, 6000000);
}

TEST(TimelineTest, MicroBatchesRepeatForwardAndBackwardThenTheOptimizerOnce) {
  // f: gelu on 1e6 fp32 (8e6 B: 8 us + 1 us); b: its backward, the same op (9 us);
  // o: an optimizer op, the same shape (9 us). Three micro-batches: f b f b f b o = 63 us.
  Graph g;
  TensorId x = new_tensor(g, {1000000}, DType::fp32, StorageKind::input);
  TensorId y = new_tensor(g, {1000000});
  TensorId dx = new_tensor(g, {1000000});
  TensorId p = new_tensor(g, {1000000}, DType::fp32, StorageKind::parameter);
  add_in(g, "gelu", {x}, {y}, Pass::forward);
  add_in(g, "gelu", {y}, {dx}, Pass::backward);
  add_in(g, "gelu", {dx}, {p}, Pass::optimizer);
  SimulateOptions options;
  options.micro_batches = 3;
  const SimulationResult r = simulate(g, testing::round_device(), options);
  const ExecutionTimeline t = execution_timeline(g, r, options);
  ASSERT_EQ(t.spans.size(), 7u);
  const NodeId nodes[] = {0, 1, 0, 1, 0, 1, 2};
  const int32_t micro[] = {0, 0, 1, 1, 2, 2, 0};
  double sum = 0.0;
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(t.spans[i].node, nodes[i]) << i;
    EXPECT_EQ(t.spans[i].micro_batch, micro[i]) << i;
    EXPECT_NEAR(t.spans[i].end_s - t.spans[i].start_s, 9e-6, 1e-15) << i;
    sum += t.spans[i].end_s - t.spans[i].start_s;
  }
  EXPECT_NEAR(sum, 63e-6, 1e-15);
  EXPECT_NEAR(r.latency_s, 63e-6, 1e-15);
  EXPECT_NEAR(t.latency_s, r.latency_s, 1e-15);
}

TEST(TimelineTest, CollectivesGoOnTheCommunicationStream) {
  Graph g;
  TensorId x = new_tensor(g, {1000000}, DType::bf16, StorageKind::input);
  TensorId y = new_tensor(g, {1000000}, DType::bf16);
  TensorId z = new_tensor(g, {1000000}, DType::bf16);
  add_in(g, "gelu", {x}, {y});
  g.add_node(Node{.op = "accel_sim::all_reduce", .overload = "default", .inputs = {y}, .outputs = {z},
                  .attrs = {{"group", std::string("tp")}}});
  SimulateOptions options;
  options.system = testing::round_system();
  CommGroup tp;
  tp.name = "tp";
  tp.size = 2;
  tp.ranks_per_domain = 2;
  options.groups = {tp};
  const SimulationResult r = simulate(g, testing::round_device(), options);
  const ExecutionTimeline t = execution_timeline(g, r, options);
  ASSERT_EQ(t.spans.size(), 2u);
  EXPECT_EQ(t.spans[0].stream, Stream::compute);
  EXPECT_EQ(t.spans[1].stream, Stream::communication);
  EXPECT_GT(t.spans[1].end_s, t.spans[1].start_s);
  EXPECT_NEAR(t.spans[1].end_s, r.latency_s, 1e-15);
}

TEST(TimelineTest, DownsampleKeepsEndsAndThePeak) {
  std::vector<MemorySample> m;
  for (int i = 0; i < 1000; ++i) m.push_back({i * 1e-6, 100 + i % 7});
  m[613].live_bytes = 5000;
  const std::vector<MemorySample> d = downsample_memory(m, 50);
  ASSERT_LE(d.size(), 50u);
  EXPECT_DOUBLE_EQ(d.front().t_s, 0.0);
  EXPECT_DOUBLE_EQ(d.back().t_s, 999e-6);
  int64_t peak = 0;
  for (const MemorySample& s : d) peak = std::max(peak, s.live_bytes);
  EXPECT_EQ(peak, 5000);
  EXPECT_EQ(downsample_memory(d, 50).size(), d.size());  // short enough: unchanged
  EXPECT_THROW(downsample_memory(m, 3), ConfigError);
}

TEST(TimelineTest, EmpiricalCdfCountsTiesAndSkipsNaN) {
  const double nan = std::nan("");
  // Sorted: 1 2 2 4 (NaN left out): P(<=1) = 1/4, P(<=2) = 3/4, P(<=4) = 1.
  const auto cdf = empirical_cdf({4.0, nan, 2.0, 1.0, 2.0}, 100);
  ASSERT_EQ(cdf.size(), 4u);
  EXPECT_DOUBLE_EQ(cdf[0].first, 1.0);
  EXPECT_DOUBLE_EQ(cdf[0].second, 0.25);
  EXPECT_DOUBLE_EQ(cdf[1].second, 0.75);
  EXPECT_DOUBLE_EQ(cdf[2].second, 0.75);
  EXPECT_DOUBLE_EQ(cdf[3].first, 4.0);
  EXPECT_DOUBLE_EQ(cdf[3].second, 1.0);
  // 1001 values 0..1000 thinned to 11 points: ranks 0, 100, ..., 1000.
  std::vector<double> v;
  for (int i = 0; i <= 1000; ++i) v.push_back(1000 - i);
  const auto thin = empirical_cdf(v, 11);
  ASSERT_EQ(thin.size(), 11u);
  EXPECT_DOUBLE_EQ(thin[5].first, 500.0);
  EXPECT_DOUBLE_EQ(thin[5].second, 501.0 / 1001.0);
  EXPECT_DOUBLE_EQ(thin.back().second, 1.0);
  EXPECT_TRUE(empirical_cdf({nan}, 10).empty());
}

TEST(TimelineTest, RooflinePlacesEachOpByIntensityAndAchievedRate) {
  const Graph g = sample_graph();
  const SimulateOptions options;
  const DeviceSpec d = testing::round_device();
  const SimulationResult r = simulate(g, d, options);
  const RooflineChart c = roofline_chart(g, r, d, options.cost);
  EXPECT_DOUBLE_EQ(c.bandwidth_bytes_per_s, 1e12);
  // mm on the bf16 matrix roof (100 TFLOP/s, ridge 100 FLOP/B), gelu on the vector roof
  // (1 TFLOP/s, ridge 1 FLOP/B); the view and the unknown op have no FLOPs.
  ASSERT_EQ(c.ceilings.size(), 2u);
  EXPECT_EQ(c.ceilings[0].unit, "bf16_matrix");
  EXPECT_DOUBLE_EQ(c.ceilings[0].ridge_intensity, 100.0);
  EXPECT_EQ(c.ceilings[1].unit, "fp32");
  EXPECT_DOUBLE_EQ(c.ceilings[1].ridge_intensity, 1.0);
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].node, 0);
  EXPECT_NEAR(c.points[0].intensity, 2e9 / 6e6, 1e-9);
  EXPECT_NEAR(c.points[0].achieved_flops_per_s, 2e9 / 21e-6, 1e3);
  EXPECT_EQ(c.points[0].unit, "bf16_matrix");
  EXPECT_EQ(c.points[0].bound, Bound::compute);
  EXPECT_EQ(c.points[1].node, 2);
  EXPECT_NEAR(c.points[1].intensity, 0.25, 1e-12);
  EXPECT_NEAR(c.points[1].achieved_flops_per_s, 1e6 / 5e-6, 1e-3);
  EXPECT_EQ(c.points[1].unit, "fp32");
  EXPECT_EQ(c.points[1].bound, Bound::memory);
}

}  // namespace
}  // namespace accelsim
