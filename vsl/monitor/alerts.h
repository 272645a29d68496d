// Alerts (docs/monitoring.md, "Alerts"): conditions on a card's state, raised and cleared
// as the monitor samples it. Each raised alert shows as a status field (vslctl status), a
// log line, a metric (vsl_alert_active) and, if configured, a hook command vsld runs.
//
//   name                  severity  raised while
//   temperature_warning   warning   temperature >= warn (default: 5 C below the throttle point)
//   temperature_shutdown  critical  the card's thermal state is shutdown
//   thermal_throttle      warning   writes are thermally throttled
//   power_limited         info      the power governor held writes back since the last sample
//   reserve_low           warning   a LUN's reserve is below its warning level
//   reduced_write         warning   a LUN is in reduced-write mode
//   read_only             critical  a LUN is read-only
//   die_failed            critical  a controller has lost a die
//   rebuild_running       warning   FlashBack is rebuilding stripes of a LUN
//   lun_failed            critical  a LUN failed to attach or lost its device
//   plp_failed            critical  a controller's power-loss protection is not healthy
//   end_of_life           warning   the predicted end of life is within eol_days
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vsl/monitor/history.h"

namespace vsl::monitor {

struct AlertConfig {
  double temp_warn_c = 0;      // 0: 5 C below the card's throttle temperature
  double eol_days = 30;        // end_of_life when the prediction is within this
  std::string hook;            // "": none; run by /bin/sh -c with VSL_ALERT_* in its environment
};

struct Alert {
  std::string name, severity;
  uint32_t card = 0;
  std::string lun;  // "" for card-wide alerts
  std::string message;
  double since = 0;  // Unix time raised
  std::string key() const { return name + "/" + std::to_string(card) + "/" + lun; }
  nlohmann::json ToJson() const;
};

// The alerts `status` (the status command's result with "all") and the predictions call
// for now. `governor_waits[card]`: the power governor's write waits at the previous sample
// (updated here; power_limited means they grew).
std::vector<Alert> Evaluate(const nlohmann::json& status, const std::vector<Prediction>& predictions,
                            const AlertConfig& cfg, std::map<uint32_t, double>& governor_waits);

// The raised set: Update() compares the alerts evaluated now with those raised, logs each
// change, runs the hook for it (in the background: a slow hook delays nothing) and counts
// raises per name. Thread-safe.
class AlertTracker {
 public:
  explicit AlertTracker(AlertConfig cfg) : cfg_(std::move(cfg)) {}
  ~AlertTracker();
  void Update(std::vector<Alert> now, double now_unix);
  std::vector<Alert> active() const;
  std::map<std::string, uint64_t> raised_total() const;
  const AlertConfig& config() const { return cfg_; }

 private:
  void RunHook(const Alert& a, const char* state);
  void Reap(bool wait);
  const AlertConfig cfg_;
  mutable std::mutex mu_;
  std::map<std::string, Alert> active_;
  std::map<std::string, uint64_t> raised_;
  std::vector<int> hooks_;  // pids of hooks still running
};

}  // namespace vsl::monitor
