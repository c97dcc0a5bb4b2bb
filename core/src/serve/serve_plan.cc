// plan_serving(): the serving planner (serve_plan.h): every layout's memory and latency bounds,
// the analytic screen, the simulation of the survivors, the ranking, the whole-deployment check
// and the Pareto front.
#include "accelsim/serve_plan.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/physical_range.h"

#include "../common/parallel_for.h"
#include "serve_engine.h"

namespace accelsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The screen (step 3 of serve_plan.h): a layout goes on to the simulation when its estimated GPUs
// (price; tokens/s per GPU for the throughput objective) are within this factor of the best
// estimate, or when it is among the kScreenKeep best estimates. The estimate is a steady-state
// bound without queueing; on the test case of tests/test_serve_plan.py the simulated best lies
// within 1.2x of the best estimate.
constexpr double kScreenFactor = 1.5;
constexpr size_t kScreenKeep = 24;

// Decode batches the analytic screen tries: powers of two and the layout's own limit.
constexpr std::array<int64_t, 12> kBatchGrid = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};

// The whole deployment's check (step 5) simulates this many requests per unit at least, and at
// most kVerifyMaxRequests in all.
constexpr int64_t kVerifyRequestsPerUnit = 200;
constexpr int64_t kVerifyMaxRequests = 20000;

std::string fmt(double v, int digits = 3) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

std::string ms(double seconds) { return fmt(seconds * 1e3, 4) + " ms"; }

// The workload's lengths, from the requests it generates.
struct Lengths {
  double mean_in = 0.0, mean_out = 0.0;
  double shared = 0.0;  // WorkloadSpec::shared_prefix
  // The tokens of a prompt of `n` a warm prefix cache holds (its shared whole blocks).
  int64_t cached(int64_t n) const {
    const auto shared_tokens = static_cast<int64_t>(std::floor(shared * static_cast<double>(n)));
    return shared_tokens / kSharedPrefixBlockTokens * kSharedPrefixBlockTokens;
  }
  int64_t p99_in = 0, median_in = 0, longest = 0;  // nearest rank, as the serving metrics take them
};

Lengths lengths_of(const WorkloadSpec& spec) {
  WorkloadSpec s = spec;
  s.qps = 1.0;
  const Workload w = generate_workload(s);
  std::vector<double> in, out;
  Lengths l;
  for (const Request& r : w.requests) {
    in.push_back(r.input_len);
    out.push_back(r.output_len);
    l.longest = std::max<int64_t>(l.longest, static_cast<int64_t>(r.input_len) + r.output_len);
  }
  const Percentiles prompts = serve_detail::summarize(std::move(in));
  l.mean_in = prompts.mean;
  l.mean_out = serve_detail::summarize(std::move(out)).mean;
  l.p99_in = static_cast<int64_t>(prompts.p99);
  l.median_in = static_cast<int64_t>(prompts.p50);
  l.shared = spec.shared_prefix;
  return l;
}

// The layouts sharing one IterationModel: an engine, a quantization, a TP x PP replica and a token
// budget (the largest step, which sizes the activation reserve as the engine's profiling run
// does).
struct Group {
  int64_t engine = 0;
  ServeQuantization quantization = ServeQuantization::bf16;
  int64_t tp = 1, pp = 1;
  int64_t token_budget = 8192;
  bool speculative = false;
  int64_t dp_attention = 1;
  std::vector<size_t> layouts;  // indices into the result's layouts
  std::unique_ptr<IterationModel> costs;
};

bool chunks_prompts(const ServeLayout& l, SchedulerKind kind) { return l.disaggregated() || kind == SchedulerKind::sarathi; }

ServeConfig unit_config(const ServePlanRequest& q, const ServePlanEngine& e, const ServeLayout& l) {
  ServeConfig c;
  c.replicas = l.unit_replicas();
  c.prefill_replicas = l.prefill_replicas;
  c.scheduler = e.scheduler;
  c.scheduler.max_seqs = l.max_seqs;
  c.scheduler.max_batched_tokens = l.token_budget;
  c.scheduler.chunk = l.token_budget;
  if (l.disaggregated()) c.scheduler.kind = SchedulerKind::sarathi;
  // A shared prefix is served from the paged engines' prefix cache (vLLM's and SGLang's); the
  // whole-request schedulers keep none.
  const bool paged = c.scheduler.kind == SchedulerKind::vllm || c.scheduler.kind == SchedulerKind::sarathi;
  c.scheduler.prefix_caching = q.workload.shared_prefix > 0 && paged;
  c.slo_ttft_s = q.slo_ttft_s;
  c.slo_tpot_s = q.slo_tpot_s;
  c.price_usd_per_gpu_hour = e.device.price_usd_per_hour;
  return c;
}

