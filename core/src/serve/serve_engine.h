// Internal to the serving simulation (serve.cc, schedulers.cc, metrics.cc; serve_plan.cc takes
// summarize), not a public header: the engines, their sequences and KV blocks, and the
// discrete-event Simulation over them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/physical_range.h"
#include "accelsim/serve.h"

namespace accelsim::serve_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Role : uint8_t { mixed, prefill, decode };

struct Seq {
  int32_t req = 0;
  int32_t prompt = 0;
  int32_t output = 0;
  int32_t generated = 0;
  int32_t computed = 0;      // tokens whose K and V are in the cache
  int32_t blocks = 0;        // blocks this sequence owns
  int32_t shared_blocks = 0;  // prefix-cache blocks it reads
  int32_t hashes_held = 0;   // leading prompt hashes it references in the prefix cache
  int32_t sched = 0;         // tokens in the current step
  bool in_prefill = true;
  bool done = false;         // static batching: finished, still holding its row
  double last_token_s = 0.0;
  double accepted_share = 0.0;  // speculative decoding: the fraction of a token accepted so far
  int32_t host_loaded = 0;      // prefix tokens its admission loads from host memory
  int32_t len() const { return prompt + generated; }
};

// Inter-token gaps: a log-spaced histogram, 200 bins per decade from 1 us (0.5% relative
// resolution for the percentiles; the mean and the maximum are exact).
class GapHistogram {
 public:
  void add(double x) {
    ++n_;
    sum_ += x;
    max_ = std::max(max_, x);
    const double b = x > kLow ? std::floor(std::log10(x / kLow) * kPerDecade) : 0.0;
    const auto i = static_cast<size_t>(std::min(b, static_cast<double>(kBins - 1)));
    ++bins_[i];
  }
  Percentiles summary() const {
    Percentiles p;
    if (n_ == 0) return p;
    p.mean = sum_ / static_cast<double>(n_);
    p.max = max_;
    auto at = [&](double q) {
      const auto want = static_cast<int64_t>(std::ceil(q * static_cast<double>(n_)));
      int64_t seen = 0;
      for (size_t i = 0; i < bins_.size(); ++i) {
        seen += bins_[i];
        if (seen >= want) return std::min(max_, kLow * std::pow(10.0, (static_cast<double>(i) + 0.5) / kPerDecade));
      }
      return max_;
    };
    p.p50 = at(0.50);
    p.p90 = at(0.90);
    p.p99 = at(0.99);
    return p;
  }

 private:
  static constexpr double kLow = 1e-6;
  static constexpr double kPerDecade = 200.0;
  static constexpr size_t kBins = 2000;  // up to 1e4 s
  std::vector<int64_t> bins_ = std::vector<int64_t>(kBins, 0);
  int64_t n_ = 0;
  double sum_ = 0.0, max_ = 0.0;
};

// The mean, percentiles (nearest rank) and maximum of a sample (metrics.cc).
Percentiles summarize(std::vector<double> v);

struct PrefixEntry {
  int64_t refs = 0;
  uint64_t tick = 0;
};

struct Engine {
  int32_t id = 0;
  Role role = Role::mixed;
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;
  std::deque<int32_t> front;  // preempted requests, resumed before any new one
  std::deque<int32_t> fifo;   // FCFS admission
  std::priority_queue<std::pair<int64_t, int32_t>, std::vector<std::pair<int64_t, int32_t>>, std::greater<>> sjf;
  std::vector<Seq> running;
  std::unordered_map<int32_t, Seq> parked;  // preempted sequences' progress (generated tokens)
  bool busy = false;
  double busy_until = kInf;
  double step_start = 0.0;
  int32_t step_prefill_tokens = 0, step_prefill_seqs = 0, step_decode_seqs = 0;
  // Prefix cache: hash -> users; unused entries evictable in LRU order.
  std::unordered_map<int64_t, PrefixEntry> cache;
  std::set<std::pair<uint64_t, int64_t>> evictable;
  // Host-memory tier (ReplicaConfig::host_kv_bytes): hash -> last use, LRU order.
  std::unordered_map<int64_t, uint64_t> host;
  std::set<std::pair<uint64_t, int64_t>> host_lru;
  int64_t waiting() const { return static_cast<int64_t>(front.size() + fifo.size() + sjf.size()); }
  int64_t outstanding() const { return waiting() + static_cast<int64_t>(running.size()); }
};

