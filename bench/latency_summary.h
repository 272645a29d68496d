// The latency summary every bench tool reports (card_perf_bench, ftl_latency_bench,
// vsl-bench): count, average, population standard deviation, p50/p99/p99.9 and maximum,
// in microseconds from samples in nanoseconds. Percentiles are nearest-rank: the
// smallest sample with at least p of all samples at or below it, so p99 of 100 samples
// is the 99th smallest and p100 the maximum. Header-only and C++17-clean.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace vsl::bench {

struct LatencySummary {
  uint64_t count = 0;
  double avg_us = 0, stddev_us = 0, p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Nearest-rank percentile `p` (0 < p <= 1) of sorted `ns`, in microseconds; 0 when empty.
template <typename T>
double PercentileUs(const std::vector<T>& sorted_ns, double p) {
  if (sorted_ns.empty()) return 0;
  const double rank = std::ceil(p * static_cast<double>(sorted_ns.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return static_cast<double>(sorted_ns[std::min(sorted_ns.size() - 1, i)]) / 1e3;
}

// Sorts `ns` in place and summarizes it (all zero when empty).
template <typename T>
LatencySummary SummarizeLatency(std::vector<T>& ns) {
  LatencySummary s;
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  double sum = 0;
  for (T x : ns) sum += static_cast<double>(x);
  const double n = static_cast<double>(ns.size());
  const double mean = sum / n;
  double sq = 0;
  for (T x : ns) sq += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  s.count = ns.size();
  s.avg_us = mean / 1e3;
  s.stddev_us = std::sqrt(sq / n) / 1e3;
  s.p50_us = PercentileUs(ns, 0.50);
  s.p99_us = PercentileUs(ns, 0.99);
  s.p999_us = PercentileUs(ns, 0.999);
  s.max_us = static_cast<double>(ns.back()) / 1e3;
  return s;
}

}  // namespace vsl::bench
