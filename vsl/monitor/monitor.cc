#include "vsl/monitor/monitor.h"

#include <sys/time.h>

#include <chrono>

#include <fmt/format.h>

#include "vsl/core/latency_histogram.h"
#include "vsl/core/log.h"
#include "vsl/core/thread_name.h"
#include "vsl/monitor/metrics.h"

namespace vsl::monitor {

using json = nlohmann::json;

double UnixNow() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6;
}

namespace {
double Num(const json& j, const char* key, double dflt = 0) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return dflt;
  return j[key].get<double>();
}
std::vector<double> Buckets(const json& h) {
  std::vector<double> v;
  for (const json& b : h.value("buckets", json::array())) v.push_back(b[1].get<double>());
  v.push_back(Num(h, "count"));  // +Inf
  return v;
}
}  // namespace

Monitor::Monitor(StatusFn status, std::vector<std::string> card_dirs, MonitorConfig cfg)
    : status_(std::move(status)), cfg_(std::move(cfg)), alerts_(cfg_.alerts) {
  for (const std::string& d : card_dirs) {
    const std::string path = (cfg_.persist && !d.empty()) ? d + "/monitor-history.jsonl" : "";
    hist_.push_back(std::make_unique<History>(path, cfg_.history));
    hist_.back()->Load();
  }
}

Monitor::~Monitor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Monitor::Start() {
  thread_ = std::thread([this] {
    SetThreadName("vsl-monitor");
    Run();
  });
}

void Monitor::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    if (auto r = SampleNow(); !r.ok()) Logger("monitor")->warn("sample: {}", r.status().ToString());
    l.lock();
    cv_.wait_for(l, std::chrono::duration<double>(cfg_.interval_s), [this] { return stop_; });
  }
}

Result<json> Monitor::SampleNow() {
  VSL_ASSIGN_OR_RETURN(json st, status_());
  const double now = UnixNow();
  std::unique_lock<std::mutex> l(mu_);
  const double dt = prev_t_ > 0 ? now - prev_t_ : 0;
  const json& cards = st["cards"];
  std::vector<Sample> samples(hist_.size());
  std::vector<Prediction> preds(hist_.size());
  for (const json& c : cards) {
    const uint32_t i = c.value("index", 0u);
    if (i >= hist_.size()) continue;
    Sample& s = samples[i];
    s.t = now;
    double rb = 0, wb = 0, ro = 0, wo = 0;
    std::vector<double> rbk, wbk;  // interval bucket deltas, all LUNs
    for (const json& lj : c.value("luns", json::array())) {
      const json& r = lj.value("reserve", json::object());
      s.free_lebs += Num(r, "free_lebs");
      s.rebuild_lebs += Num(lj.value("flashback", json::object()), "rebuild_lebs_left");
      if (!lj.contains("io")) continue;
      const std::string key = std::to_string(i) + "/" + lj.value("name", "");
      const json& sa = lj["since_attach"];
      const json& io = lj["io"];
      LunPrev cur{Num(sa, "host_read_bytes"), Num(sa, "host_write_bytes"), Num(io, "reads"), Num(io, "writes"),
                  Buckets(io["read_latency"]), Buckets(io["write_latency"])};
      auto it = prev_.find(key);
      if (it != prev_.end()) {
        const LunPrev& p = it->second;
        rb += Delta(cur.read_bytes, p.read_bytes);
        wb += Delta(cur.write_bytes, p.write_bytes);
        ro += Delta(cur.reads, p.reads);
        wo += Delta(cur.writes, p.writes);
        const bool reset = cur.reads < p.reads || cur.writes < p.writes;
        auto add = [reset](std::vector<double>& acc, const std::vector<double>& a, const std::vector<double>& b) {
          if (acc.size() < a.size()) acc.resize(a.size(), 0);
          for (std::size_t k = 0; k < a.size(); ++k) acc[k] += reset || k >= b.size() ? a[k] : Delta(a[k], b[k]);
        };
        add(rbk, cur.read_buckets, p.read_buckets);
        add(wbk, cur.write_buckets, p.write_buckets);
      }
      prev_[key] = std::move(cur);
    }
    // The 99th percentile's bucket bound over the interval (the status reports every
    // histogram with LatencyHistogram's bounds; the last entry is +Inf).
    auto p99 = [](const std::vector<double>& b) {
      if (b.empty() || b.back() <= 0) return 0.0;
      const auto& bounds = LatencyHistogram::kBoundsNs;
      for (std::size_t k = 0; k + 1 < b.size() && k < bounds.size(); ++k) {
        if (b[k] >= 0.99 * b.back()) return bounds[k] / 1e9;
      }
      return bounds.back() / 1e9;
    };
    s.read_p99_s = p99(rbk);
    s.write_p99_s = p99(wbk);
    const json& health = c.value("health", json::object());
    const double nand = Num(health.value("lifetime", json::object()), "physical_write_bytes");
    if (dt > 0) {
      s.read_bps = rb / dt;
      s.write_bps = wb / dt;
      s.read_iops = ro / dt;
      s.write_iops = wo / dt;
      s.nand_write_bps = Delta(nand, prev_nand_[i]) / dt;
    }
    prev_nand_[i] = nand;
    const json& p = c.value("power", json::object());
    s.temp_c = Num(c, "temperature_c");
    s.power_w = Num(p, "avg_w");
    s.limit_w = Num(p, "limit_w");
    s.reserve_pct = Num(health, "reserve_percent", 100);
    s.endurance_used_pct = Num(health, "endurance_used_percent");
    for (const json& k : c.value("controllers", json::array())) s.failed_dies += Num(k, "failed_dies");
    s.throttled = p.value("thermal", json::object()).value("state", "normal") != "normal";
    const double status_days = health.contains("lifetime_prediction_days") && health["lifetime_prediction_days"].is_number()
                                   ? health["lifetime_prediction_days"].get<double>()
                                   : -1;
    preds[i] = Predict(*hist_[i], s.endurance_used_pct, now, status_days);
  }
  std::vector<Alert> now_alerts = Evaluate(st, preds, cfg_.alerts, governor_waits_);
  for (const Alert& a : now_alerts) {
    if (a.card >= samples.size()) continue;
    ++samples[a.card].alerts;
    if (a.name == "power_limited") samples[a.card].throttled = true;
  }
  const bool first = prev_t_ == 0;
  prev_t_ = now;
  predictions_ = preds;
  ++samples_;
  l.unlock();
  alerts_.Update(std::move(now_alerts), now);
  // The first sample only primes the counters: its rates would read as zero.
  if (!first) {
    for (std::size_t i = 0; i < hist_.size(); ++i) {
      if (samples[i].t != 0) hist_[i]->Add(samples[i]);
    }
  }
  return st;
}

