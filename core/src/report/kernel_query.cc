#include "accelsim/kernel_query.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "accelsim/error.h"
#include "accelsim/physical_range.h"
#include "accelsim/graph.h"

namespace accelsim {
namespace {

TensorId tensor(Graph& g, std::vector<int64_t> shape, DType dtype) {
  TensorMeta t{.shape = std::move(shape), .dtype = dtype};
  t.storage = g.add_storage({.size_bytes = t.logical_bytes(), .kind = StorageKind::activation});
  return g.add_tensor(std::move(t));
}

// The named streaming ops: passes over the elements (reads plus writes), whether the op
// reduces over rows (norms, softmax) rather than touching each element alone, and the class of
// PyTorch eager's own (ATen) kernel for it, whose bandwidth share the cost model applies
// (KernelConstants: softmax, norms, and copies that widen their elements).
struct StreamingOp {
  const char* name;
  double passes;
  bool reduces;
  OpClass aten_class = OpClass::elementwise;
};
constexpr StreamingOp kStreamingOps[] = {
    {"relu", 2, false},
    {"gelu", 2, false},
    {"silu", 2, false},
    {"sigmoid", 2, false},
    {"tanh", 2, false},
    {"exp", 2, false},
    {"neg", 2, false},
    {"copy", 2, false, OpClass::copy},
    {"cast", 2, false, OpClass::copy},
    {"add", 3, false},
    {"mul", 3, false},
    {"sub", 3, false},
    {"div", 3, false},
    {"rms_norm", 2, true, OpClass::normalization},
    {"layer_norm", 2, true, OpClass::normalization},
    {"softmax", 2, true, OpClass::softmax},
    {"rope", 2, true},
};

const StreamingOp* find_streaming_op(const std::string& op) {
  for (const StreamingOp& s : kStreamingOps) {
    if (op == s.name) return &s;
  }
  return nullptr;
}

double streaming_passes(const std::string& op) {
  if (const StreamingOp* s = find_streaming_op(op)) return s->passes;
  std::string known;
  for (const StreamingOp& s : kStreamingOps) known += (known.empty() ? "" : ", ") + std::string(s.name);
  throw ConfigError("unknown memory-bound op '" + op + "' (known: " + known + ")");
}

// A copy that permutes [batch, heads, seq, dim] to [batch, seq, heads, dim] reads along strides:
// on an H100 it moved 537 MB in 0.376 ms, half the rate of a contiguous copy
// (validation/measured/h100_sxm-2026-11-25/module_kernels.csv); counted as two passes.
constexpr double kPermutedCopyPasses = 2.0;

// The smallest ATen softmax, norm or cast whose time fits a bandwidth share: below it the
// kernel floor and the host's dispatch (about 10 us for an eager layer_norm on H100 and H200,
// validation/measured/*-2026-11-24/measurements.csv) set the time.
constexpr double kShareMinBytes = 32e6;

// Whether a memory-bound query is a copy that writes more bytes than it reads: a cast to a wider
// type (its bytes exceed the copy's two passes over its elements at its dtype's size).
bool widens(const KernelQuery& q) {
  const StreamingOp* op = find_streaming_op(q.op);
  return op != nullptr && op->aten_class == OpClass::copy && q.elements > 0 &&
         q.bytes > op->passes * q.elements * static_cast<double>(size_bytes(q.dtype));
}

// The one-node graphs whose op the catalogue counts.
std::vector<OpCount> counts_of(const KernelQuery& q) {
  Graph g;
  std::vector<OpCount> counts;
  auto add = [&](const char* op, std::vector<TensorId> in, std::vector<TensorId> out,
                 std::vector<Attr> attrs = {}) {
    const NodeId n = g.add_node(Node{.op = op, .inputs = std::move(in), .outputs = std::move(out),
                                     .attrs = std::move(attrs)});
    counts.push_back(count_op(g, g.node(n)));
  };
  switch (q.kind) {
    case KernelKind::matmul: {
      ACCELSIM_CHECK(q.m > 0 && q.n > 0 && q.k > 0 && q.batch > 0,
                     "a matmul needs positive m, n, k and batch");
      // fp8 GEMMs (torch._scaled_mm, CUTLASS and DeepGEMM fp8 kernels) write a bf16 result.
      const bool fp8 = q.dtype == DType::fp8_e4m3 || q.dtype == DType::fp8_e5m2;
      const DType out = fp8 ? DType::bf16 : q.dtype;
      if (q.batch == 1) {
        add("mm", {tensor(g, {q.m, q.k}, q.dtype), tensor(g, {q.k, q.n}, q.dtype)},
            {tensor(g, {q.m, q.n}, out)});
      } else {
        add("bmm", {tensor(g, {q.batch, q.m, q.k}, q.dtype), tensor(g, {q.batch, q.k, q.n}, q.dtype)},
            {tensor(g, {q.batch, q.m, q.n}, out)});
      }
      break;
    }
    case KernelKind::attention: {
      ACCELSIM_CHECK(q.batch > 0 && q.heads > 0 && q.seq_q > 0 && q.seq_k > 0 && q.head_dim > 0,
                     "attention needs positive batch, heads, seq_q, seq_k and head_dim");
      const int64_t kv = q.kv_heads > 0 ? q.kv_heads : q.heads;
      ACCELSIM_CHECK(q.heads % kv == 0, "attention heads must be a multiple of the KV heads");
      ACCELSIM_CHECK(q.forward || q.backward, "time the forward, the backward, or both");
      const std::vector<int64_t> qs{q.batch, q.heads, q.seq_q, q.head_dim};
      const std::vector<int64_t> ks{q.batch, kv, q.seq_k, q.head_dim};
      const std::vector<Attr> attrs = {{"is_causal", q.causal}, {"enable_gqa", kv != q.heads}};
      const TensorId query = tensor(g, qs, q.dtype), key = tensor(g, ks, q.dtype);
      const TensorId value = tensor(g, ks, q.dtype), out = tensor(g, qs, q.dtype);
      const TensorId lse = tensor(g, {q.batch, q.heads, q.seq_q}, DType::fp32);
      if (q.forward) add("accel_sim::attention", {query, key, value}, {out, lse}, attrs);
      if (q.backward) {
        if (q.heads_first_inputs && q.impl == AttentionImpl::flash2) {
          // The output and its gradient permuted to [batch, seq, heads, head_dim]: a strided
          // copy each, which ran at half the bandwidth of a contiguous one on an H100 (0.376 ms
          // per 268 MB copied, module_kernels.csv), counted as twice its bytes.
          const double copied = static_cast<double>(q.batch * q.heads * q.seq_q * q.head_dim) *
                                static_cast<double>(size_bytes(q.dtype));
          for (int i = 0; i < 2; ++i) {
            OpCount copy;
            copy.op_class = OpClass::elementwise;
            copy.compute_dtype = q.dtype;
            copy.bytes_read = kPermutedCopyPasses * copied;
            copy.bytes_written = kPermutedCopyPasses * copied;
            counts.push_back(copy);
          }
        }
        add("accel_sim::attention_backward", {tensor(g, qs, q.dtype), query, key, value, out, lse},
            {tensor(g, qs, q.dtype), tensor(g, ks, q.dtype), tensor(g, ks, q.dtype)}, attrs);
      }
      break;
    }
    case KernelKind::memory: {
      require_in_range("a memory-bound kernel", "bytes", q.bytes, kNonNegative);
      require_in_range("a memory-bound kernel", "elements", q.elements, kNonNegative);
      double bytes = q.bytes;
      if (bytes <= 0) {
        ACCELSIM_CHECK(q.elements > 0, "a memory-bound kernel needs its elements (or bytes)");
        const double passes = streaming_passes(q.op);
        bytes = passes * q.elements * static_cast<double>(size_bytes(q.dtype));
      }
      ACCELSIM_CHECK(bytes > 0, "a memory-bound kernel needs its bytes");
      OpCount c;
      c.op_class = OpClass::elementwise;
      c.compute_dtype = DType::fp32;
      c.flops = q.elements;
      c.bytes_read = bytes;
      const StreamingOp* named = find_streaming_op(q.op);
      if (q.aten_kernel && named != nullptr) {
        c.op_class = named->aten_class;
        if (c.op_class == OpClass::copy && q.elements > 0) {
          // A copy reads its elements of q.dtype and writes the rest: more when a cast widens them.
          c.bytes_read = std::min(bytes, q.elements * static_cast<double>(size_bytes(q.dtype)));
          c.bytes_written = bytes - c.bytes_read;
        }
      }
      counts.push_back(c);
      break;
    }
  }
  return counts;
}

}  // namespace

KernelEstimate estimate_kernel(const KernelQuery& query, const DeviceSpec& device,
                               std::string_view cost_model, const CostOptions& options) {
  device.validate();
  const std::unique_ptr<CostModel> model = make_cost_model(cost_model);
  const RooflineCostModel roofline;
  CostOptions o = options;
  if (query.kind == KernelKind::attention) o.attention_impl = query.impl;
  KernelEstimate e;
  double longest = 0;
  for (const OpCount& c : counts_of(query)) {
    const OpCost cost = model->cost(c, device, o);
    e.time_s += cost.time_s;
    e.roofline_time_s += roofline.cost(c, device, o).time_s;
    e.flops += c.flops;
    e.bytes += c.bytes();
    if (cost.time_s > longest) {
      longest = cost.time_s;
      e.bound = cost.bound;
    }
  }
  if (query.timed_alone) {
    const double alone = query.kind == KernelKind::memory ? device.kernel.alone_stream_overhead_s
                                                          : device.kernel.alone_kernel_overhead_s;
    e.time_s += alone;
    e.roofline_time_s += alone;
  }
  if (e.time_s > 0) {
    e.achieved_flops_per_s = e.flops / e.time_s;
    e.achieved_bytes_per_s = e.bytes / e.time_s;
  }
  const std::pair<const char*, double> figures[] = {
      {"time_s", e.time_s}, {"roofline_time_s", e.roofline_time_s}, {"flops", e.flops}, {"bytes", e.bytes},
      {"achieved_flops_per_s", e.achieved_flops_per_s}, {"achieved_bytes_per_s", e.achieved_bytes_per_s},
  };
  for (const auto& [figure, value] : figures) require_non_negative("estimate_kernel", figure, value);
  return e;
}

ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ACCELSIM_CHECK(predicted.size() == measured.size(), "predicted and measured differ in length");
  ErrorStats s;
  s.rows = static_cast<int64_t>(predicted.size());
  if (predicted.empty()) return s;
  std::vector<double> abs_err, signed_err;
  for (size_t i = 0; i < predicted.size(); ++i) {
    ACCELSIM_CHECK(measured[i] > 0, "measured times must be positive");
    const double e = predicted[i] / measured[i] - 1.0;
    signed_err.push_back(e);
    abs_err.push_back(std::abs(e));
  }
  // Quantiles by the nearest-rank-with-interpolation rule (numpy's default, "linear").
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.median_abs_error = quantile(abs_err, 0.5);
  s.p90_abs_error = quantile(abs_err, 0.9);
  s.max_abs_error = *std::max_element(abs_err.begin(), abs_err.end());
  s.median_signed_error = quantile(signed_err, 0.5);
  return s;
}

