// 2D SUMMA tensor parallelism (BuildOptions::summa): each linear's gathers and reductions, and
// its weights, hand-worked against the NERSC performance model's expressions (Subramanian et
// al. 2024, arXiv 2410.00273; its LinearSumma: X [b, l/m2, e/m1], W [e/m2, f/m1]; the forward
// broadcasts X over m1 and W over m2, the backward broadcasts W and reduces dX, broadcasts X and
// reduces dW).
#include "accelsim/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "accelsim/error.h"
#include "accelsim/simulate.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

// Elements moved by the layer's collectives, by (op, group, pass): the gathered result of an
// all-gather, the reduced input of a reduce-scatter (the volumes the model's expressions count).
std::map<std::string, double> layer_volumes(const Graph& g, const std::string& layer) {
  std::map<std::string, double> v;
  for (const Node& n : g.nodes()) {
    if (n.module_path.rfind(layer, 0) != 0) continue;
    const bool gather = n.op == "accel_sim::all_gather", scatter = n.op == "accel_sim::reduce_scatter";
    if (!gather && !scatter) continue;
    const std::string* group = std::get_if<std::string>(n.attr("group"));
    const TensorId t = gather ? n.outputs[0] : n.inputs[0];
    const std::string key = std::string(gather ? "ag " : "rs ") + *group + (n.pass == Pass::forward ? " fwd" : " bwd");
    v[key] += static_cast<double>(g.tensor(t).numel());
  }
  return v;
}

TEST(SummaTest, EachLinearGathersItsInputOverTpAndItsWeightOverCp) {
  // A one-layer GPT (e 256, f 1024, 8 heads of 32), seq 128, on a 2 x 2 grid (m1 = TP 2 splits
  // the widths, m2 = CP 2 the sequence).
  const ModelSpec m = testing::small_gpt(1);
  const BuildOptions o{.phase = Phase::train, .seq = 128, .tensor_parallel = 2, .sequence_parallel = true,
                       .context_parallel = 2, .summa = true};
  const Graph g = build_graph(m, o);
  const double e = 256, f = 1024, l = 128, m1 = 2, m2 = 2;
  const std::map<std::string, double> v = layer_volumes(g, "model.layers.0");
  // X over m1, per linear its input b l/m2 x (its input width): qkv, o_proj and the FFN's up
  // read e, the down projection f.
  EXPECT_DOUBLE_EQ(v.at("ag tp fwd"), l / m2 * (3 * e + f));
  // W over m2, per linear (in x out/m1): 3e^2, e^2, e f, f e over m1: 12 e^2 / m1 with f = 4e.
  // The attention's K and V (CP's gather over m2 of this rank's heads, 2 b (h/m1) l q, the
  // model's FusedLASeqp) come on top.
  const double kv = 2 * l * e / m1;
  EXPECT_DOUBLE_EQ(v.at("ag cp fwd"), (4 * e * e + 2 * e * f) / m1 + kv);
  EXPECT_DOUBLE_EQ(v.at("ag cp fwd") - kv, 12 * e * e / m1);
  // The backward gathers X and W again and reduces dX over m1 and dW over m2 (and K and V's
  // gradients over m2, as context parallelism does).
  EXPECT_DOUBLE_EQ(v.at("ag tp bwd"), l / m2 * (3 * e + f));
  EXPECT_DOUBLE_EQ(v.at("rs tp bwd"), l / m2 * (3 * e + f));
  EXPECT_DOUBLE_EQ(v.at("ag cp bwd") - kv, 12 * e * e / m1);
  EXPECT_DOUBLE_EQ(v.at("rs cp bwd") - kv, 12 * e * e / m1);
  EXPECT_EQ(v.count("rs tp fwd"), 0u);  // no row-parallel reduction
  // Memory: each weight is 1/(m1 m2) of the layer's 12 e^2, in bf16 (the shards the forward's
  // CP gathers read).
  double weights = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != "accel_sim::all_gather" || n.pass != Pass::forward || n.attr("summa") == nullptr) continue;
    const Storage& st = g.storage(g.tensor(n.inputs[0]).storage);
    if (st.kind == StorageKind::parameter) weights += static_cast<double>(st.size_bytes);
  }
  EXPECT_DOUBLE_EQ(weights, 12 * e * e / (m1 * m2) * 2);
  // The same GEMM FLOPs as 1D TP over the same ranks with CP (each GEMM b l/m2 x in x out/m1);
  // without biases, which 1D TP's addmm counts in its GEMMs.
  ModelSpec plain = m;
  plain.qkv_bias = plain.output_bias = plain.ffn_bias = false;
  BuildOptions one_d = o;
  one_d.summa = false;
  const auto matrix = [](const Graph& graph) {
    const SimulationResult r = simulate(graph, DeviceSpec{.id = "d", .memory_bytes = 1e12,
                                                          .memory_bandwidth_bytes_per_s = 1e12,
                                                          .bf16_matrix_flops_per_s = 1e15}, {});
    double flops = 0;
    for (const OpResult& op : r.ops) flops += op.count.op_class == OpClass::matmul ? op.count.flops : 0.0;
    return flops;
  };
  EXPECT_DOUBLE_EQ(matrix(build_graph(plain, o)), matrix(build_graph(plain, one_d)));
}

