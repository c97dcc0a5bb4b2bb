// LLM serving: a discrete-event simulation of replicas running a batching scheduler over a paged
// KV cache, with iteration times from the cost model.
//
//   IterationModel costs(replica);                       // profiles the model on the device once
//   Workload w = generate_workload({.requests = 1000, .qps = 10, ...});
//   ServeResult r = simulate_serving(costs, w, ServeConfig{});
//   r.ttft.p99, r.output_tokens_per_s, r.goodput_requests_per_s ...
//
// Iteration time. One engine step runs a mixed batch: prefill chunks (new tokens of a sequence
// over the tokens already in its cache) and decode sequences (one token each over their context).
// Its time is split the way the step's kernels split:
//   body(T)       every op that runs on the batch's T tokens together (projections, FFN or MoE
//                 experts, norms, RoPE, KV writes, embedding, TP collectives), from the model
//                 builder's graph of T tokens simulated on the device;
//   head(S)       the LM head on the S sequences that sample a token;
//   attention     per prefill chunk (n new tokens after c cached ones, causal), plus one
//                 decode-attention kernel over the decode sequences' whole context (FlashAttention
//                 varlen / paged decode kernels read each sequence's cache once).
// body and head are linear in the layers (graphs of one and two layers, an MoE model's dense and
// MoE layers told apart, as the training stage profile does) and are memoized on a grid of
// token counts (exact up to 64, then 16 points per doubling, linear between: the GEMM wave
// steps between grid points are not resolved); attention nodes are costed by the op catalogue on
// the builder's own attention shapes, memoized per shape. A pipeline-parallel replica runs pp
// virtual engines (as vLLM does: pp batches in flight), each taking the whole pipeline's time plus
// the activation sends between stages, with 1/pp of the KV blocks.
//
// KV capacity per GPU: gpu_memory_utilization x device memory (vLLM's default 0.9) minus the
// runtime reserve, the rank's weights and the activation peak of the largest step (a prefill of
// max_batched_tokens), as vLLM's profiling run sizes its cache; divided into blocks of
// block_size tokens.
//
// Schedulers (per engine, each iteration; requests admitted in FCFS or shortest-prompt-first
// order; running sequences keep arrival order):
//   static   TensorRT-LLM's gptSession / FasterTransformer: a batch of up to max_seqs waiting
//            requests is formed when the engine is empty, prefilled together, then decoded until
//            its longest output is done (finished rows keep their slot); each request's full
//            prompt + output is reserved when the batch forms.
//   orca     Orca (Yu et al., OSDI'22): iteration-level batching; each iteration decodes every
//            running sequence and admits whole prompts into the same batch (up to max_seqs and
//            max_batched_tokens); KV reserved for each request's prompt + output at admission
//            (no paging, no preemption).
//   vllm     vLLM's default scheduler (Kwon et al., SOSP'23; vllm/core/scheduler.py, V0): an
//            iteration is either prefills (waiting requests admitted while max_seqs,
//            max_batched_tokens and free blocks above the watermark allow) or, when none can be
//            admitted, one decode step of every running sequence; blocks allocated as tokens are
//            written.
//   sarathi  Sarathi-Serve (Agrawal et al., OSDI'24) chunked prefill, as vLLM V1 schedules:
//            every running decode first, then prefill chunks of the running then waiting
//            requests filling a token budget of `chunk` tokens.
// Preemption (vllm, sarathi): when a step needs a block and none is free, the running sequence
// that arrived last is preempted (its blocks freed, it goes back to the front of the waiting
// queue and later recomputes its prompt and the tokens generated so far), repeatedly, until the
// step fits; if the sequence needing the block is itself the last, it is the one preempted.
// Prefix caching (optional): requests carrying hashes of their prompt's blocks reuse the longest
// cached run of leading blocks; finished prompts' blocks stay cached until evicted (least
// recently used first, only blocks no running request uses, before any preemption).
// Prefill/decode disaggregation (optional): prefill engines run prompts only (chunked, token
// budget `chunk`), then the KV cache moves to the decode engine with the fewest outstanding
// requests at kv_transfer_bytes_per_s; decode engines run decode steps only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/collective.h"
#include "accelsim/device.h"
#include "accelsim/model.h"
#include "accelsim/simulate.h"