namespace {

// Measured kernels are device times: no host waits between launches (a timed-alone row's own
// launch and ramp are KernelConstants' alone overheads).
CostOptions device_times() {
  CostOptions o;
  o.include_launch_overhead = false;
  return o;
}

// Mean |log(predicted / measured)| of the rows selected by `pick` under constants `k` (the
// mean, not the median, so that every row pulls on the constant).
template <typename Pick>
double fit_loss(const std::vector<KernelQuery>& queries, const std::vector<double>& measured,
                DeviceSpec device, const KernelConstants& k, Pick pick) {
  device.kernel = k;
  std::vector<double> errors;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (!pick(queries[i])) continue;
    const double t = estimate_kernel(queries[i], device, "kernel", device_times()).time_s;
    errors.push_back(std::abs(std::log(t / measured[i])));
  }
  if (errors.empty()) return -1;
  double sum = 0;
  for (double e : errors) sum += e;
  return sum / static_cast<double>(errors.size());
}

// Grid search of one field over [lo, hi] in `steps` steps; keeps the field when no row applies.
template <typename Pick>
bool fit_field(const std::vector<KernelQuery>& queries, const std::vector<double>& measured,
               const DeviceSpec& device, KernelConstants& k, const std::vector<std::string>& keep,
               const char* name, double KernelConstants::*field, double lo, double hi, int steps,
               Pick pick) {
  if (std::find(keep.begin(), keep.end(), name) != keep.end()) return false;  // held at its value
  // The current value stands unless a grid value does measurably better (rows that do not
  // depend on the constant, e.g. bandwidth-bound GEMMs for the matmul efficiency, leave it).
  const double current = fit_loss(queries, measured, device, k, pick);
  if (current < 0) return false;
  double best_value = k.*field, best = current * (1.0 - 1e-3);
  for (int i = 0; i <= steps; ++i) {
    KernelConstants trial = k;
    trial.*field = lo + (hi - lo) * i / steps;
    const double loss = fit_loss(queries, measured, device, trial, pick);
    if (loss < best) {
      best = loss;
      best_value = trial.*field;
    }
  }
  k.*field = best_value;
  return true;
}

}  // namespace