class Simulation {
 public:
  Simulation(IterationModel& costs, const Workload& w, const ServeConfig& c,
             const std::function<void(int64_t, int64_t)>& progress)
      : costs_(costs), w_(w), c_(c), s_(c.scheduler), progress_(progress) {
    const ReplicaConfig& r = costs.replica();
    bs_ = r.block_size;
    expected_tokens_ = r.speculative.expected_tokens();
    host_entries_ = w.hash_block_tokens > 0 ? costs.memory().host_kv_blocks / ceil_div(w.hash_block_tokens, bs_) : 0;
    decode_slots_ = r.speculative.enabled() ? r.speculative.tokens + 1 : 1;
    const int64_t blocks = costs.memory().kv_blocks;
    if (blocks < 1) {
      char text[200];
      std::snprintf(text, sizeof text, "weights %.1f GB and activations %.1f GB of %.1f GB usable per GPU",
                    costs.memory().weight_bytes / 1e9, costs.memory().activation_bytes / 1e9,
                    costs.memory().usable_bytes / 1e9);
      throw ConfigError("no memory is left for the KV cache on " + costs.device().id + ": " + text +
                        " (more tensor or pipeline parallelism spreads the weights)");
    }
    const int64_t per_replica = r.pp * r.dp_attention;  // a pipeline's virtual engines, the attention DP ranks
    for (int64_t rep = 0; rep < c.replicas; ++rep) {
      const Role role = c.prefill_replicas == 0 ? Role::mixed : rep < c.prefill_replicas ? Role::prefill : Role::decode;
      for (int64_t v = 0; v < per_replica; ++v) {
        Engine e;
        e.id = static_cast<int32_t>(engines_.size());
        e.role = role;
        e.total_blocks = e.free_blocks = blocks;
        engines_.push_back(std::move(e));
      }
    }
    const size_t n = w.requests.size();
    first_token_.assign(n, std::nan(""));
    finish_.assign(n, std::nan(""));
    scheduled_.assign(n, std::nan(""));
    total_blocks_ = blocks * static_cast<int64_t>(engines_.size());
    const double first_arrival = w.requests.empty() ? 0.0 : w.requests.front().arrival_s;
    const double last_arrival = w.requests.empty() ? 0.0 : w.requests.back().arrival_s;
    last_t_ = first_arrival;
    bin_ = std::max(last_arrival - first_arrival, 1e-3) / static_cast<double>(std::max<int64_t>(1, c.timeline_bins));
    open_bin_.start_s = open_bin_.t_s = first_arrival;
  }

  ServeResult run();

 private:
  int64_t blocks_for(int64_t tokens) const { return ceil_div(tokens, bs_); }
  int64_t watermark_blocks(const Engine& e) const {
    return static_cast<int64_t>(std::floor(s_.watermark * static_cast<double>(e.total_blocks)));
  }
  // Blocks a prefix-cache entry holds.
  int64_t hash_blocks() const { return blocks_for(w_.hash_block_tokens); }

  // Keeps an evicted prefix block in host memory, dropping the least recently used there.
  void offload(Engine& e, int64_t hash) {
    if (host_entries_ <= 0) return;
    auto it = e.host.find(hash);
    if (it != e.host.end()) {
      e.host_lru.erase({it->second, hash});
    } else if (static_cast<int64_t>(e.host.size()) >= host_entries_) {
      e.host.erase(e.host_lru.begin()->second);
      e.host_lru.erase(e.host_lru.begin());
    }
    e.host[hash] = ++tick_;
    e.host_lru.insert({tick_, hash});
  }

  bool allocate(Engine& e, int64_t n) {
    while (e.free_blocks < n && !e.evictable.empty()) {
      const auto [tick, hash] = *e.evictable.begin();
      e.evictable.erase(e.evictable.begin());
      e.cache.erase(hash);
      offload(e, hash);
      e.free_blocks += hash_blocks();
    }
    if (e.free_blocks < n) return false;
    e.free_blocks -= n;
    used_blocks_ += n;
    return true;
  }
  void release(Engine& e, int64_t n) {
    e.free_blocks += n;
    used_blocks_ -= n;
  }
  // Blocks a sequence still needs to hold `tokens` tokens.
  int64_t missing(const Seq& s, int64_t tokens) const {
    return std::max<int64_t>(0, blocks_for(tokens) - s.blocks - s.shared_blocks);
  }
  bool grow(Engine& e, Seq& s, int64_t tokens) {
    const int64_t need = missing(s, tokens);
    if (need == 0) return true;
    if (!allocate(e, need)) return false;
    s.blocks += static_cast<int32_t>(need);
    return true;
  }