namespace accelsim {

// ---- replica and iteration cost ----------------------------------------------------------------

// Speculative decoding: each decode step a drafter proposes `tokens` (k) tokens per sequence, one
// after the other, and the target model verifies them and the token after them in one pass of
// k + 1 query tokens per sequence over its cache (Leviathan et al., "Fast Inference from
// Transformers via Speculative Decoding", ICML 2023). Each proposed token is accepted with
// probability `acceptance` (alpha) given the ones before it, so a step yields on average
//   E = (1 - alpha^(k+1)) / (1 - alpha)          (k + 1 when alpha = 1)
// tokens per sequence (their eq. 1). The drafter:
//   draft_model  a smaller model (`draft`), run k decode steps on the same GPUs; it prefills the
//                prompts too; its weights and KV cache share the GPUs' memory;
//   eagle        an EAGLE head (Li et al., ICML 2024): one decoder layer of the target's shape and
//                a 2h x h projection over the target's hidden states, with the target's LM head;
//   mtp          a model's multi-token-prediction module (DeepSeek-V3, arXiv 2412.19437 sec. 2.2:
//                one transformer block and a 2h x h projection sharing the embedding and head;
//                ModelSpec::mtp_layers > 0), run k times.
// A head (eagle, mtp) costs one target layer (the replica's body over its layers) and the LM head
// per proposed token, and holds one layer's weights and KV cache more. The engine allocates
// cache slots for the k + 1 tokens of a step before it runs (vLLM's lookahead slots). Each
// sequence's accepted tokens follow the mean: its share E accumulates and whole tokens are
// emitted as it passes them (the spread of accepted lengths is not simulated).
enum class SpeculativeKind : uint8_t { none, draft_model, eagle, mtp };
std::string_view speculative_name(SpeculativeKind kind);

struct SpeculativeConfig {
  SpeculativeKind kind = SpeculativeKind::none;
  int64_t tokens = 0;       // k, proposed per step
  double acceptance = 0.0;  // alpha, in [0, 1]
  std::optional<ModelSpec> draft;  // draft_model only
  bool enabled() const { return kind != SpeculativeKind::none; }
  // E: tokens a sequence gains per decode step (1 without speculation).
  double expected_tokens() const;
};

struct ReplicaConfig {
  int64_t tp = 1;  // tensor-parallel degree of one replica
  int64_t pp = 1;  // pipeline stages of one replica (virtual engines)
  // Attention data parallelism with expert parallelism (an MoE model, tp = pp = 1): the replica's
  // dp_attention GPUs each run their own batch through attention with their own KV cache (an
  // engine each), and the MoE layers split the experts over all of them, the routed rows sent to
  // their expert's GPU and back by all-to-all (vLLM --data-parallel-size D
  // --enable-expert-parallel; SGLang --enable-dp-attention). The engines step independently,
  // each at its own batch (the lockstep of their MoE layers is not simulated; the build's
  // expert_imbalance stands for the busiest rank). 1: none.
  int64_t dp_attention = 1;
  // The node the replica's GPUs sit in; needed for tp > 1 or pp > 1 (collectives, sends).
  std::optional<SystemSpec> system;
  // fp8_gemms, moe_impl, expert_imbalance are honoured; phase, shapes and parallel degrees are
  // set per step.
  BuildOptions build;
  // Cost model and cost options (serving engines launch from CUDA graphs or a C++ runtime:
  // callers usually set cost.cuda_graphs).
  SimulateOptions simulate;
  double gpu_memory_utilization = 0.9;  // vLLM's default
  int64_t block_size = 16;              // tokens per KV block (vLLM's default)
  int64_t max_batched_tokens = 8192;    // the largest step: sizes the activation reserve
  // How the decode attention kernel reads a grouped-query (GQA/MQA) model's KV cache. false: each
  // KV head once for its group of query heads (TensorRT-LLM's XQA, FlashInfer, FlashAttention's
  // GQA packing); true: once per query head, one thread block per (sequence, query head) reading
  // its KV head's keys and values (TensorRT-LLM's masked multi-head attention before XQA, vLLM's
  // paged_attention v1/v2 kernels): a group of g query heads reads the cache g times.
  bool decode_kv_per_query_head = false;
  // The engine all-reduces its TP activations with its own one-shot kernel up to 1 MiB (vLLM's
  // and SGLang's custom all-reduce over peer memory) rather than the collective library:
  // kCustomAllReduce* (serve/iteration.cc) on the replica's system.
  bool custom_allreduce = false;
  SpeculativeConfig speculative;
  // KV-cache offload to host memory (vLLM's CPU offloading connector, LMCache, SGLang's HiCache):
  // prefix-cache blocks evicted from the GPU are kept in host memory, this many bytes per GPU
  // (least recently used dropped first), and a later request whose prompt continues into them
  // loads them back over the host link, host_link_bytes_per_s per GPU, before its prefill runs
  // (the step waits for the load; the writes to host overlap the steps). 0: no host tier.
  double host_kv_bytes = 0.0;
  double host_link_bytes_per_s = 0.0;
};

// One engine step's work.
struct StepBatch {
  // Prefill chunks: {new tokens, tokens of the same sequence already cached}.
  std::vector<std::pair<int64_t, int64_t>> prefill;
  int64_t decode_seqs = 0;
  int64_t decode_context = 0;  // tokens cached over all decode sequences, before this step
  int64_t sampling = -1;       // sequences sampling a token (LM head rows); -1: every one
  int64_t host_loaded_tokens = 0;  // prefix tokens loaded from host memory before the step
};

struct StepTime {
  double body_s = 0.0;
  double head_s = 0.0;
  double attention_s = 0.0;
  double pipeline_s = 0.0;  // activation sends between pipeline stages
  double draft_s = 0.0;     // speculative decoding: the drafter's passes
  double host_load_s = 0.0; // prefix blocks loaded from host memory (ReplicaConfig::host_kv_bytes)
  double total_s() const { return body_s + head_s + attention_s + pipeline_s + draft_s + host_load_s; }
};

// Memory of one GPU of a replica.
struct ReplicaMemory {
  double capacity_bytes = 0.0;
  double usable_bytes = 0.0;      // gpu_memory_utilization x capacity - runtime reserve
  double weight_bytes = 0.0;      // this rank's parameters
  double activation_bytes = 0.0;  // activation peak of the largest step
  double draft_weight_bytes = 0.0;  // speculative decoding: the drafter's share of weight_bytes
  double kv_bytes = 0.0;          // what is left for the KV cache
  double kv_bytes_per_token = 0.0;  // this rank's K and V of one token, all its layers (and the drafter's)
  int64_t kv_blocks = 0;          // per engine (a pipeline's virtual engines share the GPU's)
  int64_t host_kv_blocks = 0;     // per engine, in host memory (ReplicaConfig::host_kv_bytes)
};

class IterationModel {
 public:
  // Profiles nothing yet: times are computed on first use and memoized. Throws ConfigError for an
  // invalid model, device or layout (TP not dividing heads, tp > 1 without a system, ...).
  IterationModel(const ModelSpec& model, const DeviceSpec& device, const ReplicaConfig& replica);
  ~IterationModel();
  IterationModel(const IterationModel&) = delete;
  IterationModel& operator=(const IterationModel&) = delete;

