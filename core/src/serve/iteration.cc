// IterationModel: the time of one serving step from the model builder and the cost model
// (serve.h explains the split into body, head and attention).
#include <algorithm>
#include <cmath>
#include <string>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/op_catalog.h"
#include "accelsim/serve.h"

namespace accelsim {
namespace {

// Token counts below this are sampled exactly; above, on a grid of kGridPerDoubling points per
// doubling with linear interpolation between them.
constexpr int64_t kExactBelow = 64;
constexpr double kGridPerDoubling = 16.0;

int64_t grid_point(int64_t k) {
  return static_cast<int64_t>(std::llround(static_cast<double>(kExactBelow) * std::exp2(static_cast<double>(k) / kGridPerDoubling)));
}

// The grid points around n (> kExactBelow): lo <= n <= hi.
std::pair<int64_t, int64_t> grid_bracket(int64_t n) {
  auto k = static_cast<int64_t>(std::floor(kGridPerDoubling * std::log2(static_cast<double>(n) / kExactBelow)));
  while (k > 0 && grid_point(k) > n) --k;
  while (grid_point(k + 1) <= n) ++k;
  return {grid_point(k), grid_point(k + 1)};
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

// The builder's attention nodes, one per kind of layer of the model's layer pattern (a sliding
// window's or a chunk's layers beside the global ones: ModelSpec::layer_pattern), each weighted
// by the layers of its kind, to be re-costed at other shapes.
struct IterationModel::AttentionTemplate {
  struct Kind {
    TensorMeta q, k, v, out;
    std::vector<Attr> attrs;
    double layers = 0.0;  // the model's layers of this kind
  };
  std::vector<Kind> kinds;
  int64_t per_layer = 0;  // attention nodes per layer
  bool causal = true;
};

namespace {

struct Measured {
  double body = 0.0, head = 0.0, activation = 0.0;
};

}  // namespace

static BuildOptions step_options(const ReplicaConfig& r, int64_t batch, int64_t seq, Phase phase) {
  BuildOptions b = r.build;
  b.phase = phase;
  b.batch = batch;
  b.seq = phase == Phase::prefill ? seq : 0;
  b.context = phase == Phase::decode ? seq : 0;
  b.kernels = KernelStyle::fused;
  b.eager_attention = false;
  b.tensor_parallel = r.tp;
  b.sequence_parallel = false;
  b.context_parallel = 1;
  b.expert_parallel = r.dp_attention;
  return b;
}

// An engine's one-shot all-reduce kernel on 8 H100 SXM (TP 8), timed in sgl-project/sglang#2904
// as one kernel per call (its "custom allreduce" rows; vLLM's path there adds a copy into the
// peer buffer that the engines' CUDA graphs avoid by registering the graph's buffers): 5.9 us at
// 512 bytes, 7.8 us at 32 KiB, 16.7 us at 256 KiB, 33.8 us at 1 MiB: about 6 us plus the bytes
// at 37.6 GB/s, measured up to 1 MiB; above that the engines switch to a two-stage kernel, taken
// as no faster than the library's ring.
constexpr double kCustomAllReduceS = 6e-6;
constexpr double kCustomAllReduceBytesPerS = 37.6e9;
constexpr double kCustomAllReduceMaxBytes = 1024.0 * 1024.0;

static SimulateOptions step_simulate(const ReplicaConfig& r) {
  SimulateOptions o = r.simulate;
  o.micro_batches = 1;
  o.overlap_tp_comm = false;
  if (r.system && (r.tp > 1 || r.dp_attention > 1)) {
    o.system = *r.system;
    if (r.custom_allreduce) {
      o.system->custom_allreduce_s = kCustomAllReduceS;
      o.system->custom_allreduce_bytes_per_s = kCustomAllReduceBytesPerS;
      o.system->custom_allreduce_max_bytes = kCustomAllReduceMaxBytes;
    }
    o.groups = place_groups(*r.system, {{"tp", r.tp}, {"ep", r.dp_attention}}).first;
  }
  return o;
}

static Measured measure(const ModelSpec& model, int64_t layers, const ReplicaConfig& r, const DeviceSpec& device,
                        int64_t batch, int64_t seq) {
  ModelSpec m = model;
  m.num_layers = layers;
  if (m.learned_positions && batch == 1 && seq > m.max_position_embeddings) {
    // A step's tokens, profiled as one sequence, can outnumber a learned position table's rows
    // (GPT-2: 1,024). The profiled ops work per token, so the same tokens run as the fewest equal
    // rows that fit the table: the smallest divisor of `seq` at least seq / positions.
    int64_t rows = ceil_div(seq, m.max_position_embeddings);
    while (seq % rows != 0) ++rows;
    batch = rows;
    seq /= rows;
  }
  const Graph g = build_graph(m, step_options(r, batch, seq, Phase::prefill));
  const SimulationResult res = simulate(g, device, step_simulate(r));
  Measured out;
  for (const OpResult& op : res.ops) {
    const Node& n = g.node(op.node);
    if (n.op == "accel_sim::attention") continue;
    (starts_with(n.module_path, "lm_head") ? out.head : out.body) += op.cost.time_s;
  }
  out.activation = static_cast<double>(res.memory.peak_bytes - res.memory.resident_bytes);
  return out;
}

IterationModel::IterationModel(const ModelSpec& model, const DeviceSpec& device, const ReplicaConfig& replica)
    : model_(model), device_(device), replica_(replica) {
  model_.validate();
  device_.validate();
  replica_.simulate.validate();
  ACCELSIM_CHECK(replica_.tp >= 1 && replica_.pp >= 1, "tensor- and pipeline-parallel degrees must be at least 1");
  ACCELSIM_CHECK(replica_.pp <= model_.num_layers,
                 "pipeline stages (" + std::to_string(replica_.pp) + ") exceed the model's " +
                     std::to_string(model_.num_layers) + " layers");
  ACCELSIM_CHECK(replica_.dp_attention >= 1, "the attention data-parallel degree must be at least 1");
  if (replica_.dp_attention > 1) {
    ACCELSIM_CHECK(model_.moe.enabled(), "attention data parallelism with expert parallelism needs an MoE model; " +
                                             model_.name + " is dense (more replicas do the same)");
    ACCELSIM_CHECK(replica_.tp == 1 && replica_.pp == 1,
                   "attention data parallelism runs one GPU per attention rank (tp 1, pp 1) here");
  }
  ACCELSIM_CHECK(gpus() == 1 || replica_.system.has_value(),
                 "a replica of " + std::to_string(gpus()) + " GPUs needs a system (the node its GPUs share)");
  if (replica_.system) {
    replica_.system->validate();
    ACCELSIM_CHECK(replica_.tp * replica_.dp_attention <= replica_.system->scaleup_domain ||
                       replica_.dp_attention == 1,
                   "expert parallelism over " + std::to_string(replica_.dp_attention) + " GPUs exceeds the " +
                       replica_.system->id + " scale-up domain of " + std::to_string(replica_.system->scaleup_domain) +
                       " GPUs");
    ACCELSIM_CHECK(replica_.tp <= replica_.system->scaleup_domain,
                   "tensor parallelism of " + std::to_string(replica_.tp) + " exceeds the " + replica_.system->id +
                       " scale-up domain of " + std::to_string(replica_.system->scaleup_domain) + " GPUs");
  }
  ACCELSIM_CHECK(replica_.gpu_memory_utilization > 0 && replica_.gpu_memory_utilization <= 1,
                 "gpu_memory_utilization must be in (0, 1]");
  ACCELSIM_CHECK(replica_.block_size >= 1, "block size must be at least 1 token");
  ACCELSIM_CHECK(replica_.max_batched_tokens >= 1, "max batched tokens must be at least 1");
  ACCELSIM_CHECK(model_.causal && model_.lm_head && !model_.vision(),
                 "serving needs a decoder with an LM head; " + model_.name + " is not one");
  cost_model_ = make_cost_model(replica_.simulate.cost_model);
  init_templates();

  // Memory: the rank's weights (linear in the layers, split over the pipeline), the activation
  // peak of the largest step, the KV cache in what is left.
  const Measured one = measure(model_, 1, replica_, device_, 1, replica_.max_batched_tokens);
  ++profiles_built_;
  // The rank's parameters, every layer kind included: a one-token graph of the whole model.
  double params = 0.0;
  const Graph whole = build_graph(model_, step_options(replica_, 1, 1, Phase::prefill));
  for (const Storage& s : whole.storages()) {
    if (s.kind == StorageKind::parameter) params += static_cast<double>(s.size_bytes);
  }
  memory_.capacity_bytes = device_.memory_bytes;
  // A runtime reserve above the allocator's share leaves nothing usable (never less).
  memory_.usable_bytes =
      std::max(0.0, replica_.gpu_memory_utilization * device_.memory_bytes - device_.runtime_reserved_bytes);
  memory_.weight_bytes = params / static_cast<double>(replica_.pp);
  memory_.activation_bytes = one.activation;
  BuildOptions kv = step_options(replica_, 1, 0, Phase::decode);
  memory_.kv_bytes_per_token = static_cast<double>(step_kv_cache_bytes(model_, kv)) / static_cast<double>(replica_.pp);
  init_speculative();
  memory_.kv_bytes = std::max(0.0, memory_.usable_bytes - memory_.weight_bytes - memory_.activation_bytes);
  const double per_block = memory_.kv_bytes_per_token * static_cast<double>(replica_.block_size);
  const auto blocks = static_cast<int64_t>(std::floor(memory_.kv_bytes / per_block));
  memory_.kv_blocks = blocks / replica_.pp;  // the virtual engines split the GPU's blocks
  require_in_range("the replica", "the host KV bytes", replica_.host_kv_bytes, kNonNegative);
  require_in_range("the replica", "the host link bandwidth", replica_.host_link_bytes_per_s, kNonNegative);
  ACCELSIM_CHECK(replica_.host_kv_bytes == 0 || replica_.host_link_bytes_per_s > 0,
                 "a host-memory KV tier needs the host link's bandwidth");
  memory_.host_kv_blocks = static_cast<int64_t>(std::floor(replica_.host_kv_bytes / per_block)) / replica_.pp;
}

IterationModel::~IterationModel() = default;

// The drafter's weights and cache beside the target's (serve.h, SpeculativeConfig).
void IterationModel::init_speculative() {
  const SpeculativeConfig& sp = replica_.speculative;
  if (!sp.enabled()) return;
  ACCELSIM_CHECK(sp.tokens >= 1 && sp.tokens <= 64, "speculative decoding proposes 1 to 64 tokens a step");
  require_in_range("speculative decoding", "the acceptance rate", sp.acceptance, kFraction);
  ACCELSIM_CHECK(replica_.pp == 1, "speculative decoding runs on replicas without pipeline stages");
  ACCELSIM_CHECK(sp.draft.has_value() == (sp.kind == SpeculativeKind::draft_model),
                 "a draft model is given with, and only with, the draft_model drafter");
  if (sp.kind == SpeculativeKind::draft_model) {
    ReplicaConfig r = replica_;
    r.speculative = {};
    draft_ = std::make_unique<IterationModel>(*sp.draft, device_, r);
    memory_.draft_weight_bytes = draft_->memory().weight_bytes;
    memory_.kv_bytes_per_token += draft_->memory().kv_bytes_per_token;
  } else {
    ACCELSIM_CHECK(sp.kind != SpeculativeKind::mtp || model_.mtp_layers > 0,
                   model_.name + " has no multi-token-prediction module (its config's num_nextn_predict_layers)");
    // One layer of the target's heaviest kind (an MoE layer of an MoE model: DeepSeek-V3's MTP
    // block is one) and the 2h x h projection of [embedding; hidden state], at this rank's share.
    ModelSpec heavy = model_;
    heavy.moe.first_dense_layers = 0;
    heavy.moe.sparse_step = 1;
    auto params = [&](int64_t layers) {
      heavy.num_layers = layers;
      double bytes = 0.0;
      const Graph g = build_graph(heavy, step_options(replica_, 1, 1, Phase::prefill));
      for (const Storage& s : g.storages()) {
        if (s.kind == StorageKind::parameter) bytes += static_cast<double>(s.size_bytes);
      }
      return bytes;
    };
    const double projection = 2.0 * static_cast<double>(model_.hidden_size * model_.hidden_size) *
                              static_cast<double>(size_bytes(model_.weight_dtype)) / static_cast<double>(replica_.tp);
    memory_.draft_weight_bytes = params(2) - params(1) + projection;
    memory_.kv_bytes_per_token += memory_.kv_bytes_per_token / static_cast<double>(model_.num_layers);
  }
  memory_.weight_bytes += memory_.draft_weight_bytes;
}

double SpeculativeConfig::expected_tokens() const {
  if (!enabled()) return 1.0;
  if (acceptance >= 1.0) return static_cast<double>(tokens + 1);
  return (1.0 - std::pow(acceptance, static_cast<double>(tokens + 1))) / (1.0 - acceptance);
}

std::string_view speculative_name(SpeculativeKind kind) {
  switch (kind) {
    case SpeculativeKind::none: return "none";
    case SpeculativeKind::draft_model: return "draft_model";
    case SpeculativeKind::eagle: return "eagle";
    case SpeculativeKind::mtp: return "mtp";
  }
  return "?";
}

void IterationModel::init_templates() {
  // One layer of each kind: the first layer_pattern() layers, layer i standing for the layers l
  // with l mod pattern = i.
  const int64_t pattern = std::min(model_.layer_pattern(), model_.num_layers);
  auto take = [&](Phase phase, int64_t seq) {
    ModelSpec m = model_;
    m.num_layers = pattern;
    const Graph g = build_graph(m, step_options(replica_, 1, seq, phase));
    auto t = std::make_unique<AttentionTemplate>();
    std::vector<NodeId> nodes;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (g.nodes()[i].op == "accel_sim::attention") nodes.push_back(static_cast<NodeId>(i));
    }
    ACCELSIM_CHECK(!nodes.empty() && nodes.size() % static_cast<size_t>(pattern) == 0,
                   "the model builder emitted no fused attention for " + model_.name);
    t->per_layer = static_cast<int64_t>(nodes.size()) / pattern;
    for (int64_t i = 0; i < pattern; ++i) {
      const Node& n = g.node(nodes[static_cast<size_t>(i * t->per_layer)]);
      ACCELSIM_CHECK(n.inputs.size() >= 3 && !n.outputs.empty(), "attention node without q, k, v");
      AttentionTemplate::Kind kind{g.tensor(n.inputs[0]), g.tensor(n.inputs[1]), g.tensor(n.inputs[2]),
                                   g.tensor(n.outputs[0]), {}, 0.0};
      for (const Attr& a : n.attrs) {
        if (a.name != "is_causal" && a.name != "query_offset") kind.attrs.push_back(a);
      }
      kind.layers = static_cast<double>((model_.num_layers - i + pattern - 1) / pattern);
      t->kinds.push_back(std::move(kind));
    }
    t->causal = model_.causal;
    return t;
  };
  prefill_template_ = take(Phase::prefill, 2);
  decode_template_ = take(Phase::decode, 1);
}

double IterationModel::attention_cost(const AttentionTemplate& t, int64_t batch, int64_t sq, int64_t skv,
                                      int64_t offset) {
  // Every layer of the model: each kind's node at this shape, times its layers.
  double total = 0.0;
  for (const AttentionTemplate::Kind& kind : t.kinds) {
    Graph g;
    auto add = [&](const TensorMeta& like, int64_t rows) {
      TensorMeta m = like;
      m.shape[0] = batch;
      m.shape[m.shape.size() - 2] = rows;
      m.strides.clear();
      m.storage_offset = 0;
      Storage s;
      s.size_bytes = m.numel() * size_bytes(m.dtype);
      s.kind = StorageKind::activation;
      m.storage = g.add_storage(s);
      return g.add_tensor(m);
    };
    Node n;
    n.op = "accel_sim::attention";
    TensorMeta k = kind.k, v = kind.v;
    if (&t == decode_template_.get() && replica_.decode_kv_per_query_head) {
      // One block per query head reads its KV head: as many K/V heads read as query heads.
      ACCELSIM_CHECK(kind.q.shape.size() == 4 && k.shape.size() == 4 && v.shape.size() == 4,
                     "decode attention without (batch, heads, tokens, head dim) operands");
      k.shape[1] = v.shape[1] = kind.q.shape[1];
    }
    n.inputs = {add(kind.q, sq), add(k, skv), add(v, skv)};
    n.outputs = {add(kind.out, sq)};
    n.attrs = kind.attrs;
    n.attrs.push_back({"is_causal", t.causal && sq > 1});
    if (offset > 0) n.attrs.push_back({"query_offset", offset});
    const NodeId id = g.add_node(std::move(n));
    total += kind.layers * cost_model_->cost(count_op(g, g.node(id)), device_, replica_.simulate.cost).time_s;
  }
  return total;
}

double IterationModel::sample_tokens(int64_t n, bool head) {
  ++profiles_built_;
  if (head) return measure(model_, 1, replica_, device_, n, 1).head;
  const int64_t layers = model_.num_layers;
  const bool mixed = model_.moe.enabled() && (model_.moe.first_dense_layers > 0 || model_.moe.sparse_step > 1);
  ModelSpec heavy = model_;
  if (mixed) {
    heavy.moe.first_dense_layers = 0;
    heavy.moe.sparse_step = 1;
  }
  const Measured a = measure(heavy, 1, replica_, device_, 1, n);
  if (layers == 1) return a.body;
  const Measured b = measure(heavy, 2, replica_, device_, 1, n);
  const double per_heavy = b.body - a.body;
  if (!mixed) return a.body + static_cast<double>(layers - 1) * per_heavy;
  // DeepSeek's leading dense layers, Qwen2-MoE's interleaved ones: a graph of two dense layers.
  ModelSpec dense = model_;
  dense.moe.first_dense_layers = 2;
  const Measured d = measure(dense, 2, replica_, device_, 1, n);
  const double base = a.body - per_heavy;
  const double per_dense = (d.body - base) / 2.0;
  const int64_t moe_layers = model_.moe.moe_layer_count(layers);
  return base + static_cast<double>(moe_layers) * per_heavy + static_cast<double>(layers - moe_layers) * per_dense;
}

double IterationModel::interpolate(std::map<int64_t, double>& cache, int64_t n, bool head) {
  auto value = [&](int64_t x) {
    auto it = cache.find(x);
    if (it != cache.end()) return it->second;
    const double v = sample_tokens(x, head);
    cache.emplace(x, v);
    return v;
  };
  if (n <= kExactBelow) return value(n);
  const auto [lo, hi] = grid_bracket(n);
  const double vl = value(lo);
  if (lo == n) return vl;
  const double vh = value(hi);
  return vl + (vh - vl) * static_cast<double>(n - lo) / static_cast<double>(hi - lo);
}

double IterationModel::body_time(int64_t tokens) {
  if (tokens <= 0) return 0.0;
  return interpolate(body_, tokens, false);
}

double IterationModel::head_time(int64_t sequences) {
  if (sequences <= 0) return 0.0;
  return interpolate(head_, sequences, true);
}

double IterationModel::prefill_attention_time(int64_t new_tokens, int64_t cached_tokens) {
  if (new_tokens <= 0) return 0.0;
  const auto key = std::make_tuple(int64_t{1}, new_tokens, cached_tokens);
  auto it = prefill_attention_.find(key);
  if (it != prefill_attention_.end()) return it->second;
  const AttentionTemplate& t = *prefill_template_;
  const double v =
      static_cast<double>(t.per_layer) * attention_cost(t, 1, new_tokens, cached_tokens + new_tokens, cached_tokens);
  prefill_attention_.emplace(key, v);
  return v;
}

double IterationModel::decode_attention_time(int64_t sequences, int64_t context_tokens) {
  return attention_for(*decode_template_, sequences, context_tokens, 1);
}

double IterationModel::verify_attention_time(int64_t sequences, int64_t context_tokens, int64_t queries) {
  return attention_for(*decode_template_, sequences, context_tokens, queries);
}

double IterationModel::attention_for(const AttentionTemplate& t, int64_t sequences, int64_t context_tokens,
                                     int64_t queries) {
  if (sequences <= 0) return 0.0;
  // One kernel over the batch, at the mean context (its K/V reads are the batch's whole cache);
  // the mean on the token grid, linear between grid points. `queries` new tokens per sequence
  // attend to the context and, causally, to each other.
  const double mean = static_cast<double>(context_tokens) / static_cast<double>(sequences) + static_cast<double>(queries);
  auto at = [&](int64_t kv) {
    const auto key = std::make_tuple(sequences, kv, queries - 1);
    auto it = decode_attention_.find(key);
    if (it != decode_attention_.end()) return it->second;
    const double v = static_cast<double>(t.per_layer) * attention_cost(t, sequences, queries, kv, kv - queries);
    decode_attention_.emplace(key, v);
    return v;
  };
  const auto lo_kv = static_cast<int64_t>(std::floor(mean));
  int64_t lo = lo_kv, hi = lo_kv + 1;
  if (lo_kv > kExactBelow) std::tie(lo, hi) = grid_bracket(lo_kv);
  const double vl = at(lo);
  const double vh = at(hi);
  return vl + (vh - vl) * (mean - static_cast<double>(lo)) / static_cast<double>(hi - lo);
}

StepTime IterationModel::step_time(const StepBatch& batch) {
  StepTime t;
  const SpeculativeConfig& sp = replica_.speculative;
  // Speculative decoding verifies k + 1 tokens of each decoding sequence and samples each.
  const int64_t queries = sp.enabled() ? sp.tokens + 1 : 1;
  int64_t prefill_tokens = 0;
  for (const auto& [n, c] : batch.prefill) {
    prefill_tokens += n;
    t.attention_s += prefill_attention_time(n, c);
  }
  const int64_t tokens = prefill_tokens + batch.decode_seqs * queries;
  t.attention_s += queries > 1 ? verify_attention_time(batch.decode_seqs, batch.decode_context, queries)
                               : decode_attention_time(batch.decode_seqs, batch.decode_context);
  t.body_s = body_time(tokens);
  const int64_t sampling = (batch.sampling >= 0 ? batch.sampling
                                                : static_cast<int64_t>(batch.prefill.size()) + batch.decode_seqs) +
                           batch.decode_seqs * (queries - 1);
  t.head_s = head_time(sampling);
  if (sp.enabled()) t.draft_s = draft_time(batch, prefill_tokens);
  if (batch.host_loaded_tokens > 0) {
    // Each GPU loads its share of the blocks' K and V over its own host link.
    t.host_load_s = static_cast<double>(batch.host_loaded_tokens) * memory_.kv_bytes_per_token /
                    replica_.host_link_bytes_per_s;
  }
  if (replica_.pp > 1 && tokens > 0) {
    // The step's hidden states pass pp - 1 stage boundaries (a send each, one GPU to the next).
    CollectiveQuery q;
    q.kind = CollectiveKind::send_recv;
    q.bytes = static_cast<double>(tokens * model_.hidden_size * size_bytes(model_.activation_dtype)) /
              static_cast<double>(replica_.tp);
    q.ranks = 2;
    t.pipeline_s = static_cast<double>(replica_.pp - 1) * estimate_collective(q, *replica_.system).time_s;
  }
  return t;
}

double IterationModel::draft_time(const StepBatch& batch, int64_t prefill_tokens) {
  const SpeculativeConfig& sp = replica_.speculative;
  const auto k = static_cast<double>(sp.tokens);
  const int64_t b = batch.decode_seqs;
  if (draft_) {
    // The draft prefills the step's prompt chunks and decodes k tokens of each sequence.
    double t = 0.0;
    if (!batch.prefill.empty()) t += draft_->step_time({batch.prefill, 0, 0, 0}).total_s();
    if (b > 0) t += k * draft_->step_time({{}, b, batch.decode_context, b}).total_s();
    return t;
  }
  // A head: one layer of the body (its share of the replica's layers) over the prompt tokens and,
  // k times, over the decoding sequences with their one layer of attention and the LM head.
  const auto layers = static_cast<double>(model_.num_layers);
  double t = prefill_tokens > 0 ? body_time(prefill_tokens) / layers : 0.0;
  if (b > 0) t += k * (body_time(b) / layers + decode_attention_time(b, batch.decode_context) / layers + head_time(b));
  return t;
}

}  // namespace accelsim