// Step 2: the TTFT and TPOT floors; step 3: the steady-state rate estimate per unit.
void bound_and_estimate(const ServePlanRequest& q, const Lengths& len, IterationModel& m, ServeLayoutResult& r) {
  const ServeLayout& l = r.layout;
  const SchedulerKind kind = l.disaggregated() ? SchedulerKind::sarathi : q.engines[static_cast<size_t>(l.engine)].scheduler.kind;
  const bool chunked = chunks_prompts(l, kind);
  // The p99 prompt's prefill with the engine to itself (past its shared prefix, which a warm
  // prefix cache holds, under prefix caching).
  const ServeConfig unit = unit_config(q, q.engines[static_cast<size_t>(l.engine)], l);
  auto cached = [&](int64_t prompt) { return unit.scheduler.prefix_caching ? len.cached(prompt) : int64_t{0}; };
  auto prefill_alone = [&](int64_t prompt) {
    if (!chunked) return m.step_time({{{prompt - cached(prompt), cached(prompt)}}, 0, 0, 1}).total_s();
    double t = 0.0;
    for (int64_t done = cached(prompt); done < prompt;) {
      const int64_t n = std::min(l.token_budget, prompt - done);
      t += m.step_time({{{n, done}}, 0, 0, done + n == prompt ? 1 : 0}).total_s();
      done += n;
    }
    return t;
  };
  r.ttft_floor_s = prefill_alone(len.p99_in);
  // A decode step gives a sequence at most ceil(E) tokens (serve.h, SpeculativeConfig).
  const double per_step = m.replica().speculative.expected_tokens();
  r.tpot_floor_s = m.step_time({{}, 1, len.median_in, 1}).total_s() / std::ceil(per_step);
  if (q.slo_ttft_s > 0 && r.ttft_floor_s > q.slo_ttft_s) {
    r.verdict = LayoutVerdict::misses_ttft;
    r.reason = "the p99 prompt (" + std::to_string(len.p99_in) + " tokens) takes " + ms(r.ttft_floor_s) +
               " to prefill with the engine to itself, over the " + ms(q.slo_ttft_s) + " TTFT target";
    return;
  }
  if (q.slo_tpot_s > 0 && r.tpot_floor_s > q.slo_tpot_s) {
    r.verdict = LayoutVerdict::misses_tpot;
    r.reason = "one sequence's decode step takes " + ms(r.tpot_floor_s) + ", over the " + ms(q.slo_tpot_s) + " TPOT target";
    return;
  }
  // The steady state. A decode step of B sequences at the mean context takes t_d(B); a request's
  // prefill takes T_pf of engine time; an engine at rate lambda spends lambda x T_pf of its time on
  // prefill, so its decode steps come every t_d(B) / (1 - lambda T_pf) and it completes
  //   lambda(B) = 1 / (T_pf + out x t_d(B) / B)
  // requests per second. A pipeline of pp stages runs pp such engines.
  const double mean_context = len.mean_in + 0.5 * len.mean_out;
  const double tokens = static_cast<double>(m.memory().kv_blocks * m.replica().block_size) * (1.0 - unit.scheduler.watermark);
  // Paged engines hold what is written so far; orca, static and disaggregated decode engines
  // reserve the whole request.
  const bool paged = (kind == SchedulerKind::vllm || kind == SchedulerKind::sarathi) && !l.disaggregated();
  const auto kv_batch = static_cast<int64_t>(tokens / (paged ? mean_context : len.mean_in + len.mean_out));
  const int64_t batch_limit = std::min(l.max_seqs, kv_batch);
  auto decode_step = [&](int64_t b) {
    return m.step_time({{}, b, static_cast<int64_t>(std::llround(static_cast<double>(b) * mean_context)), b}).total_s();
  };
  const auto prompt_in = std::max<int64_t>(1, static_cast<int64_t>(std::llround(len.mean_in)));
  const int64_t mean_cached = cached(prompt_in);
  const int64_t mean_in = std::max<int64_t>(1, prompt_in - mean_cached);
  // Engines per replica: a pipeline's virtual engines, the attention DP ranks.
  const auto pp = static_cast<double>(l.pp * l.dp_attention);
  double best = 0.0;
  if (!l.disaggregated()) {
    for (int64_t b0 : kBatchGrid) {
      const int64_t b = std::min(b0, batch_limit);
      if (b < 1) break;
      const double td = decode_step(b);
      double prefill;
      if (chunked) {
        // Prompt tokens ride along a step of b decodes, up to the budget: their marginal time.
        const int64_t room = std::max<int64_t>(1, l.token_budget - b);
        const double with = m.step_time({{{room, 0}}, b, static_cast<int64_t>(b * mean_context), b}).total_s();
        prefill = (with - td) / static_cast<double>(room) * static_cast<double>(mean_in);
      } else {
        prefill = m.step_time({{{mean_in, mean_cached}}, 0, 0, 1}).total_s();
      }
      const double rate = 1.0 / (prefill + len.mean_out * td / (static_cast<double>(b) * per_step));
      const double busy = rate * prefill;
      const double tpot = busy < 1.0 ? td / per_step / (1.0 - busy) : kInf;
      if (q.slo_tpot_s <= 0 || tpot <= q.slo_tpot_s) best = std::max(best, pp * rate);
      if (b == batch_limit) break;
    }
  } else {
    // Prefill engines stream prompts in chunks of the budget; decode engines decode at the
    // largest batch that meets the TPOT target.
    const double chunk_s = m.step_time({{{l.token_budget, 0}}, 0, 0, 1}).total_s();
    const double prefill_rate = static_cast<double>(l.prefill_replicas) * pp * static_cast<double>(l.token_budget) /
                                (chunk_s * static_cast<double>(mean_in));
    double decode_rate = 0.0;
    for (int64_t b0 : kBatchGrid) {
      const int64_t b = std::min(b0, batch_limit);
      if (b < 1) break;
      const double td = decode_step(b);
      if (q.slo_tpot_s <= 0 || td / per_step <= q.slo_tpot_s) {
        decode_rate = std::max(decode_rate, static_cast<double>(l.decode_replicas) * pp * static_cast<double>(b) *
                                                per_step / (len.mean_out * td));
      }
      if (b == batch_limit) break;
    }
    best = std::min(prefill_rate, decode_rate);
  }
  r.estimated_qps_per_unit = best;
}