  StepTime step_time(const StepBatch& batch);
  double body_time(int64_t tokens);        // all layers, this replica
  double head_time(int64_t sequences);
  double prefill_attention_time(int64_t new_tokens, int64_t cached_tokens);  // all layers
  double decode_attention_time(int64_t sequences, int64_t context_tokens);   // all layers
  // Speculative verification: `queries` tokens per sequence over its context, one kernel.
  double verify_attention_time(int64_t sequences, int64_t context_tokens, int64_t queries);
  const ReplicaMemory& memory() const { return memory_; }
  const ModelSpec& model() const { return model_; }
  const DeviceSpec& device() const { return device_; }
  const ReplicaConfig& replica() const { return replica_; }
  int64_t gpus() const { return replica_.tp * replica_.pp * replica_.dp_attention; }
  // The GPUs one engine's KV cache spans (a pipeline's stages, a TP group; one DP rank's).
  int64_t gpus_per_engine() const { return replica_.tp * replica_.pp; }
  // Graphs built and simulated so far (for the benchmarks).
  int64_t profiles_built() const { return profiles_built_; }

 private:
  struct AttentionTemplate;
  double interpolate(std::map<int64_t, double>& cache, int64_t n, bool head);
  double sample_tokens(int64_t n, bool head);
  double attention_cost(const AttentionTemplate& t, int64_t batch, int64_t sq, int64_t skv, int64_t offset);
  void init_templates();
  void init_speculative();