json Monitor::StateJson() const {
  json alerts = json::array();
  for (const Alert& a : alerts_.active()) alerts.push_back(a.ToJson());
  json raised = json::object();
  for (const auto& [n, k] : alerts_.raised_total()) raised[n] = k;
  std::lock_guard<std::mutex> l(mu_);
  json preds = json::array();
  for (std::size_t i = 0; i < predictions_.size(); ++i) {
    const Prediction& p = predictions_[i];
    json pj{{"card", i}, {"percent_remaining", p.percent_remaining}, {"basis", p.basis}, {"window_s", p.window_s}};
    if (p.days >= 0) {
      pj["days"] = p.days;
      pj["end_of_life_unix"] = p.end_of_life_unix;
    } else {
      pj["days"] = nullptr;
    }
    preds.push_back(pj);
  }
  return json{{"alerts", alerts},
              {"predictions", preds},
              {"samples", samples_},
              {"interval_s", cfg_.interval_s},
              {"raised_total", raised}};
}

Result<json> Monitor::HistoryJson(const json& req) const {
  const int64_t card = req.value("card", int64_t{0});
  if (card < 0 || static_cast<std::size_t>(card) >= hist_.size()) {
    return vsl::Status::InvalidArgument(fmt::format("no card {} (this vsld serves {})", card, hist_.size()));
  }
  const std::string tier = req.value("tier", std::string("fine"));
  if (tier != "fine" && tier != "coarse") return vsl::Status::InvalidArgument("tier must be fine or coarse");
  const double since = req.value("since", 0.0);
  const int64_t max = req.value("max", int64_t{8640});
  if (max <= 0) return vsl::Status::InvalidArgument("max must be positive");
  const History& h = *hist_[static_cast<std::size_t>(card)];
  const auto v = tier == "fine" ? h.Fine(since, static_cast<std::size_t>(max)) : h.Coarse(since, static_cast<std::size_t>(max));
  json samples = json::array();
  for (const Sample& s : v) samples.push_back(s.ToJson());
  return json{{"card", card},
              {"tier", tier},
              {"period_s", tier == "fine" ? cfg_.interval_s : cfg_.history.coarse_period_s},
              {"samples", samples}};
}

Result<std::string> Monitor::Metrics() const {
  VSL_ASSIGN_OR_RETURN(json st, status_());
  return RenderMetrics(st, StateJson());
}

}  // namespace vsl::monitor