TEST(SummaTest, EachGemmHidesItsPanelsButOne) {
  // On a system, a linear's gathers (X over TP, W over CP; C seconds together) and its GEMM (G)
  // take G + C / n + max(C - G, 0) with n = max(m1, m2) = 2 panels: the collectives are charged
  // C / 2 + max(C - G, 0) of their C (never more than C). On a device of 1 TFLOP/s the GEMM
  // outlasts them.
  const ModelSpec m = testing::small_gpt(1);
  DeviceSpec d = testing::round_device();
  d.bf16_matrix_flops_per_s = 1e12;
  const BuildOptions o{.phase = Phase::train, .seq = 128, .tensor_parallel = 2, .sequence_parallel = true,
                       .context_parallel = 2, .summa = true};
  const Graph g = build_graph(m, o);
  SimulateOptions options;
  options.system = testing::round_system();
  options.groups = {{.name = "tp", .size = 2, .ranks_per_domain = 2}, {.name = "cp", .size = 2, .ranks_per_domain = 2}};
  const SimulationResult r = simulate(g, d, options);
  // The down projection's forward: its gathers' whole time, what they are charged, its GEMM.
  const auto nodes = g.nodes();
  auto down_proj = [&](const SimulationResult& res, double& comm, double& charged, double& gemm) {
    comm = charged = gemm = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (nodes[n].module_path != "model.layers.0.mlp.down_proj" || nodes[n].pass != Pass::forward) continue;
      if (nodes[n].op == "accel_sim::all_gather") {
        comm += res.ops[n].cost.time_s + res.ops[n].overlapped_s;
        charged += res.ops[n].cost.time_s;
      } else if (nodes[n].op == "mm") {
        gemm += res.ops[n].cost.time_s;
      }
    }
  };
  double comm = 0, charged = 0, gemm = 0;
  down_proj(r, comm, charged, gemm);
  ASSERT_GT(comm, 0.0);
  ASSERT_GT(gemm, 0.0);
  EXPECT_GT(gemm, comm);
  EXPECT_NEAR(charged, comm / 2, 1e-15);
  // On a device of 1 PFLOP/s the collectives outlast the GEMM: the pair takes C + G / 2, the
  // collectives are charged C - G / 2.
  d.bf16_matrix_flops_per_s = 1e15;
  down_proj(simulate(g, d, options), comm, charged, gemm);
  ASSERT_GT(comm, gemm);
  EXPECT_NEAR(charged, comm - gemm / 2, 1e-15);
}

TEST(SummaTest, NeedsAGridAndADenseSixteenBitModel) {
  const ModelSpec m = testing::small_gpt(1);
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128, .tensor_parallel = 2, .sequence_parallel = true,
                               .summa = true}),
               ConfigError);  // no CP axis
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128, .tensor_parallel = 2, .context_parallel = 2,
                               .summa = true}),
               ConfigError);  // no sequence parallelism
  EXPECT_THROW(build_graph(m, {.phase = Phase::train, .seq = 128, .tensor_parallel = 2, .sequence_parallel = true,
                               .context_parallel = 2, .summa = true, .fp8_gemms = true}),
               ConfigError);
  // Nor a decode step (the sequence is one token), a parallel block (GPT-J: attention and FFN
  // summed before one reduction) or a mixture of experts.
  EXPECT_THROW(build_graph(m, {.phase = Phase::decode, .context = 128, .tensor_parallel = 2,
                               .sequence_parallel = true, .context_parallel = 2, .summa = true}),
               ConfigError);
  ModelSpec parallel = m;
  parallel.parallel_block = true;
  EXPECT_THROW(build_graph(parallel, {.phase = Phase::train, .seq = 128, .tensor_parallel = 2,
                                      .sequence_parallel = true, .context_parallel = 2, .summa = true}),
               ConfigError);
}

}  // namespace
}  // namespace accelsim