// The screen's score of a layout: lower is better.
double estimate_score(const ServePlanRequest& q, const ServeLayoutResult& r, double price) {
  if (!(r.estimated_qps_per_unit > 0)) return kInf;
  const auto unit_gpus = static_cast<double>(r.layout.unit_gpus());
  if (q.objective == ServeObjective::throughput) return -r.estimated_qps_per_unit / unit_gpus;
  const double gpus = std::ceil(q.target_qps / r.estimated_qps_per_unit) * unit_gpus;
  return q.objective == ServeObjective::cost ? gpus * price : gpus;
}

// Step 4: one unit's highest rate within the SLOs, and what serving the target takes.
void simulate_layout(const ServePlanRequest& q, const Lengths& len, IterationModel& m, ServeLayoutResult& r,
                     std::atomic<int64_t>& trials) {
  const ServePlanEngine& e = q.engines[static_cast<size_t>(r.layout.engine)];
  const ServeConfig c = unit_config(q, e, r.layout);
  const MaxQpsResult found = find_max_qps(m, q.workload, c);
  trials += found.trials;
  r.simulated = true;
  r.qps_per_unit = found.qps;
  if (!(found.qps > 0)) {
    r.verdict = LayoutVerdict::misses_slo;
    r.reason = "no rate meets the SLOs in simulation (at the lowest rate tried: p99 TTFT " + ms(found.at_max.ttft.p99) +
               ", p99 TPOT " + ms(found.at_max.tpot.p99) + ")";
    return;
  }
  const ServeResult& at = found.at_max;
  r.units = q.target_qps > 0 ? static_cast<int64_t>(std::ceil(q.target_qps / found.qps * (1.0 - 1e-12))) : 1;
  r.gpus = checked_mul(r.units, r.layout.unit_gpus(), "the layout's GPUs");
  r.usd_per_hour = static_cast<double>(r.gpus) * e.device.price_usd_per_hour;
  r.output_tokens_per_s_per_gpu = at.output_tokens_per_s_per_gpu;
  r.tokens_per_s_per_user = at.tpot.mean > 0 ? 1.0 / at.tpot.mean : 0.0;
  r.ttft = at.ttft;
  r.tpot = at.tpot;
  if (q.target_qps > 0) {
    r.cost_per_million_output_tokens_usd = r.usd_per_hour / (q.target_qps * len.mean_out * 3600.0) * 1e6;
  } else {
    r.cost_per_million_output_tokens_usd = at.cost_per_million_output_tokens_usd;
  }
  if (r.gpus > q.space.max_gpus) {
    r.verdict = LayoutVerdict::over_budget;
    r.reason = std::to_string(r.units) + " units of " + std::to_string(r.layout.unit_gpus()) + " GPUs (" +
               fmt(found.qps) + " requests/s each) make " + std::to_string(r.gpus) + " GPUs, over the budget of " +
               std::to_string(q.space.max_gpus);
    return;
  }
  r.verdict = LayoutVerdict::feasible;
  r.reason = fmt(found.qps) + " requests/s per unit within the SLOs";
}

