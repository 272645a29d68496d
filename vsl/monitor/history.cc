#include "vsl/monitor/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "vsl/core/log.h"

namespace vsl::monitor {

using json = nlohmann::json;

json Sample::ToJson() const {
  return json{{"t", t},
              {"read_bps", read_bps},
              {"write_bps", write_bps},
              {"read_iops", read_iops},
              {"write_iops", write_iops},
              {"nand_write_bps", nand_write_bps},
              {"read_p99_s", read_p99_s},
              {"write_p99_s", write_p99_s},
              {"temp_c", temp_c},
              {"power_w", power_w},
              {"limit_w", limit_w},
              {"reserve_pct", reserve_pct},
              {"endurance_used_pct", endurance_used_pct},
              {"free_lebs", free_lebs},
              {"failed_dies", failed_dies},
              {"rebuild_lebs", rebuild_lebs},
              {"alerts", alerts},
              {"throttled", throttled}};
}

bool Sample::FromJson(const json& j, Sample* out) {
  if (!j.is_object() || !j.contains("t") || !j["t"].is_number()) return false;
  Sample s;
  struct F {
    const char* key;
    double* v;
  };
  const F fields[] = {{"t", &s.t},
                      {"read_bps", &s.read_bps},
                      {"write_bps", &s.write_bps},
                      {"read_iops", &s.read_iops},
                      {"write_iops", &s.write_iops},
                      {"nand_write_bps", &s.nand_write_bps},
                      {"read_p99_s", &s.read_p99_s},
                      {"write_p99_s", &s.write_p99_s},
                      {"temp_c", &s.temp_c},
                      {"power_w", &s.power_w},
                      {"limit_w", &s.limit_w},
                      {"reserve_pct", &s.reserve_pct},
                      {"endurance_used_pct", &s.endurance_used_pct},
                      {"free_lebs", &s.free_lebs},
                      {"failed_dies", &s.failed_dies},
                      {"rebuild_lebs", &s.rebuild_lebs}};
  for (const F& f : fields) {
    if (!j.contains(f.key)) continue;  // older files may lack newer fields
    if (!j[f.key].is_number()) return false;
    *f.v = j[f.key].get<double>();
  }
  if (j.contains("alerts")) {
    if (!j["alerts"].is_number_unsigned()) return false;
    s.alerts = j["alerts"].get<uint32_t>();
  }
  if (j.contains("throttled")) {
    if (!j["throttled"].is_boolean()) return false;
    s.throttled = j["throttled"].get<bool>();
  }
  *out = s;
  return true;
}

std::size_t History::Load() {
  std::lock_guard<std::mutex> l(mu_);
  if (path_.empty()) return 0;
  std::ifstream in(path_);
  if (!in) return 0;
  std::size_t bad = 0;
  std::string line;
  lines_ = 0;
  while (std::getline(in, line)) {
    ++lines_;
    const json j = json::parse(line, nullptr, false);
    Sample s;
    if (j.is_discarded() || !j.is_object() || !j.contains("tier") || !j["tier"].is_string() ||
        !Sample::FromJson(j, &s)) {
      ++bad;
      continue;
    }
    std::deque<Sample>& q = j["tier"] == "coarse" ? coarse_ : fine_;
    if (!q.empty() && s.t <= q.back().t) {  // out of order: not ours
      ++bad;
      continue;
    }
    q.push_back(s);
  }
  while (fine_.size() > o_.fine_capacity) fine_.pop_front();
  while (coarse_.size() > o_.coarse_capacity) coarse_.pop_front();
  if (bad != 0) {
    Logger("monitor")->warn("history {}: {} line(s) could not be read and were skipped", path_, bad);
    Compact();  // the file holds only what loaded
  }
  return bad;
}

void History::Add(const Sample& s) {
  std::lock_guard<std::mutex> l(mu_);
  fine_.push_back(s);
  if (fine_.size() > o_.fine_capacity) fine_.pop_front();
  AppendLine("fine", s);
  // Coarse periods are aligned to multiples of the period in Unix time, so they mean the
  // same across restarts; a period closes with the first sample past it.
  const double period = std::floor(s.t / o_.coarse_period_s);
  if (acc_n_ != 0 && period != acc_period_) {
    const double n = acc_n_;
    Sample c = acc_;
    c.read_bps /= n;
    c.write_bps /= n;
    c.read_iops /= n;
    c.write_iops /= n;
    c.nand_write_bps /= n;
    c.power_w /= n;
    coarse_.push_back(c);
    if (coarse_.size() > o_.coarse_capacity) coarse_.pop_front();
    AppendLine("coarse", c);
    acc_n_ = 0;
  }
  if (acc_n_ == 0) {
    acc_ = s;
    acc_period_ = period;
  } else {
    // Rates and power are summed (averaged at the close), maxima kept, the rest as at the
    // period's last sample.
    const Sample sum = acc_;
    acc_ = s;
    acc_.read_bps += sum.read_bps;
    acc_.write_bps += sum.write_bps;
    acc_.read_iops += sum.read_iops;
    acc_.write_iops += sum.write_iops;
    acc_.nand_write_bps += sum.nand_write_bps;
    acc_.power_w += sum.power_w;
    acc_.read_p99_s = std::max(sum.read_p99_s, s.read_p99_s);
    acc_.write_p99_s = std::max(sum.write_p99_s, s.write_p99_s);
    acc_.temp_c = std::max(sum.temp_c, s.temp_c);
    acc_.alerts = std::max(sum.alerts, s.alerts);
    acc_.throttled = sum.throttled || s.throttled;
  }
  ++acc_n_;
  if (lines_ > 2 * (o_.fine_capacity + o_.coarse_capacity)) Compact();
}

void History::AppendLine(const char* tier, const Sample& s) {
  if (path_.empty()) return;
  json j = s.ToJson();
  j["tier"] = tier;
  std::FILE* f = std::fopen(path_.c_str(), "a");
  if (f == nullptr) {
    Logger("monitor")->warn("history {}: cannot append (kept in memory only)", path_);
    return;
  }
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), f);
  std::fclose(f);
  ++lines_;
}