  void drop_prefix(Engine& e, Seq& s) {
    const Request& r = w_.requests[static_cast<size_t>(s.req)];
    for (int32_t i = 0; i < s.hashes_held; ++i) {
      const int64_t h = w_.hashes[static_cast<size_t>(r.hash_begin + i)];
      auto it = e.cache.find(h);
      if (it == e.cache.end()) continue;
      if (--it->second.refs == 0) {
        it->second.tick = ++tick_;
        e.evictable.insert({it->second.tick, h});
        used_blocks_ -= hash_blocks();  // cached but reclaimable: not counted as used
      }
    }
    s.hashes_held = 0;
    s.shared_blocks = 0;
  }
  // Reads the longest cached run of the request's leading prompt blocks.
  void take_prefix(Engine& e, Seq& s) {
    if (!s_.prefix_caching || w_.hash_block_tokens == 0) return;
    const Request& r = w_.requests[static_cast<size_t>(s.req)];
    // The leading blocks the GPU cache holds, or failing that the host tier (loaded back into GPU
    // blocks of their own, as entries of the GPU cache this sequence holds).
    int32_t k = 0;
    s.host_loaded = 0;
    for (int64_t i = r.hash_begin; i < r.hash_end; ++i, ++k) {
      const int64_t h = w_.hashes[static_cast<size_t>(i)];
      auto it = e.cache.find(h);
      if (it != e.cache.end()) {
        if (it->second.refs++ == 0) {
          e.evictable.erase({it->second.tick, it->first});
          used_blocks_ += hash_blocks();
        }
        continue;
      }
      if (!e.host.count(h) || !allocate(e, hash_blocks())) break;
      e.cache[h] = PrefixEntry{1, 0};
      s.host_loaded += static_cast<int32_t>(w_.hash_block_tokens);
    }
    s.hashes_held = k;
    s.shared_blocks = static_cast<int32_t>(k * hash_blocks());
    // At least the last prompt token is computed (its logits sample the first output token).
    s.computed = static_cast<int32_t>(std::min<int64_t>(k * w_.hash_block_tokens, s.len() - 1));
  }
  // After a prompt is in the cache: its full hash blocks become prefix-cache entries.
  void publish_prefix(Engine& e, Seq& s) {
    if (!s_.prefix_caching || w_.hash_block_tokens == 0) return;
    const Request& r = w_.requests[static_cast<size_t>(s.req)];
    const int64_t full = std::min<int64_t>(r.hash_end - r.hash_begin, s.prompt / w_.hash_block_tokens);
    for (int64_t i = s.hashes_held; i < full; ++i) {
      if (s.blocks < hash_blocks()) break;
      const int64_t h = w_.hashes[static_cast<size_t>(r.hash_begin + i)];
      if (e.cache.count(h)) break;  // another sequence published it meanwhile
      e.cache[h] = PrefixEntry{1, 0};
      s.blocks -= static_cast<int32_t>(hash_blocks());
      s.shared_blocks += static_cast<int32_t>(hash_blocks());
      ++s.hashes_held;
    }
  }

  void free_seq(Engine& e, Seq& s) {
    release(e, s.blocks);
    s.blocks = 0;
    drop_prefix(e, s);
  }

  void enqueue(Engine& e, int32_t req) {
    if (s_.order == AdmissionOrder::sjf) {
      e.sjf.emplace(w_.requests[static_cast<size_t>(req)].input_len, req);
    } else {
      e.fifo.push_back(req);
    }
    ++waiting_total_;
  }
  bool has_waiting(const Engine& e) const { return e.waiting() > 0; }
  int32_t peek(const Engine& e) const {
    if (!e.front.empty()) return e.front.front();
    if (s_.order == AdmissionOrder::sjf) return e.sjf.top().second;
    return e.fifo.front();
  }
  void pop(Engine& e) {
    if (!e.front.empty()) {
      e.front.pop_front();
    } else if (s_.order == AdmissionOrder::sjf) {
      e.sjf.pop();
    } else {
      e.fifo.pop_front();
    }
    --waiting_total_;
  }
  // The sequence a waiting request resumes as (a preempted one keeps its generated tokens).
  Seq make_seq(Engine& e, int32_t req) {
    auto it = e.parked.find(req);
    if (it != e.parked.end()) {
      Seq s = it->second;
      e.parked.erase(it);
      return s;
    }
    const Request& r = w_.requests[static_cast<size_t>(req)];
    Seq s;
    s.req = req;
    s.prompt = r.input_len;
    s.output = r.output_len;
    return s;
  }