// Step 5: the whole deployment at the target rate.
void verify_layout(const ServePlanRequest& q, IterationModel& m, ServeLayoutResult& r, std::atomic<int64_t>& trials) {
  const ServePlanEngine& e = q.engines[static_cast<size_t>(r.layout.engine)];
  ServeConfig c = unit_config(q, e, r.layout);
  c.replicas = checked_mul(r.units, r.layout.unit_replicas(), "the deployment's replicas");
  c.prefill_replicas = r.units * r.layout.prefill_replicas;
  WorkloadSpec w = q.workload;
  w.qps = q.target_qps;
  w.requests = std::min(kVerifyMaxRequests, std::max(w.requests, kVerifyRequestsPerUnit * r.units));
  const ServeResult s = simulate_serving(m, generate_workload(w), c);
  ++trials;
  r.verified = true;
  r.slo_attainment = s.slo_attainment;
  r.verified_ttft_p99_s = s.ttft.p99;
  r.verified_tpot_p99_s = s.tpot.p99;
}

void check_request(const ServePlanRequest& q) {
  ACCELSIM_CHECK(!q.engines.empty(), "the serving plan needs at least one engine (a device and its stack)");
  const ServePlanSpace& s = q.space;
  auto positive = [](const std::vector<int64_t>& v, const char* what) {
    ACCELSIM_CHECK(!v.empty(), std::string("the serving plan's ") + what + " list is empty");
    for (int64_t x : v) ACCELSIM_CHECK(x >= 1, std::string("the serving plan's ") + what + " must be at least 1");
  };
  positive(s.tp, "tensor-parallel");
  positive(s.pp, "pipeline-parallel");
  positive(s.dp_attention, "attention data-parallel");
  positive(s.max_seqs, "max-sequences");
  positive(s.token_budgets, "token-budget");
  ACCELSIM_CHECK(!s.quantizations.empty(), "the serving plan's quantization list is empty");
  ACCELSIM_CHECK(s.aggregated || !s.disaggregated.empty(), "the serving plan tries neither aggregated nor disaggregated units");
  for (const auto& [p, d] : s.disaggregated) {
    ACCELSIM_CHECK(p >= 1 && d >= 1, "a disaggregated unit needs at least one prefill and one decode replica");
  }
  ACCELSIM_CHECK(s.max_gpus >= 1, "the GPU budget must be at least 1");
  ACCELSIM_CHECK(!s.speculative.empty(), "the serving plan's speculative list is empty");
  for (bool spec : s.speculative) {
    for (const ServePlanEngine& e : q.engines) {
      ACCELSIM_CHECK(!spec || e.replica.speculative.enabled(),
                     "the serving plan tries speculative decoding, but engine '" + e.label + "' has none set up");
    }
  }
  ACCELSIM_CHECK(q.slo_ttft_s > 0 || q.slo_tpot_s > 0, "the serving plan needs an SLO (p99 TTFT or p99 TPOT)");
  require_in_range("the serving plan", "the TTFT target", q.slo_ttft_s, kNonNegative);
  require_in_range("the serving plan", "the TPOT target", q.slo_tpot_s, kNonNegative);
  require_in_range("the serving plan", "the target rate", q.target_qps, kNonNegative);
  if (q.objective == ServeObjective::throughput) {
    ACCELSIM_CHECK(q.target_qps == 0, "the throughput objective finds the most tokens/s per GPU: it takes no target rate");
  } else {
    ACCELSIM_CHECK(q.target_qps > 0, std::string("the ") + std::string(objective_name(q.objective)) +
                                         " objective needs the request rate to serve");
  }
  if (q.objective == ServeObjective::cost) {
    for (const ServePlanEngine& e : q.engines) {
      ACCELSIM_CHECK(e.device.price_usd_per_hour > 0,
                     "the cost objective needs a price per GPU-hour for every device; " + e.device.id + " has none");
    }
  }
  ACCELSIM_CHECK(q.verify >= 0, "the number of layouts to verify must not be negative");
}