  ModelSpec model_;
  DeviceSpec device_;
  ReplicaConfig replica_;
  ReplicaMemory memory_;
  std::map<int64_t, double> body_, head_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> prefill_attention_, decode_attention_;
  std::unique_ptr<AttentionTemplate> prefill_template_, decode_template_;
  std::unique_ptr<CostModel> cost_model_;
  std::unique_ptr<IterationModel> draft_;  // speculative decoding with a draft model
  double draft_time(const StepBatch& batch, int64_t prefill_tokens);
  double attention_for(const AttentionTemplate& t, int64_t sequences, int64_t context_tokens, int64_t queries);
  int64_t profiles_built_ = 0;
};

// ---- workload ----------------------------------------------------------------------------------

enum class ArrivalProcess : uint8_t { poisson, gamma, constant };
enum class LengthDistribution : uint8_t { fixed, uniform, lognormal };

struct LengthSpec {
  LengthDistribution kind = LengthDistribution::fixed;
  int64_t value = 0;           // fixed
  int64_t min = 1, max = 0;    // uniform: [min, max]; lognormal: clipped to [min, max]
  double mu = 0.0, sigma = 0.0;  // lognormal: of the natural log of the length
};

struct WorkloadSpec {
  int64_t requests = 1000;
  double qps = 1.0;  // mean arrival rate; <= 0 or infinite: every request arrives at t = 0
  ArrivalProcess arrival = ArrivalProcess::poisson;
  double burstiness = 1.0;  // gamma: coefficient of variation of the gaps (1: Poisson)
  LengthSpec input;
  LengthSpec output;
  uint64_t seed = 0;
  // A prefix every prompt shares (a system prompt or few-shot examples): this fraction of each
  // prompt's tokens, cut to whole blocks of kSharedPrefixBlockTokens, carries the same block
  // hashes in every request (the rest unique), so an engine's prefix cache serves it after the
  // first request: the hit rate a trace shows (`serve --workload TRACE --prefix-caching`
  // reports it) as a generated workload's. 0: no prefix hashes. In [0, 1).
  double shared_prefix = 0.0;
};

// The tokens of one prefix hash of a generated shared prefix: vLLM's default block (its prefix
// cache hashes whole blocks).
inline constexpr int64_t kSharedPrefixBlockTokens = 16;

struct Request {
  double arrival_s = 0.0;
  int32_t input_len = 0;
  int32_t output_len = 0;
  int64_t hash_begin = 0;  // this request's prompt-block hashes: Workload::hashes[begin, end)
  int64_t hash_end = 0;
};

struct Workload {
  std::vector<Request> requests;  // by arrival time
  std::vector<int64_t> hashes;
  int64_t hash_block_tokens = 0;  // prompt tokens per hash (0: no prefix hashes)
};

// REQUIRES: requests >= 1, lengths >= 1 (uniform: 1 <= min <= max; lognormal: sigma >= 0,
// 1 <= min <= max), burstiness > 0. Deterministic for a seed (the generator and the samplers are
// this library's own, not the standard library's implementation-defined distributions).
Workload generate_workload(const WorkloadSpec& spec);

// A workload from per-request arrays (a trace). arrival_s empty: arrivals from `spec`'s process
// (its qps, arrival and seed); otherwise times in seconds, non-decreasing, and with
// rescale_to_qps scaled so that their mean rate, (requests - 1) / last arrival, is spec.qps. hash_offsets: empty,
// or requests + 1 offsets into `hashes`. Throws ConfigError naming the first bad request.
Workload workload_from_arrays(const std::vector<double>& arrival_s, const std::vector<int64_t>& input_len,
                              const std::vector<int64_t>& output_len, const std::vector<int64_t>& hashes,
                              const std::vector<int64_t>& hash_offsets, int64_t hash_block_tokens,
                              const WorkloadSpec& spec, bool rescale_to_qps = false);

// A log-normal fitted to lengths by maximum likelihood (mean and standard deviation of the
// logs), clipped to the samples' range. REQUIRES: at least one sample, all >= 1.
LengthSpec fit_lognormal(const std::vector<int64_t>& lengths);

// ---- serving -----------------------------------------------------------------------------------

enum class SchedulerKind : uint8_t { static_batch, orca, vllm, sarathi };
enum class AdmissionOrder : uint8_t { fcfs, sjf };
enum class RouterKind : uint8_t { round_robin, least_outstanding };

struct SchedulerConfig {
  SchedulerKind kind = SchedulerKind::vllm;
  AdmissionOrder order = AdmissionOrder::fcfs;
  int64_t max_seqs = 256;             // vLLM max_num_seqs
  int64_t max_batched_tokens = 8192;  // vLLM max_num_batched_tokens (vllm, orca)
  int64_t chunk = 512;                // sarathi / disaggregated prefill: tokens per step
  double watermark = 0.01;            // vLLM: blocks kept free when admitting
  bool prefix_caching = false;
};

struct ServeConfig {
  int64_t replicas = 1;
  RouterKind router = RouterKind::round_robin;
  SchedulerConfig scheduler;
  // Disaggregation: > 0: this many of the replicas run prefill only, the others decode only.
  int64_t prefill_replicas = 0;
  // Per replica; 0: the replica system's NICs (scale-out bandwidth x efficiency x NICs per GPU x
  // the replica's GPUs).
  double kv_transfer_bytes_per_s = 0.0;
  // Goodput: requests meeting both (infinity: no target).
  double slo_ttft_s = 0.0;  // 0: none
  double slo_tpot_s = 0.0;  // 0: none
  double price_usd_per_gpu_hour = 0.0;  // 0: unknown (no cost figures)
  int64_t record_steps = 0;     // keep the first this many steps (a trace)
  int64_t timeline_bins = 200;  // KV utilization and queue length over time, in at most this many bins
};

struct Percentiles {
  double mean = 0.0, p50 = 0.0, p90 = 0.0, p99 = 0.0, max = 0.0;
};

// Every figure of `p` by name, f("mean", p.mean), ...: the check of simulate_serving()'s result
// walks these lists (this and those below), so a new figure goes here too.
static_assert(sizeof(Percentiles) == 5 * sizeof(double), "a new figure of Percentiles goes into for_each_figure");
template <typename F>
void for_each_figure(const Percentiles& p, F&& f) {
  f("mean", p.mean);
  f("p50", p.p50);
  f("p90", p.p90);
  f("p99", p.p99);
  f("max", p.max);
}

struct StepRecord {
  int32_t engine = 0;
  double start_s = 0.0, end_s = 0.0;
  int32_t prefill_tokens = 0, prefill_seqs = 0, decode_seqs = 0;
  double kv_utilization = 0.0;  // after the step
};

template <typename F>
void for_each_figure(const StepRecord& s, F&& f) {
  f("start_s", s.start_s);
  f("end_s", s.end_s);
  f("kv_utilization", s.kv_utilization);
}

// One bin of the run's timeline, (start_s, t_s]: the bins tile the run from the first arrival to
// the last event. Each figure is over all engines: its time-weighted mean over the bin and the most
// it reached in the bin (a state that lasts no time counts towards the most, as it does towards
// ServeResult's waiting_max and kv_utilization_max, so the bins' most is the run's most).
struct TimelinePoint {
  double start_s = 0.0;             // bin start
  double t_s = 0.0;                 // bin end
  double kv_utilization = 0.0;      // KV cache used, 0 to 1
  double waiting = 0.0;             // requests queued
  double running = 0.0;             // requests in a batch
  double kv_utilization_max = 0.0;  // the most of each, in the bin
  double waiting_max = 0.0;
  double running_max = 0.0;
};

static_assert(sizeof(TimelinePoint) == 8 * sizeof(double), "a new figure of TimelinePoint goes into for_each_figure");
template <typename F>
void for_each_figure(const TimelinePoint& t, F&& f) {
  f("start_s", t.start_s);
  f("t_s", t.t_s);
  f("kv_utilization", t.kv_utilization);
  f("waiting", t.waiting);
  f("running", t.running);
  f("kv_utilization_max", t.kv_utilization_max);
  f("waiting_max", t.waiting_max);
  f("running_max", t.running_max);
}

struct ServeResult {
  int64_t requests = 0;
  int64_t completed = 0;
  int64_t rejected = 0;  // prompt + output larger than an engine's whole KV cache (less the watermark)
  double makespan_s = 0.0;  // first arrival to last completion
  int64_t gpus = 0;
  Percentiles ttft, tpot, itl, e2e, queueing;  // seconds; itl over every gap between tokens
  double requests_per_s = 0.0;
  double output_tokens_per_s = 0.0;
  double output_tokens_per_s_per_gpu = 0.0;
  double total_tokens_per_s = 0.0;  // prompt + output
  double goodput_requests_per_s = 0.0;
  double slo_attainment = 0.0;  // fraction of completed requests meeting the SLOs
  int64_t preemptions = 0;
  int64_t steps = 0;
  double prefix_hit_rate = 0.0;  // prompt tokens served from the prefix cache
  double mean_batch_size = 0.0;  // sequences per step
  double kv_utilization_mean = 0.0, kv_utilization_max = 0.0;  // time-weighted over engines
  double waiting_mean = 0.0, waiting_max = 0.0;  // time-weighted
  double busy_fraction = 0.0;  // engines' time stepping over the makespan
  double cost_per_million_output_tokens_usd = 0.0;  // 0: price unknown
  double cost_per_million_total_tokens_usd = 0.0;
  std::vector<TimelinePoint> timeline;
  std::vector<StepRecord> steps_recorded;
  // Per request, in workload order (NaN when not completed).
  std::vector<double> request_ttft_s, request_e2e_s;
};

// Every figure of `r` by name: f(name, value) with value a double, a Percentiles, a vector of
// TimelinePoint or StepRecord, or a vector of per-request times (NaN: not completed).
template <typename F>
void for_each_figure(const ServeResult& r, F&& f) {
  f("makespan_s", r.makespan_s);
  f("ttft", r.ttft);
  f("tpot", r.tpot);
  f("itl", r.itl);
  f("e2e", r.e2e);
  f("queueing", r.queueing);
  f("requests_per_s", r.requests_per_s);
  f("output_tokens_per_s", r.output_tokens_per_s);
  f("output_tokens_per_s_per_gpu", r.output_tokens_per_s_per_gpu);
  f("total_tokens_per_s", r.total_tokens_per_s);
  f("goodput_requests_per_s", r.goodput_requests_per_s);
  f("slo_attainment", r.slo_attainment);
  f("prefix_hit_rate", r.prefix_hit_rate);
  f("mean_batch_size", r.mean_batch_size);
  f("kv_utilization_mean", r.kv_utilization_mean);
  f("kv_utilization_max", r.kv_utilization_max);
  f("waiting_mean", r.waiting_mean);
  f("waiting_max", r.waiting_max);
  f("busy_fraction", r.busy_fraction);
  f("cost_per_million_output_tokens_usd", r.cost_per_million_output_tokens_usd);
  f("cost_per_million_total_tokens_usd", r.cost_per_million_total_tokens_usd);
  f("timeline", r.timeline);
  f("steps_recorded", r.steps_recorded);
  f("request_ttft_s", r.request_ttft_s);
  f("request_e2e_s", r.request_e2e_s);
}

// The bandwidth a disaggregated replica's KV cache moves at when ServeConfig gives none: each GPU
// of the replica sends its share over its NICs (the system's scale-out bandwidth x efficiency x
// NICs per GPU x the replica's GPUs). Throws ConfigError when the replica has no system.
double default_kv_transfer_bytes_per_s(const IterationModel& costs);

// REQUIRES: replicas >= 1, max_seqs >= 1, max_batched_tokens >= 1, chunk >= 1, 0 <= watermark < 1;
// prefill_replicas < replicas; a finite, non-negative KV transfer bandwidth and price; SLOs not
// negative. Throws ConfigError otherwise. Every figure of the result is finite and not negative
// (a request's times are NaN only when it did not complete), else PhysicalRangeError
// (physical_range.h). `progress(done, total)` is called with completed requests now and then.
ServeResult simulate_serving(IterationModel& costs, const Workload& workload, const ServeConfig& config,
                             const std::function<void(int64_t, int64_t)>& progress = {});

// The highest arrival rate whose run meets the SLOs at the 99th percentile (p99 TTFT <=
// slo_ttft_s, p99 TPOT <= slo_tpot_s; at least one must be set) with no rejections: a bisection
// on qps between a rate the replicas sustain and one they do not, `spec.requests` requests per
// trial, to 2% relative. 0 when even a trickle misses the SLOs.
struct MaxQpsResult {
  double qps = 0.0;
  ServeResult at_max;  // the run at that rate
  int64_t trials = 0;
  // The SLOs held with every request arriving at once (at_max is that run): no rate breaks them,
  // and qps, 2^30 x the first rate tried, is a lower bound.
  bool unbounded = false;
  double qps_per_replica = 0.0;
  double qps_per_gpu = 0.0;
};

// The search's own figures by name (the run at the maximum: for_each_figure(ServeResult)).
template <typename F>
void for_each_figure(const MaxQpsResult& m, F&& f) {
  f("qps", m.qps);
  f("qps_per_replica", m.qps_per_replica);
  f("qps_per_gpu", m.qps_per_gpu);
}
MaxQpsResult find_max_qps(IterationModel& costs, const WorkloadSpec& spec, const ServeConfig& config,
                          const std::function<void(int64_t, int64_t)>& progress = {});

// Replicas of the searched kind that serve `qps` within the SLOs (each at most qps_per_replica;
// 0 when none meets them). REQUIRES: qps > 0.
int64_t replicas_for_rate(const MaxQpsResult& found, double qps);

}  // namespace accelsim
