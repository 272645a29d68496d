// The monitor's history of one card: bounded rings of samples at two resolutions (by
// default every 10 s for a day and every 5 min for a month), persisted in the card's
// directory so a restart of vsld keeps them (docs/monitoring.md, "History").
//
// A sample holds rates computed from the counters between two samples (a counter that
// went down, a LUN re-attached, counts from zero), so readers need no earlier sample. The
// coarse ring takes one sample per coarse period (aligned to multiples of the period in
// Unix time; closed by the first sample past it): rates and power averaged over it,
// temperature, p99s and alerts at their maximum, the rest as at its last sample.
//
// File: <dir>/monitor-history.jsonl, one JSON object per line: {"tier": "fine"|"coarse",
// ...Sample}. Appended as samples are taken; rewritten (to a temporary file, renamed) once
// it holds twice the rings' worth. Lines that do not parse (a torn last line after a
// crash, a hand edit) are skipped and counted: the rest loads.
//
// Thread-safe: the monitor's thread adds, HTTP and control threads read.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vsl::monitor {

struct Sample {
  double t = 0;  // Unix time, s
  double read_bps = 0, write_bps = 0, read_iops = 0, write_iops = 0, nand_write_bps = 0;
  double read_p99_s = 0, write_p99_s = 0;  // upper bucket bounds over the interval (0: no I/O)
  double temp_c = 0, power_w = 0, limit_w = 0;
  double reserve_pct = 100, endurance_used_pct = 0;
  double free_lebs = 0, failed_dies = 0, rebuild_lebs = 0;
  uint32_t alerts = 0;   // alerts raised at the time
  bool throttled = false;  // thermal throttle or the power governor held writes

  nlohmann::json ToJson() const;
  // False if `j` lacks the time or a field has the wrong type.
  static bool FromJson(const nlohmann::json& j, Sample* out);
};

class History {
 public:
  struct Options {
    double coarse_period_s = 300;
    std::size_t fine_capacity = 8640;    // 10 s for a day
    std::size_t coarse_capacity = 8640;  // 5 min for 30 days
  };
  // `path` "": kept in memory only. Load() reads it.
  History(std::string path, Options o) : path_(std::move(path)), o_(o) {}

  // Loads the file (a missing one is an empty history). Returns the lines skipped.
  std::size_t Load();
  // Adds a fine sample; folds it into the coarse one and closes that at the period's end.
  void Add(const Sample& s);

  // Samples newer than `since` (Unix s), oldest first, at most `max` (the newest kept).
  std::vector<Sample> Fine(double since = 0, std::size_t max = SIZE_MAX) const;
  std::vector<Sample> Coarse(double since = 0, std::size_t max = SIZE_MAX) const;
  std::size_t fine_size() const;
  std::size_t coarse_size() const;
  const std::string& path() const { return path_; }

 private:
  void AppendLine(const char* tier, const Sample& s);
  void Compact();  // with mu_ held
  static std::vector<Sample> Slice(const std::deque<Sample>& q, double since, std::size_t max);

  const std::string path_;
  const Options o_;
  mutable std::mutex mu_;
  std::deque<Sample> fine_, coarse_;
  // The coarse sample being formed: sums of the rates and power, and how many; its
  // period (Unix time / coarse_period_s, rounded down).
  Sample acc_;
  uint32_t acc_n_ = 0;
  double acc_period_ = 0;
  std::size_t lines_ = 0;  // lines in the file now
};

// Remaining life of a card from its history: P/E used against the rating, extrapolated
// at the recent rate of wear.
struct Prediction {
  double percent_remaining = 100;
  double days = -1;            // -1: no wear over the window (nothing to extrapolate)
  double end_of_life_unix = 0;
  double window_s = 0;         // the span the rate was measured over
  std::string basis;           // "history" or "write-rate" (the status's last-hour figure)
};
// `status_days`: the status's own prediction from the last hour's write rate (<0: none),
// used while the history spans less than `min_window_s` or shows no wear.
Prediction Predict(const History& h, double used_pct_now, double now_unix, double status_days,
                   double min_window_s = 3600);

}  // namespace vsl::monitor
