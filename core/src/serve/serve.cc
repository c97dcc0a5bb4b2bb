// simulate_serving(): the discrete-event simulation of serving engines (serve.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "accelsim/physical_range.h"
#include "accelsim/serve.h"

namespace accelsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

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

Percentiles summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  double sum = 0.0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  auto at = [&](double q) {
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank - 1), v.end());
    return v[rank - 1];
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = *std::max_element(v.begin(), v.end());
  return p;
}

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
    const int64_t blocks = costs.memory().kv_blocks;
    if (blocks < 1) {
      char text[200];
      std::snprintf(text, sizeof text, "weights %.1f GB and activations %.1f GB of %.1f GB usable per GPU",
                    costs.memory().weight_bytes / 1e9, costs.memory().activation_bytes / 1e9,
                    costs.memory().usable_bytes / 1e9);
      throw ConfigError("no memory is left for the KV cache on " + costs.device().id + ": " + text +
                        " (more tensor or pipeline parallelism spreads the weights)");
    }
    const int64_t per_replica = r.pp;  // virtual engines per replica
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

  bool allocate(Engine& e, int64_t n) {
    while (e.free_blocks < n && !e.evictable.empty()) {
      const auto [tick, hash] = *e.evictable.begin();
      e.evictable.erase(e.evictable.begin());
      e.cache.erase(hash);
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
    int32_t k = 0;
    for (int64_t i = r.hash_begin; i < r.hash_end; ++i, ++k) {
      auto it = e.cache.find(w_.hashes[static_cast<size_t>(i)]);
      if (it == e.cache.end()) break;
      if (it->second.refs++ == 0) {
        e.evictable.erase({it->second.tick, it->first});
        used_blocks_ += hash_blocks();
      }
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
      while (!grow(e, s, s.computed + 1)) {
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
    b.prefill.emplace_back(n, s.computed);
    admit(e, s, static_cast<int32_t>(n), now);
    return n;
  }

  bool schedule(Engine& e, double now, StepBatch& b);
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

bool Simulation::schedule(Engine& e, double now, StepBatch& b) {
  b = StepBatch{};
  int64_t sampling = 0;
  switch (s_.kind) {
    case SchedulerKind::static_batch: {
      if (e.running.empty()) {
        // Form a batch; reserve every request's prompt + output.
        while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
          const int32_t req = peek(e);
          const Request& r = w_.requests[static_cast<size_t>(req)];
          const int64_t need = blocks_for(static_cast<int64_t>(r.input_len) + r.output_len);
          if (!allocate(e, need)) break;
          pop(e);
          Seq s = make_seq(e, req);
          s.blocks = static_cast<int32_t>(need);
          admit(e, s, s.prompt, now);
          b.prefill.emplace_back(s.prompt, 0);
          ++sampling;
        }
        b.sampling = sampling;
        return !b.prefill.empty();
      }
      for (Seq& s : e.running) {  // every row, finished or not, runs each step
        s.sched = s.done ? 0 : 1;
        ++b.decode_seqs;
        b.decode_context += s.computed;
      }
      b.sampling = b.decode_seqs;
      return true;
    }
    case SchedulerKind::orca: {
      int64_t budget = std::numeric_limits<int64_t>::max();
      schedule_decodes(e, b, budget, false);  // reserved at admission: never short
      sampling = b.decode_seqs;
      int64_t tokens = b.decode_seqs;
      while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
        const int32_t req = peek(e);
        const Request& r = w_.requests[static_cast<size_t>(req)];
        if (tokens + r.input_len > s_.max_batched_tokens && tokens > 0) break;
        const int64_t need = blocks_for(static_cast<int64_t>(r.input_len) + r.output_len);
        if (!allocate(e, need)) break;
        pop(e);
        Seq s = make_seq(e, req);
        s.blocks = static_cast<int32_t>(need);
        tokens += s.prompt;
        b.prefill.emplace_back(s.prompt, 0);
        ++sampling;
        admit(e, s, s.prompt, now);
      }
      b.sampling = sampling;
      return tokens > 0;
    }
    case SchedulerKind::vllm: {
      // Prefills first: whole prompts while the budget, max_seqs and the watermark allow.
      int64_t tokens = 0;
      while (has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
        // Whole prompts; one longer than the budget runs alone.
        const int64_t budget = b.prefill.empty() ? std::numeric_limits<int64_t>::max() : s_.max_batched_tokens - tokens;
        const int64_t n = admit_waiting(e, budget, true, now, b);
        if (n == 0) break;
        tokens += n;
      }
      if (!b.prefill.empty()) {
        b.sampling = static_cast<int64_t>(b.prefill.size());
        return true;
      }
      int64_t budget = std::numeric_limits<int64_t>::max();
      schedule_decodes(e, b, budget, true);
      b.sampling = b.decode_seqs;
      return b.decode_seqs > 0;
    }
    case SchedulerKind::sarathi: {
      int64_t budget = s_.chunk;
      if (e.role != Role::prefill) schedule_decodes(e, b, budget, true);
      sampling = b.decode_seqs;
      // Prompts in progress, then new ones, in chunks filling the budget.
      for (Seq& s : e.running) {
        if (!s.in_prefill || budget <= 0) continue;
        const auto n = static_cast<int32_t>(std::min<int64_t>(s.len() - s.computed, budget));
        if (!grow(e, s, s.computed + n)) break;
        s.sched = n;
        b.prefill.emplace_back(n, s.computed);
        if (s.computed + n == s.len()) ++sampling;
        budget -= n;
      }
      while (budget > 0 && has_waiting(e) && static_cast<int64_t>(e.running.size()) < s_.max_seqs) {
        const auto before = e.running.size();
        const int64_t n = admit_waiting(e, budget, false, now, b);
        if (n == 0) break;
        const Seq& s = e.running[before];
        if (s.computed + n == s.len()) ++sampling;
        budget -= n;
      }
      b.sampling = sampling;
      return b.decode_seqs > 0 || !b.prefill.empty();
    }
  }
  return false;
}

void Simulation::start(Engine& e, double now) {
  if (e.busy) return;
  StepBatch b;
  if (e.role == Role::decode) {
    // Decode engines: every running sequence decodes (their whole length was reserved on
    // arrival, so none is ever short of a block).
    for (Seq& s : e.running) {
      s.sched = 1;
      ++b.decode_seqs;
      b.decode_context += s.computed;
    }
    b.sampling = b.decode_seqs;
    if (b.decode_seqs == 0) return;
  } else if (!schedule(e, now, b)) {
    return;
  }
  const double dt = costs_.step_time(b).total_s();
  e.busy = true;
  e.step_start = now;
  e.busy_until = now + dt;
  e.step_prefill_seqs = static_cast<int32_t>(b.prefill.size());
  e.step_prefill_tokens = 0;
  for (const auto& [n, c] : b.prefill) e.step_prefill_tokens += static_cast<int32_t>(n);
  e.step_decode_seqs = static_cast<int32_t>(b.decode_seqs);
  ++steps_;
  batch_sum_ += static_cast<double>(b.prefill.size() + static_cast<size_t>(b.decode_seqs));
  busy_s_ += dt;
}

void Simulation::token(Seq& s, double now) {
  const auto r = static_cast<size_t>(s.req);
  ++s.generated;
  if (std::isnan(first_token_[r])) {
    first_token_[r] = now;
  } else {
    itl_.add(now - s.last_token_s);
  }
  s.last_token_s = now;
}

void Simulation::finish(Engine& e, double now) {
  e.busy = false;
  e.busy_until = kInf;
  integrate(now);
  std::vector<Seq> keep;
  keep.reserve(e.running.size());
  bool all_done = true;
  for (Seq& s : e.running) {
    const int32_t n = s.sched;
    s.sched = 0;
    bool sampled = false;
    if (n > 0) {
      s.computed += n;
      if (s.in_prefill) {
        if (s.computed >= s.len()) {
          s.in_prefill = false;
          publish_prefix(e, s);
          sampled = true;
        }
      } else {
        sampled = true;
      }
    }
    if (sampled) token(s, now);
    const bool finished = !s.done && s.generated >= s.output;
    if (finished) {
      finish_[static_cast<size_t>(s.req)] = now;
      ++completed_;
      if (progress_ && (completed_ % 65536 == 0)) progress_(completed_, static_cast<int64_t>(w_.requests.size()));
    }
    if (s_.kind == SchedulerKind::static_batch && e.role == Role::mixed) {
      if (finished) s.done = true;
      all_done = all_done && s.done;
      keep.push_back(s);
      continue;
    }
    if (finished) {
      free_seq(e, s);
      --running_total_;
      continue;
    }
    if (e.role == Role::prefill && !s.in_prefill) {
      // The prompt is done: ship the cache to a decode engine.
      free_seq(e, s);
      --running_total_;
      const double bytes = static_cast<double>(s.computed) * costs_.memory().kv_bytes_per_token *
                           static_cast<double>(costs_.gpus());
      const double arrive = now + bytes / c_.kv_transfer_bytes_per_s;
      s.blocks = 0;
      in_transfer_[s.req] = s;
      transfers_.emplace(arrive, s.req);
      continue;
    }
    keep.push_back(s);
  }
  if (s_.kind == SchedulerKind::static_batch && e.role == Role::mixed && all_done) {
    for (Seq& s : keep) free_seq(e, s);
    running_total_ -= static_cast<int64_t>(keep.size());
    keep.clear();
  }
  e.running = std::move(keep);
  if (static_cast<int64_t>(records_.size()) < c_.record_steps) {
    records_.push_back({e.id, e.step_start, now, e.step_prefill_tokens, e.step_prefill_seqs, e.step_decode_seqs,
                        e.total_blocks > 0 ? 1.0 - static_cast<double>(e.free_blocks) / static_cast<double>(e.total_blocks)
                                           : 0.0});
  }
}

// Two neighbouring bins as one: means weighted by the bins' widths, the larger maxima.
TimelinePoint merged(const TimelinePoint& a, const TimelinePoint& b) {
  const double wa = a.t_s - a.start_s, wb = b.t_s - b.start_s;
  const double w = wa + wb > 0 ? wa + wb : 1.0;
  return {a.start_s, b.t_s, (a.kv_utilization * wa + b.kv_utilization * wb) / w,
          (a.waiting * wa + b.waiting * wb) / w, (a.running * wa + b.running * wb) / w,
          std::max(a.kv_utilization_max, b.kv_utilization_max), std::max(a.waiting_max, b.waiting_max),
          std::max(a.running_max, b.running_max)};
}

std::vector<TimelinePoint> merged_pairs(const std::vector<TimelinePoint>& points) {
  std::vector<TimelinePoint> half;
  half.reserve(points.size() / 2 + 1);
  for (size_t i = 0; i < points.size(); i += 2) {
    half.push_back(i + 1 < points.size() ? merged(points[i], points[i + 1]) : points[i]);
  }
  return half;
}

// A bin's integrals over its width: the means.
TimelinePoint closed(TimelinePoint p) {
  const double w = p.t_s - p.start_s;
  if (w > 0) {
    p.kv_utilization /= w;
    p.waiting /= w;
    p.running /= w;
  } else {
    p.kv_utilization = p.kv_utilization_max;
    p.waiting = p.waiting_max;
    p.running = p.running_max;
  }
  return p;
}

// The figures held over (from, to] go into each bin that interval covers; a state that lasts no
// time (to == from) still counts towards the maxima of the bin holding `to`.
void Simulation::record_timeline(double from, double to, double kv, double waiting, double running) {
  const int64_t bins = std::max<int64_t>(1, c_.timeline_bins);
  for (;;) {
    const double end = open_bin_.start_s + bin_;
    const double upto = std::min(to, end);
    const double dt = upto - from;
    if (dt > 0) {
      open_bin_.kv_utilization += dt * kv;
      open_bin_.waiting += dt * waiting;
      open_bin_.running += dt * running;
    }
    if (dt > 0 || to <= end) {
      open_bin_.kv_utilization_max = std::max(open_bin_.kv_utilization_max, kv);
      open_bin_.waiting_max = std::max(open_bin_.waiting_max, waiting);
      open_bin_.running_max = std::max(open_bin_.running_max, running);
      open_bin_used_ = true;
      open_bin_.t_s = std::max(open_bin_.t_s, upto);
    }
    if (to <= end) return;
    open_bin_.t_s = end;
    timeline_.push_back(closed(open_bin_));
    open_bin_ = TimelinePoint{};
    open_bin_.start_s = open_bin_.t_s = end;
    open_bin_used_ = false;
    from = end;
    // A run much longer than its arrivals: merge neighbouring bins and widen them.
    if (static_cast<int64_t>(timeline_.size()) >= 4 * bins) {
      timeline_ = merged_pairs(timeline_);
      bin_ *= 2.0;
    }
  }
}

// The closed bins, the open one up to the last event, merged pairwise down to the bins asked for.
std::vector<TimelinePoint> Simulation::timeline() const {
  std::vector<TimelinePoint> tl = timeline_;
  if (open_bin_used_) tl.push_back(closed(open_bin_));
  while (c_.timeline_bins > 0 && static_cast<int64_t>(tl.size()) > c_.timeline_bins) tl = merged_pairs(tl);
  return tl;
}

ServeResult Simulation::run() {
  const auto& reqs = w_.requests;
  size_t next = 0;
  auto pick = [&](Role role, size_t& rr) -> Engine& {
    std::vector<Engine*> pool;
    for (Engine& e : engines_) {
      if (e.role == role) pool.push_back(&e);
    }
    if (c_.router == RouterKind::round_robin) return *pool[rr++ % pool.size()];
    Engine* best = pool.front();
    for (Engine* e : pool) {
      if (e->outstanding() < best->outstanding()) best = e;
    }
    return *best;
  };
  const Role entry = c_.prefill_replicas > 0 ? Role::prefill : Role::mixed;
  for (;;) {
    const double ta = next < reqs.size() ? reqs[next].arrival_s : kInf;
    const double tt = transfers_.empty() ? kInf : transfers_.top().first;
    Engine* soonest = nullptr;
    for (Engine& e : engines_) {
      if (e.busy && (soonest == nullptr || e.busy_until < soonest->busy_until)) soonest = &e;
    }
    const double te = soonest ? soonest->busy_until : kInf;
    if (ta == kInf && tt == kInf && te == kInf) break;
    if (ta <= te && ta <= tt) {
      // Every request arriving at this instant is queued before any engine schedules, so that
      // simultaneous arrivals share a step.
      integrate(ta);
      touched_.clear();
      while (next < reqs.size() && reqs[next].arrival_s == ta) {
        const auto req = static_cast<int32_t>(next++);
        Engine& e = pick(entry, rr_);
        if (!admissible(e, req)) {
          ++rejected_;
          continue;
        }
        enqueue(e, req);
        touched_.push_back(&e);
      }
      for (Engine* e : touched_) start(*e, ta);
    } else if (tt <= te) {
      const int32_t req = transfers_.top().second;
      transfers_.pop();
      integrate(tt);
      Engine& e = pick(Role::decode, rr_decode_);
      Seq s = in_transfer_.at(req);
      in_transfer_.erase(req);
      // Decode engines reserve the whole request; a full engine queues it.
      e.parked[req] = s;
      e.fifo.push_back(req);
      ++waiting_total_;
      admit_transfers(e);
      start(e, tt);
    } else {
      Engine& e = *soonest;
      finish(e, te);
      if (e.role == Role::decode) admit_transfers(e);
      start(e, te);
    }
  }
  if (progress_) progress_(completed_, static_cast<int64_t>(reqs.size()));

  ServeResult r;
  r.requests = static_cast<int64_t>(reqs.size());
  r.completed = completed_;
  r.rejected = rejected_;
  r.gpus = c_.replicas * costs_.gpus();
  r.preemptions = preemptions_;
  r.steps = steps_;
  const double t0 = reqs.empty() ? 0.0 : reqs.front().arrival_s;
  double end = t0;
  std::vector<double> ttft, tpot, e2e, queue;
  ttft.reserve(reqs.size());
  int64_t out_tokens = 0, in_tokens = 0, good = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (std::isnan(finish_[i])) continue;
    end = std::max(end, finish_[i]);
    const double a = reqs[i].arrival_s;
    const double t = first_token_[i] - a;
    ttft.push_back(t);
    e2e.push_back(finish_[i] - a);
    queue.push_back(scheduled_[i] - a);
    double per_token = 0.0;
    if (reqs[i].output_len > 1) {
      per_token = (finish_[i] - first_token_[i]) / static_cast<double>(reqs[i].output_len - 1);
      tpot.push_back(per_token);
    }
    out_tokens += reqs[i].output_len;
    in_tokens += reqs[i].input_len;
    const bool ok = (c_.slo_ttft_s <= 0 || t <= c_.slo_ttft_s) && (c_.slo_tpot_s <= 0 || per_token <= c_.slo_tpot_s);
    good += ok ? 1 : 0;
  }
  r.makespan_s = end - t0;
  r.ttft = summarize(ttft);
  r.tpot = summarize(tpot);
  r.e2e = summarize(e2e);
  r.queueing = summarize(queue);
  r.itl = itl_.summary();
  if (r.makespan_s > 0) {
    r.requests_per_s = static_cast<double>(completed_) / r.makespan_s;
    r.output_tokens_per_s = static_cast<double>(out_tokens) / r.makespan_s;
    r.output_tokens_per_s_per_gpu = r.output_tokens_per_s / static_cast<double>(r.gpus);
    r.total_tokens_per_s = static_cast<double>(out_tokens + in_tokens) / r.makespan_s;
    r.goodput_requests_per_s = static_cast<double>(good) / r.makespan_s;
    r.kv_utilization_mean = kv_integral_ / (last_t_ - t0 > 0 ? last_t_ - t0 : 1.0);
    r.waiting_mean = waiting_integral_ / (last_t_ - t0 > 0 ? last_t_ - t0 : 1.0);
    r.busy_fraction = busy_s_ / (r.makespan_s * static_cast<double>(engines_.size()));
  }
  r.slo_attainment = completed_ > 0 ? static_cast<double>(good) / static_cast<double>(completed_) : 0.0;
  r.kv_utilization_max = kv_max_;
  r.waiting_max = waiting_max_;
  r.mean_batch_size = steps_ > 0 ? batch_sum_ / static_cast<double>(steps_) : 0.0;
  r.prefix_hit_rate = prompt_tokens_ > 0 ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0.0;
  if (c_.price_usd_per_gpu_hour > 0 && out_tokens > 0) {
    const double dollars = c_.price_usd_per_gpu_hour * static_cast<double>(r.gpus) * r.makespan_s / 3600.0;
    r.cost_per_million_output_tokens_usd = dollars / (static_cast<double>(out_tokens) / 1e6);
    r.cost_per_million_total_tokens_usd = dollars / (static_cast<double>(out_tokens + in_tokens) / 1e6);
  }
  r.timeline = timeline();
  r.steps_recorded = std::move(records_);
  r.request_ttft_s.resize(reqs.size());
  r.request_e2e_s.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    r.request_ttft_s[i] = std::isnan(finish_[i]) ? std::nan("") : first_token_[i] - reqs[i].arrival_s;
    r.request_e2e_s[i] = std::isnan(finish_[i]) ? std::nan("") : finish_[i] - reqs[i].arrival_s;
  }
  return r;
}