// The ranking key of a layout that meets the SLOs within the budget; lower first.
std::tuple<double, double, double> rank_key(ServeObjective o, const ServeLayoutResult& r) {
  const auto gpus = static_cast<double>(r.gpus);
  const double price = r.usd_per_hour > 0 ? r.usd_per_hour : kInf;  // an unknown price after every known one
  switch (o) {
    case ServeObjective::gpus: return {gpus, price, -r.output_tokens_per_s_per_gpu};
    case ServeObjective::cost: return {price, gpus, -r.output_tokens_per_s_per_gpu};
    case ServeObjective::throughput: return {-r.output_tokens_per_s_per_gpu, gpus, price};
  }
  return {};
}

std::tuple<int64_t, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t> layout_order(const ServeLayout& l) {
  return {l.engine, static_cast<int>(l.quantization) * 2 + (l.speculative ? 1 : 0), l.tp, l.pp * 1000 + l.dp_attention,
          l.prefill_replicas, l.decode_replicas, l.max_seqs, l.token_budget};
}

}  // namespace

std::string_view quantization_name(ServeQuantization q) {
  switch (q) {
    case ServeQuantization::bf16: return "bf16";
    case ServeQuantization::fp8: return "fp8";
    case ServeQuantization::int4: return "int4";
    case ServeQuantization::nvfp4: return "nvfp4";
    case ServeQuantization::mxfp4: return "mxfp4";
  }
  return "?";
}

ServeQuantization parse_quantization(std::string_view name) {
  for (ServeQuantization q : {ServeQuantization::bf16, ServeQuantization::fp8, ServeQuantization::int4,
                              ServeQuantization::nvfp4, ServeQuantization::mxfp4}) {
    if (quantization_name(q) == name) return q;
  }
  throw ConfigError("unknown quantization '" + std::string(name) + "' (known: bf16, fp8, int4, nvfp4, mxfp4)");
}

static bool fp4_quantization(ServeQuantization q) { return q == ServeQuantization::nvfp4 || q == ServeQuantization::mxfp4; }

// AWQ and GPTQ checkpoints group 128 input channels per scale (the AutoAWQ and GPTQ defaults,
// q_group_size / group_size 128: https://github.com/casper-hansen/AutoAWQ).
constexpr int64_t kInt4GroupSize = 128;

ModelSpec quantized_model(const ModelSpec& model, ServeQuantization q) {
  ModelSpec m = model;
  switch (q) {
    case ServeQuantization::bf16:
      break;
    case ServeQuantization::fp8:
      // The blocks' linear weights are stored in fp8 by the replica's fp8 GEMMs
      // (BuildOptions::fp8_gemms, as `serve --fp8`); the embedding, LM head and norms stay in
      // the model's dtype, as FP8 checkpoints keep them.
      m.kv_cache_dtype = DType::fp8_e4m3;
      m.int4_group_size = 0;
      break;
    case ServeQuantization::int4:
      m.int4_group_size = kInt4GroupSize;
      break;
    case ServeQuantization::nvfp4:
    case ServeQuantization::mxfp4:
      // TensorRT-LLM's NVFP4 recipes keep the KV cache in fp8 (TensorRT Model Optimizer's
      // --kv_cache_qformat fp8 default for fp4 checkpoints, examples/llm_ptq).
      m.fp4_weights = q == ServeQuantization::nvfp4 ? Fp4Format::nvfp4 : Fp4Format::mxfp4;
      m.kv_cache_dtype = DType::fp8_e4m3;
      m.int4_group_size = 0;
      break;
  }
  return m;
}