const std::set<std::string>& kernel_constant_names() {
  static const std::set<std::string> names = {
      "matmul_efficiency",  "fp8_matmul_efficiency", "unaligned_matmul_efficiency",
      "attention_efficiency",
      "attention_backward_efficiency", "flash3_efficiency", "cudnn_efficiency",
      "cudnn_backward_efficiency", "fp8_attention_efficiency", "memory_efficiency",
      "gemm_memory_efficiency", "gemm_tile_overhead_s", "kernel_floor_s", "stream_floor_s",
      "alone_kernel_overhead_s", "alone_stream_overhead_s", "sustained_clock_fraction",
      "softmax_bandwidth_share", "norm_bandwidth_share", "widening_cast_bandwidth_share"};
  return names;
}

double fit_sustained_clock_fraction(const std::vector<KernelQuery>& queries,
                                    const std::vector<double>& measured_s, const DeviceSpec& device,
                                    int* rows_used) {
  ACCELSIM_CHECK(queries.size() == measured_s.size(), "queries and measurements differ in length");
  auto sustained = [&](size_t i) { return queries[i].kind == KernelKind::matmul && measured_s[i] >= kSustainedKernelS; };
  int64_t long_rows = 0;
  for (size_t i = 0; i < queries.size(); ++i) long_rows += sustained(i) ? 1 : 0;
  if (rows_used != nullptr) *rows_used = 0;
  if (long_rows < kSustainedMinRows) return 0.0;
  ACCELSIM_CHECK(device.clock_hz > 0, "fitting a sustained clock needs the device's clock_mhz");
  DeviceSpec d = device;
  d.kernel.sustained_clock_fraction = 0.0;
  CostOptions options;
  options.include_launch_overhead = false;
  std::vector<double> clocks;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (!sustained(i)) continue;
    auto time_at = [&](double clock_hz) {
      options.clock_hz = clock_hz;
      return estimate_kernel(queries[i], d, "kernel", options).time_s;
    };
    // The time falls as the clock rises: bisect between a fifth and twice the device's clock.
    double lo = 0.2 * d.clock_hz, hi = 2.0 * d.clock_hz;
    if (time_at(lo) < measured_s[i] || time_at(hi) > measured_s[i]) continue;  // no clock matches it
    for (int step = 0; step < 60; ++step) {
      const double mid = 0.5 * (lo + hi);
      (time_at(mid) > measured_s[i] ? lo : hi) = mid;
    }
    clocks.push_back(0.5 * (lo + hi));
  }
  if (rows_used != nullptr) *rows_used = static_cast<int>(clocks.size());
  if (static_cast<int>(clocks.size()) < kSustainedMinRows) return 0.0;
  std::sort(clocks.begin(), clocks.end());
  const size_t n = clocks.size();
  const double median = n % 2 == 1 ? clocks[n / 2] : 0.5 * (clocks[n / 2 - 1] + clocks[n / 2]);
  return std::min(1.0, median / d.clock_hz);
}

