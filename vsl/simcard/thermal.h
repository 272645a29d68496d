// HeatSource: one term of a controller's first-order thermal model (internal to the
// simcard module; the model is described in profile.h, Power).
//
// The model is linear, so a controller's temperature is the ambient plus the sum of the
// rises its sources cause: a continuous source (static power) and one impulse source per
// pipe (the energy of each NAND operation, charged when its die starts it). Each source
// integrates exactly between events: its rise relaxes towards power * R with time
// constant R * C, and an impulse of E joules adds E / C at once. So the temperature does
// not depend on how often anyone reads it.
//
// Thread-safe: a pipe deposits on its own thread while the host reads from another.
// Times come from the caller's clock; a time earlier than the last one (a pipe rebound
// onto another engine's clock) counts as no time passing.
#pragma once

#include <cmath>
#include <mutex>

#include "vsl/core/time.h"

namespace vsl::simcard {

class HeatSource {
 public:
  // Continuous power from `now` on (the time before is integrated at the old power).
  void SetPower(TimeNs now, double watts, double r, double c) {
    std::lock_guard<std::mutex> l(mu_);
    AdvanceLocked(now, r, c);
    watts_ = watts;
  }
  void Deposit(TimeNs now, double joules, double r, double c) {
    std::lock_guard<std::mutex> l(mu_);
    AdvanceLocked(now, r, c);
    rise_ += joules / c;
    energy_j_ += joules;
  }
  // Brings the source to `now` under the old thermal resistance, before R changes.
  void Advance(TimeNs now, double r, double c) {
    std::lock_guard<std::mutex> l(mu_);
    AdvanceLocked(now, r, c);
  }
  struct Reading {
    double rise_c = 0;    // above ambient
    double energy_j = 0;  // since the card opened
  };
  Reading Read(TimeNs now, double r, double c) {
    std::lock_guard<std::mutex> l(mu_);
    AdvanceLocked(now, r, c);
    return {rise_, energy_j_};
  }

 private:
  void AdvanceLocked(TimeNs now, double r, double c) {
    if (now <= at_) return;
    const double dt = static_cast<double>(now - at_) / 1e9;
    const double steady = watts_ * r;
    rise_ = steady + (rise_ - steady) * std::exp(-dt / (r * c));
    energy_j_ += watts_ * dt;
    at_ = now;
  }
  std::mutex mu_;
  double watts_ = 0;
  double rise_ = 0;
  double energy_j_ = 0;
  TimeNs at_ = 0;
};

}  // namespace vsl::simcard