std::string quantization_unsupported(const DeviceSpec& device, ServeQuantization q) {
  if (q == ServeQuantization::fp8 && !(device.fp8_matrix_flops_per_s > 0)) {
    return device.id + " has no fp8 tensor rate (fp8 GEMMs need Ada, Hopper, Blackwell, MI300 or Gaudi 2 and later)";
  }
  if (fp4_quantization(q) && !(device.fp4_matrix_flops_per_s > 0)) {
    return device.id + " has no fp4 tensor rate (fp4 GEMMs need Blackwell or MI355X-class parts)";
  }
  if (q == ServeQuantization::nvfp4 && device.vendor != "NVIDIA") {
    return device.id + " runs fp4 with MX block scales (e8m0 per 32 values), not NVFP4's: try mxfp4";
  }
  return "";
}

std::string_view objective_name(ServeObjective o) {
  switch (o) {
    case ServeObjective::gpus: return "gpus";
    case ServeObjective::cost: return "cost";
    case ServeObjective::throughput: return "throughput";
  }
  return "?";
}

std::string_view verdict_name(LayoutVerdict v) {
  switch (v) {
    case LayoutVerdict::best: return "best";
    case LayoutVerdict::feasible: return "feasible";
    case LayoutVerdict::invalid: return "invalid";
    case LayoutVerdict::unsupported: return "unsupported";
    case LayoutVerdict::does_not_fit: return "does_not_fit";
    case LayoutVerdict::misses_ttft: return "misses_ttft";
    case LayoutVerdict::misses_tpot: return "misses_tpot";
    case LayoutVerdict::misses_slo: return "misses_slo";
    case LayoutVerdict::over_budget: return "over_budget";
    case LayoutVerdict::screened_out: return "screened_out";
  }
  return "?";
}

std::vector<int64_t> pareto_front(const std::vector<std::pair<double, double>>& points) {
  std::vector<int64_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  // By x descending, then y descending: a point is on the front when its y beats every y before it.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const auto& pa = points[static_cast<size_t>(a)];
    const auto& pb = points[static_cast<size_t>(b)];
    return pa.first != pb.first ? pa.first > pb.first : pa.second > pb.second;
  });
  std::vector<int64_t> front;
  double best_y = -kInf;
  for (int64_t i : order) {
    if (points[static_cast<size_t>(i)].second > best_y) {
      front.push_back(i);
      best_y = points[static_cast<size_t>(i)].second;
    }
  }
  std::reverse(front.begin(), front.end());
  return front;
}