KernelConstants fit_kernel_constants(const std::vector<KernelQuery>& queries,
                                     const std::vector<double>& measured_s,
                                     const DeviceSpec& device,
                                     const std::vector<std::string>& keep) {
  ACCELSIM_CHECK(queries.size() == measured_s.size(), "queries and measurements differ in length");
  for (const std::string& name : keep) {
    ACCELSIM_CHECK(kernel_constant_names().count(name) > 0,
                   "unknown kernel constant '" + name + "' to keep");
  }
  const KernelConstants initial = device.kernel;
  // The streaming constants describe kernels that only stream: where a device has element-wise
  // rows, they alone fit them. Reductions over rows (softmax, norms) can be bound by their SMs:
  // torch's softmax over rows of 4,096 streams at 0.39 of the H100's DRAM peak in a CUDA graph
  // where add reaches 0.91 (validation/measured/h100_sxm-2026-11-24/stream_ops.csv).
  auto elementwise = [](const KernelQuery& q) {
    const StreamingOp* op = find_streaming_op(q.op);
    return q.kind == KernelKind::memory && op != nullptr && !op->reduces &&
           !(q.aten_kernel && widens(q));
  };
  // ATen's softmax, norms and widening casts, large enough that their bandwidth and not the floor
  // or the host sets their time, fit their bandwidth shares.
  auto aten_streaming = [](OpClass op_class) {
    return [op_class](const KernelQuery& q) {
      const StreamingOp* op = find_streaming_op(q.op);
      return q.kind == KernelKind::memory && q.aten_kernel && q.bytes >= kShareMinBytes &&
             op != nullptr && op->aten_class == op_class &&
             (op_class != OpClass::copy || widens(q));
    };
  };
  const bool has_elementwise = std::any_of(queries.begin(), queries.end(), elementwise);
  auto memory = [=](const KernelQuery& q) {
    return q.kind == KernelKind::memory && (!has_elementwise || elementwise(q));
  };
  auto library = [](const KernelQuery& q) { return q.kind != KernelKind::memory; };
  // A floor and its alone overhead are told apart only by rows of both timings of their class.
  // Rows timed alone show only their sum, which belongs to the timing: a kernel timed alone after
  // an L2-flushing write pays its ramp from cold caches and its launch latency, where a stream
  // overlaps them (on H100 SXM and H200, whose rows have both timings, the in-stream floors come
  // out 1.75-3 us and the alone overheads 1.6-7 us). So such a class fits its alone overhead and
  // its in-stream floor keeps the device's value; rows timed in a stream fit the floor alone. A
  // floor fitted from alone rows had been read as the in-stream cost of every small kernel of a
  // simulated step (A100: 7 us per kernel in a CUDA-graphed decode).
  std::vector<std::string> held = keep;         // the alone overheads not to fit
  std::vector<std::string> held_floors = keep;  // the floors not to fit
  auto timings = [&](auto pick) {
    std::pair<bool, bool> alone_stream{false, false};
    for (const KernelQuery& q : queries) {
      if (!pick(q)) continue;
      (q.timed_alone ? alone_stream.first : alone_stream.second) = true;
    }
    return alone_stream;
  };
  const auto [library_alone, library_stream] = timings(library);
  const auto [memory_alone, memory_stream] = timings(memory);
  if (!library_alone) held.push_back("alone_kernel_overhead_s");
  if (!memory_alone) held.push_back("alone_stream_overhead_s");
  if (library_alone && !library_stream) held_floors.push_back("kernel_floor_s");
  if (memory_alone && !memory_stream) held_floors.push_back("stream_floor_s");
  auto is_fp8 = [](DType d) { return d == DType::fp8_e4m3 || d == DType::fp8_e5m2; };
  auto aligned = [](const KernelQuery& q) { return gemm_leading_dims_aligned(q.n, q.k, q.dtype); };
  auto matmul = [&](const KernelQuery& q) {
    return q.kind == KernelKind::matmul && !is_fp8(q.dtype) && aligned(q);
  };
  auto unaligned_matmul = [&](const KernelQuery& q) {
    return q.kind == KernelKind::matmul && !aligned(q);
  };
  auto fp8_matmul = [&](const KernelQuery& q) {
    return q.kind == KernelKind::matmul && is_fp8(q.dtype) && aligned(q);
  };
  auto any_matmul = [](const KernelQuery& q) { return q.kind == KernelKind::matmul; };
  auto attention = [&](AttentionImpl impl, bool backward) {
    return [=](const KernelQuery& q) {
      return q.kind == KernelKind::attention && q.impl == impl && q.backward == backward &&
             q.forward != backward && !is_fp8(q.dtype);
    };
  };
  auto fp8_attention = [&](const KernelQuery& q) {
    return q.kind == KernelKind::attention && q.forward && !q.backward && is_fp8(q.dtype) &&
           q.impl != AttentionImpl::eager;
  };
  // Coordinate descent: the floor and the bandwidth of streaming kernels from the memory-bound
  // rows (small ones show the floor, large ones the bandwidth); the floor of library kernels,
  // the GEMM bandwidth and tile overhead, the matmul and the attention efficiencies from the
  // GEMM and attention rows. The constants interact (a floor shifts every small kernel), so the
  // passes repeat.
  auto descend = [&](KernelConstants& k) {
    bool any = false;
    for (int round = 0; round < 8; ++round) {
      any |= fit_field(queries, measured_s, device, k, held, "alone_stream_overhead_s",
                       &KernelConstants::alone_stream_overhead_s, 0.0, 10e-6, 80, memory);
      any |= fit_field(queries, measured_s, device, k, held, "alone_kernel_overhead_s",
                       &KernelConstants::alone_kernel_overhead_s, 0.0, 20e-6, 80, library);
      any |= fit_field(queries, measured_s, device, k, held_floors, "stream_floor_s",
                       &KernelConstants::stream_floor_s, 0.5e-6,
                       20e-6, 78, memory);
      any |= fit_field(queries, measured_s, device, k, keep, "memory_efficiency",
                       &KernelConstants::memory_efficiency, 0.40,
                       1.00, 60, memory);
      any |= fit_field(queries, measured_s, device, k, held_floors, "kernel_floor_s",
                       &KernelConstants::kernel_floor_s, 0.5e-6,
                       10e-6, 38, library);
      const double gemm_bandwidth = k.gemm_memory_efficiency;
      if (gemm_bandwidth <= 0) k.gemm_memory_efficiency = k.memory_efficiency;
      // Up to 0.95: no GPU streams at its DRAM peak (the best streaming kernels in
      // validation/kernels.csv reach about 0.9 of it).
      if (fit_field(queries, measured_s, device, k, keep, "gemm_memory_efficiency",
                    &KernelConstants::gemm_memory_efficiency, 0.40,
                    0.95, 55, any_matmul)) {
        any = true;
      } else {
        k.gemm_memory_efficiency = gemm_bandwidth;  // no GEMM rows: as the streaming kernels
      }
      any |= fit_field(queries, measured_s, device, k, keep, "gemm_tile_overhead_s",
                       &KernelConstants::gemm_tile_overhead_s, 0.0,
                       4e-6, 40, any_matmul);
      any |= fit_field(queries, measured_s, device, k, keep, "matmul_efficiency",
                       &KernelConstants::matmul_efficiency, 0.30,
                       1.00, 70, matmul);
      if (k.fp8_matmul_efficiency <= 0) k.fp8_matmul_efficiency = k.matmul_efficiency;
      any |= fit_field(queries, measured_s, device, k, keep, "unaligned_matmul_efficiency",
                       &KernelConstants::unaligned_matmul_efficiency, 0.05, 1.00, 95,
                       unaligned_matmul);
      any |= fit_field(queries, measured_s, device, k, keep, "fp8_matmul_efficiency",
                       &KernelConstants::fp8_matmul_efficiency, 0.30,
                       1.00, 70, fp8_matmul);
      any |= fit_field(queries, measured_s, device, k, keep, "attention_efficiency",
                       &KernelConstants::attention_efficiency, 0.15,
                       1.00, 85, attention(AttentionImpl::flash2, false));
      any |= fit_field(queries, measured_s, device, k, keep, "attention_backward_efficiency",
                       &KernelConstants::attention_backward_efficiency, 0.15, 1.00, 85,
                       attention(AttentionImpl::flash2, true));
      any |= fit_field(queries, measured_s, device, k, keep, "flash3_efficiency",
                       &KernelConstants::flash3_efficiency, 0.15,
                       1.00, 85, attention(AttentionImpl::flash3, false));
      any |= fit_field(queries, measured_s, device, k, keep, "cudnn_efficiency",
                       &KernelConstants::cudnn_efficiency, 0.15,
                       1.00, 85, attention(AttentionImpl::cudnn, false));
      any |= fit_field(queries, measured_s, device, k, keep, "cudnn_backward_efficiency",
                       &KernelConstants::cudnn_backward_efficiency,
                       0.15, 1.00, 85, attention(AttentionImpl::cudnn, true));
      any |= fit_field(queries, measured_s, device, k, keep, "fp8_attention_efficiency",
                       &KernelConstants::fp8_attention_efficiency,
                       0.10, 1.00, 90, fp8_attention);
      any |= fit_field(queries, measured_s, device, k, keep, "softmax_bandwidth_share",
                       &KernelConstants::softmax_bandwidth_share, 0.10, 1.00, 90,
                       aten_streaming(OpClass::softmax));
      any |= fit_field(queries, measured_s, device, k, keep, "norm_bandwidth_share",
                       &KernelConstants::norm_bandwidth_share, 0.10, 1.00, 90,
                       aten_streaming(OpClass::normalization));
      any |= fit_field(queries, measured_s, device, k, keep, "widening_cast_bandwidth_share",
                       &KernelConstants::widening_cast_bandwidth_share, 0.10, 1.00, 90,
                       aten_streaming(OpClass::copy));
    }
    return any;
  };
  // Starting from the device's constants (its prior), a constant the rows do not pin down (a
  // floor and a tile overhead trade off on small GEMMs) stays near it.
  KernelConstants fitted = initial;
  bool any = descend(fitted);
  // Then the clock the long GEMMs ran at, under the other constants as fitted; too few long rows
  // leave the device's value.
  if (std::find(keep.begin(), keep.end(), "sustained_clock_fraction") == keep.end()) {
    DeviceSpec with_fitted = device;
    with_fitted.kernel = fitted;
    int used = 0;
    const double fraction = fit_sustained_clock_fraction(queries, measured_s, with_fitted, &used);
    if (used >= kSustainedMinRows) {
      fitted.sustained_clock_fraction = fraction;
      any = true;
    }
  }
  fitted.calibrated = initial.calibrated || any;
  return fitted;
}

double latency_error_band(const SimulationResult& result, const ClassErrors& errors) {
  // A weighted mean of these over simulate()'s finite times: finite and not negative when they are.
  require_in_range("latency_error_band", "errors.gemm", errors.gemm, kNonNegative);
  require_in_range("latency_error_band", "errors.attention", errors.attention, kNonNegative);
  require_in_range("latency_error_band", "errors.memory", errors.memory, kNonNegative);
  double weighted = 0, total = 0;
  for (const OpResult& op : result.ops) {
    const OpClass c = op.count.op_class;
    const double t = op.cost.time_s;
    if (c == OpClass::communication || t <= 0) continue;
    const double e = c == OpClass::matmul || c == OpClass::convolution ? errors.gemm
                     : c == OpClass::attention                         ? errors.attention
                                                                       : errors.memory;
    weighted += t * e;
    total += t;
  }
  return total > 0 ? weighted / total : 0.0;
}

}  // namespace accelsim