void History::Compact() {
  if (path_.empty()) return;
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) {
      Logger("monitor")->warn("history {}: cannot rewrite", path_);
      return;
    }
    // Interleaved by time, so a reader sees the file as it was written.
    std::size_t i = 0, k = 0;
    lines_ = 0;
    while (i < fine_.size() || k < coarse_.size()) {
      const bool take_fine = k >= coarse_.size() || (i < fine_.size() && fine_[i].t <= coarse_[k].t);
      const Sample& s = take_fine ? fine_[i++] : coarse_[k++];
      json j = s.ToJson();
      j["tier"] = take_fine ? "fine" : "coarse";
      out << j.dump() << "\n";
      ++lines_;
    }
  }
  std::rename(tmp.c_str(), path_.c_str());
}

std::vector<Sample> History::Slice(const std::deque<Sample>& q, double since, std::size_t max) {
  auto it = std::upper_bound(q.begin(), q.end(), since, [](double t, const Sample& s) { return t < s.t; });
  std::size_t n = static_cast<std::size_t>(q.end() - it);
  if (n > max) it += static_cast<std::ptrdiff_t>(n - max);
  return std::vector<Sample>(it, q.end());
}

std::vector<Sample> History::Fine(double since, std::size_t max) const {
  std::lock_guard<std::mutex> l(mu_);
  return Slice(fine_, since, max);
}
std::vector<Sample> History::Coarse(double since, std::size_t max) const {
  std::lock_guard<std::mutex> l(mu_);
  return Slice(coarse_, since, max);
}
std::size_t History::fine_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return fine_.size();
}
std::size_t History::coarse_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return coarse_.size();
}

Prediction Predict(const History& h, double used_pct_now, double now_unix, double status_days,
                   double min_window_s) {
  Prediction p;
  p.percent_remaining = std::max(0.0, 100.0 - used_pct_now);
  // The oldest sample within 30 days: the coarse ring reaches furthest back.
  std::vector<Sample> c = h.Coarse(now_unix - 30 * 86400.0);
  std::vector<Sample> f = h.Fine(now_unix - 86400.0);
  const Sample* oldest = nullptr;
  if (!c.empty()) oldest = &c.front();
  if (!f.empty() && (oldest == nullptr || f.front().t < oldest->t)) oldest = &f.front();
  if (oldest != nullptr) {
    const double span = now_unix - oldest->t;
    const double worn = used_pct_now - oldest->endurance_used_pct;
    if (span >= min_window_s && worn > 0) {
      const double per_day = worn / (span / 86400.0);
      p.days = p.percent_remaining / per_day;
      p.window_s = span;
      p.basis = "history";
    }
  }
  if (p.days < 0 && status_days >= 0) {
    p.days = status_days;
    p.window_s = 3600;
    p.basis = "write-rate";
  }
  if (p.days >= 0) p.end_of_life_unix = now_unix + p.days * 86400.0;
  return p;
}

}  // namespace vsl::monitor
