// Tensor-parallel communication overlap (SimulateOptions::overlap_tp_comm), worked by hand on
// the round-number device and system.
#include <gtest/gtest.h>

#include "accelsim/builder.h"
#include "accelsim/simulate.h"
#include "testing/graph_builder.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

using testing::new_tensor;
using testing::view_of;

using testing::round_system;

SimulateOptions tp4(bool overlap) {
  SimulateOptions o;
  o.system = round_system();
  o.groups = {{.name = "tp", .size = 4, .ranks_per_domain = 4}};
  o.overlap_tp_comm = overlap;
  return o;
}

NodeId add(Graph& g, std::string op, std::vector<TensorId> in, std::vector<TensorId> out,
           Pass pass = Pass::forward) {
  std::vector<Attr> attrs;
  if (op.rfind("accel_sim::", 0) == 0) attrs.push_back({"group", std::string("tp")});
  return g.add_node(Node{.op = std::move(op), .overload = "default", .inputs = std::move(in),
                         .outputs = std::move(out), .attrs = std::move(attrs), .pass = pass});
}

// A tensor-parallel block's forward, sequence parallel, TP 4:
//   n0 all-gather x [500, 2000] -> X [2000, 2000] bf16 (8 MB gathered)
//   n1 H = mm(view of X, W1^T) [2000, k]        (column-parallel)
//   n2 Y = mm(H, W2^T) [2000, 2000]
//   n3 reduce-scatter Y -> [500, 2000]            (row-parallel)
// On the system, each collective of S = 8 MB over 4 ranks takes the recursive-doubling/halving
// form (fewer steps than the ring): log2(4) x 1 us + 3/4 x 8 MB / 100 GB/s = 62 us. On the round device (100 TFLOP/s bf16, 1 TB/s, 1 us launch), with
// k = 2000: each mm is 2 x 2000^3 = 1.6e10 FLOPs = 160 us (its 24 MB take 24 us) + 1 us = 161 us;
// with k = 500: 4e9 FLOPs = 40 us (12 MB, 12 us) + 1 us = 41 us.
Graph block(int64_t k) {
  Graph g;
  const TensorId x = new_tensor(g, {500, 2000}, DType::bf16, StorageKind::input);
  const TensorId full = new_tensor(g, {2000, 2000}, DType::bf16);
  const TensorId w1 = new_tensor(g, {2000, k}, DType::bf16, StorageKind::parameter);
  const TensorId h = new_tensor(g, {2000, k}, DType::bf16);
  const TensorId w2 = new_tensor(g, {k, 2000}, DType::bf16, StorageKind::parameter);
  const TensorId y = new_tensor(g, {2000, 2000}, DType::bf16);
  const TensorId out = new_tensor(g, {500, 2000}, DType::bf16);
  add(g, "accel_sim::all_gather", {x}, {full});
  add(g, "mm", {view_of(g, full, {2000, 2000}), w1}, {h});
  add(g, "mm", {h, w2}, {y});
  add(g, "accel_sim::reduce_scatter", {view_of(g, y, {2000, 2000})}, {out});
  g.add_output(out);
  return g;
}

TEST(TpOverlapTest, CollectivesArePipelinedWithTheirGemms) {
  const DeviceSpec d = testing::round_device();
  const Graph g = block(2000);
  const SimulationResult plain = simulate(g, d, tp4(false));
  ASSERT_EQ(plain.ops.size(), 4u);
  EXPECT_NEAR(plain.ops[0].cost.time_s, 62e-6, 1e-12);
  EXPECT_NEAR(plain.ops[1].cost.time_s, 161e-6, 1e-12);
  EXPECT_NEAR(plain.ops[2].cost.time_s, 161e-6, 1e-12);
  EXPECT_NEAR(plain.ops[3].cost.time_s, 62e-6, 1e-12);
  EXPECT_NEAR(plain.latency_s, 446e-6, 1e-12);
  EXPECT_EQ(plain.overlapped_communication_s, 0.0);

  // C = 62 us under G = 161 us in 4 chunks: the pair takes 161 + 62 / 4 = 176.5 us, so each
  // collective is charged 15.5 us and 46.5 us of it is hidden.
  const SimulationResult r = simulate(g, d, tp4(true));
  EXPECT_NEAR(r.ops[0].cost.time_s, 15.5e-6, 1e-12);
  EXPECT_NEAR(r.ops[0].overlapped_s, 46.5e-6, 1e-12);
  EXPECT_NEAR(r.ops[3].cost.time_s, 15.5e-6, 1e-12);
  EXPECT_NEAR(r.ops[3].overlapped_s, 46.5e-6, 1e-12);
  EXPECT_NEAR(r.ops[1].cost.time_s, 161e-6, 1e-12);  // the GEMMs keep their time
  EXPECT_NEAR(r.latency_s, 353e-6, 1e-12);
  EXPECT_NEAR(r.forward_time_s, 353e-6, 1e-12);
  EXPECT_NEAR(r.ops[3].end_s, 353e-6, 1e-12);  // the timeline holds the charged times
  // The full collective time stays in communication_time_s; the hidden part is reported apart.
  EXPECT_NEAR(r.communication_time_s, 124e-6, 1e-12);
  EXPECT_NEAR(r.overlapped_communication_s, 93e-6, 1e-12);

  // Collective longer than its GEMM: C = 62 us over G = 41 us takes 62 + 41 / 4 = 72.25 us,
  // charged 72.25 - 41 = 31.25 us.
  const SimulationResult small = simulate(block(500), d, tp4(true));
  EXPECT_NEAR(small.ops[1].cost.time_s, 41e-6, 1e-12);
  EXPECT_NEAR(small.ops[0].cost.time_s, 31.25e-6, 1e-12);
  EXPECT_NEAR(small.ops[3].cost.time_s, 31.25e-6, 1e-12);
  EXPECT_NEAR(small.latency_s, 2 * 31.25e-6 + 2 * 41e-6, 1e-12);

  // Micro-batches scale the hidden time with the rest.
  SimulateOptions four = tp4(true);
  four.micro_batches = 4;
  EXPECT_NEAR(simulate(g, d, four).overlapped_communication_s, 4 * 93e-6, 1e-12);
}