void check(const ServeConfig& c) {
  ACCELSIM_CHECK(c.replicas >= 1, "replicas must be at least 1");
  ACCELSIM_CHECK(c.scheduler.max_seqs >= 1, "max sequences per batch must be at least 1");
  ACCELSIM_CHECK(c.scheduler.max_batched_tokens >= 1, "max batched tokens must be at least 1");
  ACCELSIM_CHECK(c.scheduler.chunk >= 1, "the chunk (token budget per step) must be at least 1");
  require_in_range("", "the watermark", c.scheduler.watermark, {.lo = 0.0, .hi = 1.0, .hi_open = true});
  ACCELSIM_CHECK(c.prefill_replicas >= 0 && (c.prefill_replicas == 0 || c.prefill_replicas < c.replicas),
                 "disaggregation needs at least one prefill and one decode replica");
  require_in_range("", "the KV transfer bandwidth", c.kv_transfer_bytes_per_s, kNonNegative);
  // An infinite SLO is no target; NaN fails the comparison.
  ACCELSIM_CHECK(c.slo_ttft_s >= 0 && c.slo_tpot_s >= 0, "SLO targets must not be negative");
  require_in_range("", "the price per GPU-hour", c.price_usd_per_gpu_hour, kNonNegative);
}

// simulate_serving()'s promise (physical_range.h): every figure finite and not negative; a
// request's TTFT and end-to-end time are NaN only when it did not complete.
void require_physical(const ServeResult& r) {
  constexpr const char* kWhere = "the serving simulation";
  // A figure inside a percentile set, a timeline bin or a recorded step: "timeline.waiting_max".
  auto require_each = [&](const char* set, const auto& item) {
    for_each_figure(item, [&](const char* figure, double value) {
      if (!(std::isfinite(value) && value >= 0.0)) {
        throw_out_of_physical_range(kWhere, std::string(set) + "." + figure, value);
      }
    });
  };
  for_each_figure(r, [&](const char* figure, const auto& value) {
    using Figure = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<Figure, double>) {
      require_non_negative(kWhere, figure, value);
    } else if constexpr (std::is_same_v<Figure, Percentiles>) {
      require_each(figure, value);
    } else if constexpr (std::is_same_v<Figure, std::vector<double>>) {
      for (double v : value) {
        if (!std::isnan(v)) require_non_negative(kWhere, figure, v);
      }
    } else {
      for (const auto& item : value) require_each(figure, item);
    }
  });
}

