// Serving workloads: arrival processes and request lengths, reproducible from a seed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "accelsim/error.h"
#include "accelsim/serve.h"

namespace accelsim {
namespace {

// xoshiro256** seeded by splitmix64 (Blackman and Vigna, "Scrambled linear pseudorandom number
// generators", 2021): the same stream on every platform, unlike std:: distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in (0, 1): 53 random bits, never 0.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }
  double exponential() { return -std::log(uniform()); }
  // Gamma(shape, 1): Marsaglia and Tsang (2000), "A simple method for generating gamma
  // variables"; shape < 1 through Gamma(shape + 1) * U^(1 / shape).
  double gamma(double shape) {
    if (shape < 1.0) return gamma(shape + 1.0) * std::pow(uniform(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

void check_length(const LengthSpec& l, const char* what) {
  const std::string w = what;
  // Lengths are int32 in a Request.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  switch (l.kind) {
    case LengthDistribution::fixed:
      ACCELSIM_CHECK(l.value >= 1 && l.value <= kMax, w + " length must be in [1, 2^31)");
      break;
    case LengthDistribution::uniform:
    case LengthDistribution::lognormal:
      ACCELSIM_CHECK(l.min >= 1 && l.min <= l.max && l.max <= kMax,
                     w + " length range must satisfy 1 <= min <= max < 2^31");
      require_in_range("", w + " length mu", l.mu);
      require_in_range("", w + " length sigma", l.sigma, kNonNegative);
      break;
  }
}

int32_t draw_length(const LengthSpec& l, Rng& rng) {
  switch (l.kind) {
    case LengthDistribution::fixed:
      return static_cast<int32_t>(l.value);
    case LengthDistribution::uniform: {
      const auto span = static_cast<uint64_t>(l.max - l.min + 1);
      return static_cast<int32_t>(l.min + static_cast<int64_t>(rng.next() % span));
    }
    case LengthDistribution::lognormal: {
      const double x = std::exp(l.mu + l.sigma * rng.normal());
      const double r = std::clamp(std::round(x), static_cast<double>(l.min), static_cast<double>(l.max));
      return static_cast<int32_t>(r);
    }
  }
  return 1;
}

// Arrival times of n requests at mean rate qps (all at 0 when qps is not positive and finite).
std::vector<double> arrivals(const WorkloadSpec& spec, int64_t n, Rng& rng) {
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  ACCELSIM_CHECK(!std::isnan(spec.qps), "the arrival rate (qps) must be a number");
  if (!(spec.qps > 0.0) || std::isinf(spec.qps)) return t;
  require_in_range("", "burstiness (the gaps' coefficient of variation)", spec.burstiness, kPositive);
  const double mean_gap = 1.0 / spec.qps;
  // Gamma gaps with coefficient of variation cv: shape 1 / cv^2, scale mean * cv^2.
  const double shape = 1.0 / (spec.burstiness * spec.burstiness);
  double now = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      switch (spec.arrival) {
        case ArrivalProcess::poisson: now += mean_gap * rng.exponential(); break;
        case ArrivalProcess::gamma: now += mean_gap * rng.gamma(shape) / shape; break;
        case ArrivalProcess::constant: now += mean_gap; break;
      }
    }
    t[static_cast<size_t>(i)] = now;
  }
  return t;
}

}  // namespace

Workload generate_workload(const WorkloadSpec& spec) {
  ACCELSIM_CHECK(spec.requests >= 1, "a workload needs at least one request");
  check_length(spec.input, "input");
  check_length(spec.output, "output");
  require_in_range("the workload", "the shared prefix fraction", spec.shared_prefix,
                   Interval{.lo = 0.0, .hi = 1.0, .hi_open = true});
  Rng rng(spec.seed);
  Workload w;
  const std::vector<double> t = arrivals(spec, spec.requests, rng);
  w.requests.resize(static_cast<size_t>(spec.requests));
  for (size_t i = 0; i < w.requests.size(); ++i) {
    Request& r = w.requests[i];
    r.arrival_s = t[i];
    r.input_len = draw_length(spec.input, rng);
    r.output_len = draw_length(spec.output, rng);
  }
  if (spec.shared_prefix > 0) {
    // Hashes 0, 1, ... for the shared blocks of every prompt; the rest numbered on from past the
    // longest shared run, so that no two requests share them.
    constexpr int64_t kBlock = kSharedPrefixBlockTokens;
    w.hash_block_tokens = kBlock;
    int64_t next = 0;
    for (const Request& r : w.requests) next = std::max<int64_t>(next, r.input_len / kBlock);
    for (Request& r : w.requests) {
      const int64_t blocks = r.input_len / kBlock;
      const auto shared = std::min<int64_t>(
          blocks, static_cast<int64_t>(std::floor(spec.shared_prefix * static_cast<double>(r.input_len))) / kBlock);
      r.hash_begin = static_cast<int64_t>(w.hashes.size());
      for (int64_t b = 0; b < blocks; ++b) w.hashes.push_back(b < shared ? b : next++);
      r.hash_end = static_cast<int64_t>(w.hashes.size());
    }
  }
  return w;
}

Workload workload_from_arrays(const std::vector<double>& arrival_s, const std::vector<int64_t>& input_len,
                              const std::vector<int64_t>& output_len, const std::vector<int64_t>& hashes,
                              const std::vector<int64_t>& hash_offsets, int64_t hash_block_tokens,
                              const WorkloadSpec& spec, bool rescale_to_qps) {
  const size_t n = input_len.size();
  ACCELSIM_CHECK(n >= 1, "a workload needs at least one request");
  ACCELSIM_CHECK(output_len.size() == n, "input and output lengths differ in count");
  ACCELSIM_CHECK(arrival_s.empty() || arrival_s.size() == n, "arrival times and lengths differ in count");
  ACCELSIM_CHECK(hash_offsets.empty() || hash_offsets.size() == n + 1, "hash offsets must number requests + 1");
  ACCELSIM_CHECK(hash_offsets.empty() || hash_block_tokens >= 1, "prefix hashes need a block size in tokens");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  Workload w;
  w.hashes = hashes;
  w.hash_block_tokens = hash_offsets.empty() ? 0 : hash_block_tokens;
  Rng rng(spec.seed);
  const std::vector<double> t = arrival_s.empty() ? arrivals(spec, static_cast<int64_t>(n), rng) : arrival_s;
  w.requests.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto at = [&] { return "request " + std::to_string(i + 1) + ": "; };  // built only on failure
    ACCELSIM_CHECK(input_len[i] >= 1 && input_len[i] <= kMax, at() + "input length must be in [1, 2^31)");
    ACCELSIM_CHECK(output_len[i] >= 1 && output_len[i] <= kMax, at() + "output length must be in [1, 2^31)");
    ACCELSIM_CHECK(std::isfinite(t[i]) && t[i] >= 0.0, at() + "arrival time must be finite and >= 0");
    ACCELSIM_CHECK(i == 0 || t[i] >= t[i - 1], at() + "arrival times must not decrease");
    Request& r = w.requests[i];
    r.arrival_s = t[i];
    r.input_len = static_cast<int32_t>(input_len[i]);
    r.output_len = static_cast<int32_t>(output_len[i]);
    if (!hash_offsets.empty()) {
      r.hash_begin = hash_offsets[i];
      r.hash_end = hash_offsets[i + 1];
      ACCELSIM_CHECK(0 <= r.hash_begin && r.hash_begin <= r.hash_end &&
                         r.hash_end <= static_cast<int64_t>(hashes.size()),
                     at() + "hash offsets out of range");
    }
  }
  if (!arrival_s.empty() && rescale_to_qps) {
    require_in_range("", "the rate a trace is rescaled to (qps)", spec.qps, kPositive);
    const double t0 = t.front();
    const double span = t.back() - t0;
    if (n > 1 && span > 0) {
      const double scale = static_cast<double>(n - 1) / spec.qps / span;
      for (Request& r : w.requests) r.arrival_s = (r.arrival_s - t0) * scale;
    }
  }
  return w;
}

LengthSpec fit_lognormal(const std::vector<int64_t>& lengths) {
  ACCELSIM_CHECK(!lengths.empty(), "fitting a length distribution needs at least one length");
  double sum = 0.0, sq = 0.0;
  LengthSpec l;
  l.kind = LengthDistribution::lognormal;
  l.min = std::numeric_limits<int64_t>::max();
  l.max = 0;
  for (int64_t x : lengths) {
    ACCELSIM_CHECK(x >= 1, "lengths must be at least 1 token");
    const double y = std::log(static_cast<double>(x));
    sum += y;
    sq += y * y;
    l.min = std::min(l.min, x);
    l.max = std::max(l.max, x);
  }
  const auto n = static_cast<double>(lengths.size());
  l.mu = sum / n;
  l.sigma = std::sqrt(std::max(0.0, sq / n - l.mu * l.mu));
  return l;
}

}  // namespace accelsim
