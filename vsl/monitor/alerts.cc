#include "vsl/monitor/alerts.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "vsl/core/log.h"

extern char** environ;

namespace vsl::monitor {

using json = nlohmann::json;

json Alert::ToJson() const {
  json j{{"name", name}, {"severity", severity}, {"card", card}, {"message", message}, {"since", since}};
  if (!lun.empty()) j["lun"] = lun;
  return j;
}

std::vector<Alert> Evaluate(const json& status, const std::vector<Prediction>& predictions,
                            const AlertConfig& cfg, std::map<uint32_t, double>& governor_waits) {
  std::vector<Alert> out;
  auto add = [&out](const char* name, const char* sev, uint32_t card, std::string lun, std::string msg) {
    out.push_back(Alert{name, sev, card, std::move(lun), std::move(msg), 0});
  };
  for (const json& c : status.value("cards", json::array())) {
    const uint32_t card = c.value("index", 0u);
    const json& p = c.value("power", json::object());
    const json& th = p.value("thermal", json::object());
    const double temp = c.value("temperature_c", 0.0);
    const double throttle_c = th.value("throttle_c", 0.0);
    const double warn_c = cfg.temp_warn_c > 0 ? cfg.temp_warn_c : throttle_c - 5;
    const std::string tstate = th.value("state", "normal");
    if (tstate == "shutdown") {
      add("temperature_shutdown", "critical", card, "",
          fmt::format("card {} shut its LUNs down at {:.1f} C (shutdown at {:.0f} C)", card, temp,
                      th.value("shutdown_c", 0.0)));
    } else if (warn_c > 0 && temp >= warn_c) {
      add("temperature_warning", "warning", card, "",
          fmt::format("card {} is at {:.1f} C (warning at {:.0f} C, throttle at {:.0f} C)", card, temp, warn_c,
                      throttle_c));
    }
    if (tstate == "throttle") {
      add("thermal_throttle", "warning", card, "",
          fmt::format("card {} throttles writes to {:.0f}% of full power at {:.1f} C", card,
                      100 * th.value("write_share", 1.0), temp));
    }
    const double waits = p.value("governor", json::object()).value("write_waits", 0.0);
    auto it = governor_waits.find(card);
    if (it != governor_waits.end() && waits > it->second) {
      add("power_limited", "info", card, "",
          fmt::format("card {}'s power governor held {} write(s) back at its {:.2f} W limit", card,
                      static_cast<uint64_t>(waits - it->second), p.value("limit_w", 0.0)));
    }
    governor_waits[card] = waits;
    for (const json& k : c.value("controllers", json::array())) {
      const uint32_t ctl = k.value("index", 0u);
      if (k.value("failed_dies", 0u) > 0) {
        add("die_failed", "critical", card, "",
            fmt::format("card {} controller {} has lost {} of its {} dies", card, ctl, k.value("failed_dies", 0u),
                        k.value("dies", 0u)));
      }
      if (k.contains("plp") && k["plp"] != "healthy") {
        add("plp_failed", "critical", card, "",
            fmt::format("card {} controller {}: power-loss protection is {}", card, ctl,
                        k["plp"].get<std::string>()));
      }
    }
    for (const json& l : c.value("luns", json::array())) {
      const std::string lun = l.value("name", "");
      const std::string st = l.value("state", "");
      if (st == "failed") {
        add("lun_failed", "critical", card, lun,
            fmt::format("card {} {} failed: {}", card, lun, l.value("error", std::string("(no reason given)"))));
      }
      if (st == "fenced") {  // a shared card: another host took the LUN over (docs/ha.md)
        add("lun_fenced", "critical", card, lun,
            fmt::format("card {} {} was taken over by another host and is no longer served here: {}", card, lun,
                        l.value("error", std::string("(no reason given)"))));
      }
      if (!l.contains("reserve")) continue;
      const json& r = l["reserve"];
      if (r.value("warning", false)) {
        add("reserve_low", "warning", card, lun,
            fmt::format("card {} {}: reserve at {:.1f}% (warning below {:.0f}%)", card, lun, r.value("percent", 0.0),
                        r.value("warn_at_percent", 0.0)));
      }
      const std::string h = l.value("health", "healthy");
      if (h == "read-only") {
        add("read_only", "critical", card, lun, fmt::format("card {} {} is read-only: its flash is worn out or lost", card, lun));
      } else if (h == "reduced-write") {
        add("reduced_write", "warning", card, lun,
            fmt::format("card {} {} is in reduced-write mode: writes are capped to what its flash can hold", card, lun));
      }
      const json& fb = l.value("flashback", json::object());
      if (fb.value("rebuild_lebs_left", 0u) > 0) {
        add("rebuild_running", "warning", card, lun,
            fmt::format("card {} {}: FlashBack is rebuilding, {} erase unit(s) left", card, lun,
                        fb.value("rebuild_lebs_left", 0u)));
      }
    }
  }
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    const Prediction& pr = predictions[i];
    if (pr.days >= 0 && pr.days <= cfg.eol_days) {
      add("end_of_life", "warning", static_cast<uint32_t>(i), "",
          fmt::format("card {} will use its rated endurance in {:.1f} days at the recent write rate "
                      "({:.2f}% left)", i, pr.days, pr.percent_remaining));
    }
  }
  return out;
}

