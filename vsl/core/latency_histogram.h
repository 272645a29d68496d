// A fixed-bucket latency histogram, as Prometheus histograms expose it: cumulative counts
// per upper bound, plus the sum and the count. The bounds are fixed (every LUN and card
// reports the same buckets, so they add up and aggregate in PromQL), from 25 us to 10 s.
//
// Not thread-safe: owned by one engine (the FTL's stats); copied out on that engine for
// reporting. Recording is a short linear scan over 19 bounds: no allocation, no lock.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <array>
#include <cstdint>

#include "vsl/core/time.h"

namespace vsl {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets (inclusive), in ns; an implicit +Inf bucket follows.
  static constexpr std::array<DurNs, 19> kBoundsNs = {
      25 * kUs,  50 * kUs,  100 * kUs, 250 * kUs, 500 * kUs, 1 * kMs,  2500 * kUs,
      5 * kMs,   10 * kMs,  25 * kMs,  50 * kMs,  100 * kMs, 250 * kMs, 500 * kMs,
      1 * kSec,  2 * kSec,  5 * kSec,  10 * kSec, 30 * kSec};
  static constexpr std::size_t kBuckets = kBoundsNs.size() + 1;  // the last is +Inf

  void Record(DurNs d) {
    std::size_t i = 0;
    while (i < kBoundsNs.size() && d > kBoundsNs[i]) ++i;
    ++counts_[i];
    sum_ns_ += d;
    ++count_;
  }
  // Observations in bucket `i` alone (not cumulative); i == kBoundsNs.size() is +Inf.
  uint64_t bucket(std::size_t i) const { return counts_[i]; }
  uint64_t count() const { return count_; }
  uint64_t sum_ns() const { return sum_ns_; }
  // The smallest bucket bound below which at least `q` (0..1) of the observations fall
  // (an upper estimate of the quantile); 0 with no observations, kTimeNever past the
  // last bound.
  DurNs QuantileBoundNs(double q) const {
    if (count_ == 0) return 0;
    const double want = q * static_cast<double>(count_);
    uint64_t seen = 0;
    for (std::size_t i = 0; i < kBoundsNs.size(); ++i) {
      seen += counts_[i];
      if (static_cast<double>(seen) >= want) return kBoundsNs[i];
    }
    return kTimeNever;
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t sum_ns_ = 0;
  uint64_t count_ = 0;
};

}  // namespace vsl