// find_max_qps()'s promise: its rates finite and not negative (its run was checked when it ran).
void require_physical(const MaxQpsResult& found) {
  for_each_figure(found, [](const char* figure, double value) { require_non_negative("find_max_qps", figure, value); });
}

}  // namespace

ServeResult simulate_serving(IterationModel& costs, const Workload& workload, const ServeConfig& config,
                             const std::function<void(int64_t, int64_t)>& progress) {
  check(config);
  ServeConfig c = config;
  if (c.prefill_replicas > 0 && c.kv_transfer_bytes_per_s == 0.0) {
    // Each GPU of a replica sends its share of the cache over its NICs (the system's scale-out
    // fabric, at its efficiency).
    const std::optional<SystemSpec>& system = costs.replica().system;
    ACCELSIM_CHECK(system.has_value(), "disaggregation needs the system whose NICs move the KV cache, or its bandwidth");
    c.kv_transfer_bytes_per_s = system->scaleout.bandwidth_bytes_per_s * system->scaleout.efficiency *
                                system->nics_per_gpu * static_cast<double>(costs.gpus());
  }
  if (c.prefill_replicas > 0 && c.scheduler.kind != SchedulerKind::sarathi) {
    // Prefill engines run prompts in chunks of the token budget whatever the scheduler.
    c.scheduler.kind = SchedulerKind::sarathi;
  }
  Simulation sim(costs, workload, c, progress);
  ServeResult result = sim.run();
  require_physical(result);
  return result;
}