AlertTracker::~AlertTracker() { Reap(true); }

void AlertTracker::Update(std::vector<Alert> now, double now_unix) {
  std::lock_guard<std::mutex> l(mu_);
  Reap(false);
  std::map<std::string, Alert> next;
  for (Alert& a : now) {
    const std::string k = a.key();
    auto it = active_.find(k);
    if (it != active_.end()) {
      a.since = it->second.since;
    } else {
      a.since = now_unix;
      ++raised_[a.name];
      if (a.severity == "info") {
        Logger("monitor")->info("alert raised: {}: {}", a.name, a.message);
      } else {
        Logger("monitor")->warn("alert raised: {} ({}): {}", a.name, a.severity, a.message);
      }
      RunHook(a, "raised");
    }
    next.emplace(k, std::move(a));
  }
  for (const auto& [k, a] : active_) {
    if (next.count(k) != 0) continue;
    Logger("monitor")->info("alert cleared: {}: {}", a.name, a.message);
    RunHook(a, "cleared");
  }
  active_ = std::move(next);
}

std::vector<Alert> AlertTracker::active() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Alert> v;
  for (const auto& [k, a] : active_) v.push_back(a);
  return v;
}

std::map<std::string, uint64_t> AlertTracker::raised_total() const {
  std::lock_guard<std::mutex> l(mu_);
  return raised_;
}

void AlertTracker::RunHook(const Alert& a, const char* state) {
  if (cfg_.hook.empty()) return;
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.push_back(std::string("VSL_ALERT=") + a.name);
  env_s.push_back(std::string("VSL_ALERT_STATE=") + state);
  env_s.push_back("VSL_ALERT_SEVERITY=" + a.severity);
  env_s.push_back("VSL_ALERT_CARD=" + std::to_string(a.card));
  env_s.push_back("VSL_ALERT_LUN=" + a.lun);
  env_s.push_back("VSL_ALERT_MESSAGE=" + a.message);
  std::vector<char*> envp;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string cmd = cfg_.hook;
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, cmd.data(), nullptr};
  pid_t pid = 0;
  if (const int rc = posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv, envp.data()); rc != 0) {
    Logger("monitor")->error("alert hook '{}' could not start: {}", cfg_.hook, std::strerror(rc));
    return;
  }
  hooks_.push_back(pid);
}

void AlertTracker::Reap(bool wait) {
  for (std::size_t i = 0; i < hooks_.size();) {
    int st = 0;
    const pid_t r = waitpid(hooks_[i], &st, wait ? 0 : WNOHANG);
    if (r == 0) {
      ++i;
      continue;
    }
    if (r == hooks_[i] && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
      Logger("monitor")->warn("alert hook '{}' failed (status {})", cfg_.hook, st);
    }
    hooks_.erase(hooks_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

}  // namespace vsl::monitor