  void preempt(Engine& e, size_t index) {
    Seq s = e.running[index];
    e.running.erase(e.running.begin() + static_cast<std::ptrdiff_t>(index));
    --running_total_;
    free_seq(e, s);
    s.computed = 0;
    s.in_prefill = true;
    s.sched = 0;
    e.parked[s.req] = s;
    e.front.push_front(s.req);
    ++waiting_total_;
    ++preemptions_;
  }

  // Tokens a decode step gives `s`: 1, or under speculative decoding its running share of the
  // expected accepted tokens (SpeculativeConfig::expected_tokens), whole tokens as the share
  // passes them, at most what its output has left.
  int32_t accepted(Seq& s) const {
    if (expected_tokens_ <= 1.0) return 1;
    s.accepted_share += expected_tokens_;
    const double whole = std::floor(s.accepted_share);
    s.accepted_share -= whole;
    return std::max(1, std::min(static_cast<int32_t>(whole), s.output - s.generated));
  }

  void admit(Engine& e, Seq s, int32_t tokens, double now) {
    s.sched = tokens;
    if (std::isnan(scheduled_[static_cast<size_t>(s.req)])) scheduled_[static_cast<size_t>(s.req)] = now;
    e.running.push_back(s);
    ++running_total_;
  }

  // Decode steps of the running sequences past their prompt, preempting the last admitted when
  // a block is missing; up to `budget` of them. Returns the sequences and their context.
  void schedule_decodes(Engine& e, StepBatch& b, int64_t& budget, bool may_preempt) {
    for (size_t i = 0; i < e.running.size() && budget > 0; ++i) {
      Seq& s = e.running[i];
      if (s.in_prefill) continue;
      bool ok = true;
      // Speculative decoding writes k + 1 tokens' K and V before it knows how many it keeps.
      while (!grow(e, s, s.computed + decode_slots_)) {
        if (!may_preempt) {
          ok = false;
          break;
        }
        const size_t last = e.running.size() - 1;
        preempt(e, last);
        if (last == i) {
          ok = false;
          break;
        }
      }
      if (!ok) {
        if (i >= e.running.size()) break;  // it preempted itself
        continue;
      }
      Seq& t = e.running[i];
      t.sched = 1;
      ++b.decode_seqs;
      b.decode_context += t.computed;
      --budget;
    }
  }

  // A waiting request fits the engine at all: prompt + output within its whole cache, less the
  // watermark where admission keeps one (vLLM ignores prompts that could never be allocated).
  bool admissible(const Engine& e, int32_t req) const {
    const Request& r = w_.requests[static_cast<size_t>(req)];
    const bool paged = s_.kind == SchedulerKind::vllm || s_.kind == SchedulerKind::sarathi;
    return blocks_for(static_cast<int64_t>(r.input_len) + r.output_len) <=
           e.total_blocks - (paged ? watermark_blocks(e) : 0);
  }

  // Decode engines: transferred requests join the batch in arrival order while their whole
  // prompt + output fits.
  void admit_transfers(Engine& e) {
    while (!e.fifo.empty()) {
      const int32_t q = e.fifo.front();
      Seq& p = e.parked.at(q);
      if (!grow(e, p, static_cast<int64_t>(p.prompt) + p.output)) break;
      e.running.push_back(p);
      ++running_total_;
      e.parked.erase(q);
      e.fifo.pop_front();
      --waiting_total_;
    }
  }

