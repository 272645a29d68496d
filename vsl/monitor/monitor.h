// The monitor in vsld (docs/monitoring.md): samples every card's state at a fixed interval
// on its own thread, keeps each card's history (history.h) in its directory, predicts its
// remaining life, and raises and clears alerts (alerts.h). The metrics endpoint and the
// dashboard (http.h), `vslctl status` and `vslctl monitor` read what it keeps.
//
// It sees the cards only through the control protocol's status (a function returning the
// status command's result with "all"), the same view vslctl has: it never touches an
// engine itself.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "vsl/core/status.h"
#include "vsl/monitor/alerts.h"
#include "vsl/monitor/history.h"

namespace vsl::monitor {

struct MonitorConfig {
  double interval_s = 10;   // between samples
  History::Options history;
  AlertConfig alerts;
  bool persist = true;      // history files in the card directories
};

class Monitor {
 public:
  using StatusFn = std::function<Result<nlohmann::json>()>;
  // `card_dirs[i]`: card i's directory ("" for none: its history is not persisted).
  Monitor(StatusFn status, std::vector<std::string> card_dirs, MonitorConfig cfg);
  ~Monitor();  // stops the thread
  // Samples now and then every interval on a thread of its own.
  void Start();
  // One sample: every card's history, predictions and alerts. The thread calls it;
  // tests may too. Returns the status it sampled (or why it could not).
  Result<nlohmann::json> SampleNow();

  // Alerts raised, predictions per card, samples taken, raises per alert name.
  nlohmann::json StateJson() const;
  // The "history" command: {"card": 0, "tier": "fine"|"coarse", "since": 0, "max": 8640}.
  Result<nlohmann::json> HistoryJson(const nlohmann::json& req) const;
  // /metrics: a fresh status with the monitor's state, as the Prometheus exposition.
  Result<std::string> Metrics() const;
  // A fresh status (the status command's result with "all").
  Result<nlohmann::json> Status() const { return status_(); }
  const MonitorConfig& config() const { return cfg_; }
  std::size_t cards() const { return hist_.size(); }

 private:
  struct LunPrev {
    double read_bytes = 0, write_bytes = 0, reads = 0, writes = 0;
    std::vector<double> read_buckets, write_buckets;  // cumulative, as in the status
  };
  void Run();
  // What `cur` adds to `prev` (a counter that went down restarted from zero).
  static double Delta(double cur, double prev) { return cur >= prev ? cur - prev : cur; }

  const StatusFn status_;
  const MonitorConfig cfg_;
  std::vector<std::unique_ptr<History>> hist_;
  AlertTracker alerts_;

  mutable std::mutex mu_;  // what follows
  std::map<std::string, LunPrev> prev_;          // by "card/lun"
  std::map<uint32_t, double> prev_nand_;         // card lifetime NAND bytes at the last sample
  std::map<uint32_t, double> governor_waits_;
  double prev_t_ = 0;
  std::vector<Prediction> predictions_;
  uint64_t samples_ = 0;
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

// The Unix time now, in seconds.
double UnixNow();

}  // namespace vsl::monitor