ServePlanResult plan_serving(const ServePlanRequest& q, const std::function<void(int64_t, int64_t)>& progress) {
  check_request(q);
  const Lengths len = lengths_of(q.workload);
  ServePlanResult result;
  result.mean_input_tokens = len.mean_in;
  result.mean_output_tokens = len.mean_out;
  std::vector<ServeLayoutResult>& layouts = result.layouts;

  // The layouts, grouped by the IterationModel they share.
  std::vector<Group> groups;
  for (size_t ei = 0; ei < q.engines.size(); ++ei) {
    const ServePlanEngine& e = q.engines[ei];
    // Static batches form whole prompts up to max_seqs: the token budget does not apply.
    std::vector<int64_t> budgets = q.space.token_budgets;
    if (e.scheduler.kind == SchedulerKind::static_batch) budgets.resize(1);
    for (ServeQuantization quant : q.space.quantizations) {
      // (tp, pp, dp) replicas: every tp x pp, and for an MoE model the attention-DP ranks at tp = pp = 1.
      std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;
      for (int64_t tp : q.space.tp) {
        for (int64_t pp : q.space.pp) shapes.emplace_back(tp, pp, 1);
      }
      if (q.model.moe.enabled()) {
        for (int64_t dp : q.space.dp_attention) {
          if (dp > 1) shapes.emplace_back(1, 1, dp);
        }
      }
      for (const auto& [tp, pp, dp] : shapes) {
        {
          for (int64_t budget : budgets) {
           for (bool spec : q.space.speculative) {
            Group g{static_cast<int64_t>(ei), quant, tp, pp, budget, spec, dp, {}, nullptr};
            std::vector<std::pair<int64_t, int64_t>> units;
            if (q.space.aggregated) units.emplace_back(0, 1);
            for (const auto& pd : q.space.disaggregated) units.push_back(pd);
            for (const auto& [p, d] : units) {
              for (int64_t seqs : q.space.max_seqs) {
                ServeLayoutResult r;
                r.layout = {static_cast<int64_t>(ei), quant, tp, pp, seqs, budget, dp, p, d, spec};
                g.layouts.push_back(layouts.size());
                layouts.push_back(std::move(r));
              }
            }
            groups.push_back(std::move(g));
           }
          }
        }
      }
    }
  }

  const int workers = std::max(1, q.threads > 0 ? q.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::atomic<int64_t> done{0}, total{static_cast<int64_t>(groups.size())}, trials{0};
  auto tick = progress ? std::function<void()>([&] { progress(done.load(), total.load()); }) : std::function<void()>();

  // Steps 1-3, a group at a time: memory, bounds, estimates.
  detail::parallel_for(
      groups.size(), workers,
      [&](size_t gi, int) {
        Group& g = groups[gi];
        const ServePlanEngine& e = q.engines[static_cast<size_t>(g.engine)];
        auto settle = [&](LayoutVerdict v, const std::string& why) {
          for (size_t i : g.layouts) {
            layouts[i].verdict = v;
            layouts[i].reason = why;
          }
        };
        if (const std::string why = quantization_unsupported(e.device, g.quantization); !why.empty()) {
          settle(LayoutVerdict::unsupported, why);
          ++done;
          return;
        }
        ReplicaConfig replica = e.replica;
        replica.tp = g.tp;
        replica.pp = g.pp;
        replica.dp_attention = g.dp_attention;
        replica.build.fp8_gemms = g.quantization == ServeQuantization::fp8;
        replica.build.fp4_gemms = fp4_quantization(g.quantization);
        replica.max_batched_tokens = g.token_budget;
        if (!g.speculative) replica.speculative = {};
        try {
          g.costs = std::make_unique<IterationModel>(quantized_model(q.model, g.quantization), e.device, replica);
        } catch (const PhysicalRangeError&) {
          throw;
        } catch (const ConfigError& err) {
          settle(LayoutVerdict::invalid, err.what());
          ++done;
          return;
        }
        IterationModel& m = *g.costs;
        const ReplicaMemory& mem = m.memory();
        const int64_t need = ceil_div(len.longest, replica.block_size);
        for (size_t i : g.layouts) {
          ServeLayoutResult& r = layouts[i];
          r.weight_bytes_per_gpu = mem.weight_bytes;
          r.kv_bytes_per_gpu = mem.kv_bytes;
          r.kv_blocks = mem.kv_blocks;
          if (r.layout.unit_gpus() > q.space.max_gpus) {
            r.verdict = LayoutVerdict::over_budget;
            r.reason = "one unit takes " + std::to_string(r.layout.unit_gpus()) + " GPUs, over the budget of " +
                       std::to_string(q.space.max_gpus);
            continue;
          }
          if (mem.kv_blocks < need) {
            r.verdict = LayoutVerdict::does_not_fit;
            r.reason = "weights " + fmt(mem.weight_bytes / 1e9) + " GB and activations " + fmt(mem.activation_bytes / 1e9) +
                       " GB leave " + std::to_string(mem.kv_blocks) + " KV blocks per engine; the longest request (" +
                       std::to_string(len.longest) + " tokens) needs " + std::to_string(need);
            continue;
          }
          if (r.layout.disaggregated() && !replica.system) {
            r.verdict = LayoutVerdict::invalid;
            r.reason = "a disaggregated unit needs the system whose NICs move the KV cache";
            continue;
          }
          r.verdict = LayoutVerdict::screened_out;  // until the screen lets it through
          bound_and_estimate(q, len, m, r);
        }
        ++done;
      },
      tick);

  // The screen.
  std::vector<size_t> open;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (layouts[i].verdict == LayoutVerdict::screened_out) open.push_back(i);
  }
  auto score = [&](size_t i) {
    return estimate_score(q, layouts[i], q.engines[static_cast<size_t>(layouts[i].layout.engine)].device.price_usd_per_hour);
  };
  std::stable_sort(open.begin(), open.end(), [&](size_t a, size_t b) { return score(a) < score(b); });
  std::vector<char> chosen(layouts.size(), 0);
  if (!open.empty()) {
    const double best = score(open.front());
    for (size_t k = 0; k < open.size(); ++k) {
      const double s = score(open[k]);
      const bool near = std::isfinite(s) && (best < 0 ? s <= best / kScreenFactor : s <= best * kScreenFactor);
      if (q.exhaustive || k < kScreenKeep || near) {
        chosen[open[k]] = 1;
      } else {
        ServeLayoutResult& r = layouts[open[k]];
        r.reason = std::isfinite(s) ? "estimated " + fmt(r.estimated_qps_per_unit) + " requests/s per unit, far from the best estimate"
                                    : "no decode batch meets the TPOT target in the steady-state estimate";
      }
    }
  }

  // Step 4, a group at a time (its IterationModel is not shared between threads).
  std::vector<size_t> busy_groups;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (std::any_of(groups[gi].layouts.begin(), groups[gi].layouts.end(), [&](size_t i) { return chosen[i] != 0; })) {
      busy_groups.push_back(gi);
    }
  }
  total += static_cast<int64_t>(std::count(chosen.begin(), chosen.end(), 1));
  detail::parallel_for(
      busy_groups.size(), workers,
      [&](size_t k, int) {
        Group& g = groups[busy_groups[k]];
        for (size_t i : g.layouts) {
          if (!chosen[i]) continue;
          simulate_layout(q, len, *g.costs, layouts[i], trials);
          ++done;
        }
      },
      tick);

  // The ranking: layouts meeting the SLOs within the budget by the objective, the rest after.
  std::vector<size_t> order(layouts.size());
  std::iota(order.begin(), order.end(), 0);
  auto ranked = [&](const ServeLayoutResult& r) { return r.verdict == LayoutVerdict::feasible; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ServeLayoutResult& ra = layouts[a];
    const ServeLayoutResult& rb = layouts[b];
    if (ranked(ra) != ranked(rb)) return ranked(ra);
    if (ranked(ra)) {
      const auto ka = rank_key(q.objective, ra), kb = rank_key(q.objective, rb);
      if (ka != kb) return ka < kb;
    } else if (ra.verdict != rb.verdict) {
      return ra.verdict < rb.verdict;
    }
    return layout_order(ra.layout) < layout_order(rb.layout);
  });
  std::vector<ServeLayoutResult> sorted;
  sorted.reserve(layouts.size());
  std::vector<size_t> group_of(layouts.size());
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (size_t i : groups[gi].layouts) group_of[i] = gi;
  }
  std::vector<size_t> sorted_group;
  for (size_t i : order) {
    sorted.push_back(std::move(layouts[i]));
    sorted_group.push_back(group_of[i]);
  }
  layouts = std::move(sorted);
  for (const ServeLayoutResult& r : layouts) {
    result.ranked += ranked(r) ? 1 : 0;
    result.simulated += r.simulated ? 1 : 0;
  }
  if (result.ranked > 0) layouts[0].verdict = LayoutVerdict::best;

  // Step 5: the best layouts whole, at the target rate (without a target, the unit's own run at
  // its highest rate is the deployment).
  const auto verify = static_cast<size_t>(std::min(q.verify, result.ranked));
  if (q.target_qps > 0 && verify > 0) {
    std::map<size_t, std::vector<size_t>> by_group;
    for (size_t i = 0; i < verify; ++i) by_group[sorted_group[i]].push_back(i);
    std::vector<std::pair<size_t, std::vector<size_t>>> work(by_group.begin(), by_group.end());
    total += static_cast<int64_t>(verify);
    detail::parallel_for(
        work.size(), workers,
        [&](size_t k, int) {
          for (size_t i : work[k].second) {
            verify_layout(q, *groups[work[k].first].costs, layouts[i], trials);
            ++done;
          }
        },
        tick);
  }
  result.trials = trials.load();

  // The Pareto front of the layouts meeting the SLOs.
  std::vector<std::pair<double, double>> points;
  for (int64_t i = 0; i < result.ranked; ++i) {
    const ServeLayoutResult& r = layouts[static_cast<size_t>(i)];
    points.emplace_back(r.tokens_per_s_per_user, r.output_tokens_per_s_per_gpu);
  }
  result.pareto = pareto_front(points);
  for (int64_t i : result.pareto) layouts[static_cast<size_t>(i)].pareto = true;

  for (const ServeLayoutResult& r : layouts) {
    for_each_figure(r, [](const char* figure, double value) { require_non_negative("plan_serving", figure, value); });
  }
  if (progress) progress(total.load(), total.load());
  return result;
}

}  // namespace accelsim