TEST(TpOverlapTest, BackwardAllGatherHidesUnderDgradAndReduceScatterUnderWgrad) {
  // The mirrored backward, TP 4 (62 us collectives, 161 us GEMMs as above):
  //   b0 all-gather dY [500, 2000] -> G [2000, 2000]     (row-parallel layer's output gradient)
  //   b1 dH = mm(G, W2)        dgrad: reads a weight -> b0's partner, ring exchange in 4 chunks
  //   b2 dW2 = mm(H^T, G)      wgrad: no weight       -> not b0's partner
  //   b3 dX = mm(dH, W1)       dgrad producing b5's input
  //   b4 dW1 = mm(X^T, dH)     wgrad reading the same dH -> b5's partner, bulk
  //   b5 reduce-scatter dX -> [500, 2000]
  // b0: 161 + 62 / 4 - 161 = 15.5 us. b5 runs beside b4 in bulk: max(62, 161) - 161 = 0.
  Graph g;
  const TensorId dy = new_tensor(g, {500, 2000}, DType::bf16, StorageKind::input);
  const TensorId full = new_tensor(g, {2000, 2000}, DType::bf16);
  const TensorId w2 = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::parameter);
  const TensorId w1 = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::parameter);
  const TensorId h = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::input);
  const TensorId x = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::input);
  const TensorId dh = new_tensor(g, {2000, 2000}, DType::bf16);
  const TensorId dw2 = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::gradient);
  const TensorId dx = new_tensor(g, {2000, 2000}, DType::bf16);
  const TensorId dw1 = new_tensor(g, {2000, 2000}, DType::bf16, StorageKind::gradient);
  const TensorId dx_part = new_tensor(g, {500, 2000}, DType::bf16);
  add(g, "accel_sim::all_gather", {dy}, {full}, Pass::backward);
  add(g, "mm", {full, w2}, {dh}, Pass::backward);
  add(g, "mm", {h, full}, {dw2}, Pass::backward);
  add(g, "mm", {dh, w1}, {dx}, Pass::backward);
  add(g, "mm", {x, dh}, {dw1}, Pass::backward);
  add(g, "accel_sim::reduce_scatter", {dx}, {dx_part}, Pass::backward);
  g.add_output(dx_part);
  const SimulationResult r = simulate(g, testing::round_device(), tp4(true));
  EXPECT_NEAR(r.ops[0].cost.time_s, 15.5e-6, 1e-12);
  EXPECT_NEAR(r.ops[5].cost.time_s, 0.0, 1e-12);
  EXPECT_NEAR(r.ops[5].overlapped_s, 62e-6, 1e-12);
  EXPECT_NEAR(r.backward_time_s, 4 * 161e-6 + 15.5e-6, 1e-12);
  EXPECT_NEAR(r.overlapped_communication_s, 46.5e-6 + 62e-6, 1e-12);
}

TEST(TpOverlapTest, BuilderStepHidesEveryLayerCollectiveButNoAllReduce) {
  // A Llama-style step at TP 4: with sequence parallelism each layer's four all-gathers and
  // reduce-scatters (two forward, two backward) find their GEMMs; without it the all-reduces are
  // left alone. Either way the latency drops by exactly the hidden time.
  const DeviceSpec d = testing::round_device();
  ModelSpec m = testing::llama3_8b();
  m.num_layers = 2;
  for (bool sp : {true, false}) {
    const Graph g = build_graph(m, {.phase = Phase::train, .batch = 1, .seq = 1024,
                                    .tensor_parallel = 4, .sequence_parallel = sp});
    const SimulationResult plain = simulate(g, d, tp4(false));
    const SimulationResult r = simulate(g, d, tp4(true));
    EXPECT_NEAR(r.communication_time_s, plain.communication_time_s, 1e-12);
    EXPECT_NEAR(plain.latency_s - r.latency_s, r.overlapped_communication_s, 1e-12);
    int hidden_layer_collectives = 0;
    for (const OpResult& op : r.ops) {
      const Node& n = g.node(op.node);
      if (n.op == "accel_sim::all_reduce") EXPECT_EQ(op.overlapped_s, 0.0);
      if (op.overlapped_s > 0 && n.module_path.rfind("model.layers.", 0) == 0) ++hidden_layer_collectives;
      EXPECT_GE(op.cost.time_s, 0.0);
    }
    if (sp) {
      EXPECT_EQ(hidden_layer_collectives, 2 * 8);  // 2 layers x (2 AG + 2 RS) x (fwd + bwd)
      EXPECT_GT(r.overlapped_communication_s, 0.0);
    } else {
      EXPECT_EQ(r.overlapped_communication_s, 0.0);
    }
  }
}

}  // namespace
}  // namespace accelsim