  // Admits the waiting queue's head with a prefill of up to `budget` tokens (`whole`: its whole
  // prompt or nothing), reading what the prefix cache holds, if its blocks leave the watermark
  // free. Returns the tokens scheduled, 0 when it does not fit (it stays queued).
  int64_t admit_waiting(Engine& e, int64_t budget, bool whole, double now, StepBatch& b) {
    const int32_t req = peek(e);
    Seq s = make_seq(e, req);
    take_prefix(e, s);
    const int64_t left = s.len() - s.computed;
    const int64_t n = std::min(left, budget);
    const int64_t reclaimable = e.free_blocks + static_cast<int64_t>(e.evictable.size()) * hash_blocks();
    const bool fits = (!whole || n == left) && reclaimable - missing(s, s.computed + n) >= watermark_blocks(e) &&
                      grow(e, s, s.computed + n);
    if (!fits) {
      drop_prefix(e, s);
      if (s.generated > 0) e.parked[req] = s;
      return 0;
    }
    pop(e);
    if (s.generated == 0) {
      prompt_tokens_ += s.prompt;
      cached_tokens_ += s.computed;
    }
    b.host_loaded_tokens += s.host_loaded;
    b.prefill.emplace_back(n, s.computed);
    admit(e, s, static_cast<int32_t>(n), now);
    return n;
  }

  // The step `e` runs next under the configured policy, from the registry of schedulers.cc.
  bool schedule(Engine& e, double now, StepBatch& b);
  // One scheduler per policy (schedulers.cc): each fills `b` and says whether there is a step.
  bool schedule_static(Engine& e, double now, StepBatch& b);
  bool schedule_orca(Engine& e, double now, StepBatch& b);
  bool schedule_vllm(Engine& e, double now, StepBatch& b);
  bool schedule_sarathi(Engine& e, double now, StepBatch& b);
  void start(Engine& e, double now);
  void finish(Engine& e, double now);
  void token(Seq& s, double now);
  void record_timeline(double from, double to, double kv, double waiting, double running);
  std::vector<TimelinePoint> timeline() const;
  // The state since the last event held until `now`: into the time-weighted means, the maxima
  // and the timeline's bins.
  void integrate(double now) {
    const double kv = static_cast<double>(used_blocks_) / static_cast<double>(total_blocks_);
    const auto waiting = static_cast<double>(waiting_total_);
    const double dt = now - last_t_;
    if (dt > 0) {
      kv_integral_ += dt * kv;
      waiting_integral_ += dt * waiting;
    }
    kv_max_ = std::max(kv_max_, kv);
    waiting_max_ = std::max(waiting_max_, waiting);
    record_timeline(last_t_, std::max(now, last_t_), kv, waiting, static_cast<double>(running_total_));
    last_t_ = std::max(now, last_t_);
  }

  IterationModel& costs_;
  double expected_tokens_ = 1.0;  // per decode step and sequence (SpeculativeConfig)
  int64_t host_entries_ = 0;      // prefix blocks the host tier holds per engine
  int64_t decode_slots_ = 1;      // cache slots a decode step writes per sequence
  const Workload& w_;
  const ServeConfig& c_;
  const SchedulerConfig& s_;
  const std::function<void(int64_t, int64_t)>& progress_;
  int64_t bs_ = 16;
  std::vector<Engine> engines_;
  std::vector<double> first_token_, finish_, scheduled_;
  GapHistogram itl_;
  int64_t used_blocks_ = 0, total_blocks_ = 1;
  int64_t waiting_total_ = 0, running_total_ = 0;
  int64_t preemptions_ = 0, steps_ = 0, completed_ = 0, rejected_ = 0;
  double batch_sum_ = 0.0;
  double busy_s_ = 0.0;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0;
  uint64_t tick_ = 0;
  double last_t_ = 0.0, kv_integral_ = 0.0, waiting_integral_ = 0.0, kv_max_ = 0.0, waiting_max_ = 0.0;
  // The timeline: closed bins of width bin_ (integrals of the figures in the mean fields until a
  // bin closes), and the open one.
  double bin_ = 1.0;
  std::vector<TimelinePoint> timeline_;
  TimelinePoint open_bin_;
  bool open_bin_used_ = false;
  std::vector<StepRecord> records_;
  // Disaggregation: KV caches on their way to a decode engine (time, request).
  std::priority_queue<std::pair<double, int32_t>, std::vector<std::pair<double, int32_t>>, std::greater<>> transfers_;
  std::unordered_map<int32_t, Seq> in_transfer_;
  size_t rr_ = 0, rr_decode_ = 0;
  std::vector<Engine*> touched_;
};

}  // namespace accelsim::serve_detail