MaxQpsResult find_max_qps(IterationModel& costs, const WorkloadSpec& spec, const ServeConfig& config,
                          const std::function<void(int64_t, int64_t)>& progress) {
  ACCELSIM_CHECK(config.slo_ttft_s > 0 || config.slo_tpot_s > 0, "finding the maximum rate needs an SLO (TTFT or TPOT)");
  MaxQpsResult out;
  auto meets = [&](const ServeResult& r) {
    return r.rejected == 0 && r.completed == r.requests && (config.slo_ttft_s <= 0 || r.ttft.p99 <= config.slo_ttft_s) &&
           (config.slo_tpot_s <= 0 || r.tpot.p99 <= config.slo_tpot_s);
  };
  auto trial = [&](double qps) {
    WorkloadSpec s = spec;
    s.qps = qps;
    ++out.trials;
    if (progress) progress(out.trials, 0);
    return simulate_serving(costs, generate_workload(s), config);
  };
  // Bracket: start from the rate the replicas could at best sustain (one request's decode-bound
  // service over the largest batch), then halve or double.
  Workload probe = generate_workload(spec);
  double mean_out = 0.0;
  for (const Request& r : probe.requests) mean_out += r.output_len;
  mean_out /= static_cast<double>(probe.requests.size());
  const double step = costs.step_time({{}, config.scheduler.max_seqs, 0, -1}).total_s();
  double hi = std::max(1e-3, static_cast<double>(config.replicas * costs.replica().pp) * config.scheduler.max_seqs /
                                 (mean_out * std::max(step, 1e-6)));
  double lo = 0.0;
  ServeResult best;
  ServeResult r = trial(hi);
  if (meets(r)) {
    for (int i = 0; i < 30 && meets(r); ++i) {
      lo = hi;
      best = r;
      hi *= 2.0;
      r = trial(hi);
    }
    if (meets(r)) {  // the SLOs hold even with every request arriving nearly at once
      out.qps = hi;
      out.at_max = r;
      out.unbounded = true;
      out.qps_per_replica = hi / static_cast<double>(config.replicas);
      out.qps_per_gpu = out.qps_per_replica / static_cast<double>(costs.gpus());
      require_physical(out);
      return out;
    }
  } else {
    double q = hi;
    for (int i = 0; i < 30; ++i) {
      q /= 2.0;
      r = trial(q);
      if (meets(r)) {
        lo = q;
        best = r;
        break;
      }
      hi = q;
    }
    if (lo == 0.0) {
      out.qps = 0.0;
      out.at_max = r;
      return out;
    }
  }
  while (hi - lo > 0.02 * lo) {
    const double mid = 0.5 * (lo + hi);
    r = trial(mid);
    if (meets(r)) {
      lo = mid;
      best = r;
    } else {
      hi = mid;
    }
  }
  out.qps = lo;
  out.at_max = best;
  out.qps_per_replica = lo / static_cast<double>(config.replicas);
  out.qps_per_gpu = out.qps_per_replica / static_cast<double>(costs.gpus());
  require_physical(out);
  return out;
}

int64_t replicas_for_rate(const MaxQpsResult& found, double qps) {
  ACCELSIM_CHECK(qps > 0, "the target rate must be positive");
  if (!(found.qps_per_replica > 0)) return 0;
  return static_cast<int64_t>(std::ceil(qps / found.qps_per_replica * (1.0 - 1e-12)));
}

}  // namespace accelsim
