// The card's power and thermal side: the power policy, the monitor that samples
// temperatures and power on pipe 0's engine, and thermal shutdown and resume.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "vsl/card/card.h"
#include "vsl/core/log.h"

namespace vsl::card {

PowerStatus Card::power_status() const {
  PowerStatus st;
  {
    std::lock_guard<std::mutex> l(mon_mu_);
    st = mon_;
  }
  st.policy = governor_->policy();
  st.limit_w = st.policy.limit_w();
  st.override_on = st.policy.override_w > 0;
  st.static_w = governor_->static_w();
  st.full_write_w = governor_->full_write_w();
  st.refill_w = governor_->refill_w();
  st.burst_j = governor_->burst_j();
  st.write_share = governor_->write_share();
  st.environment = backend_->environment();
  st.governor = governor_->stats();
  // Temperatures now (the monitor may be asleep on an idle card).
  for (uint32_t c = 0; c < st.controllers.size(); ++c) {
    const auto r = backend_->ReadPower(c);
    st.controllers[c].temperature_c = r.temperature_c;
    st.controllers[c].max_temperature_c = std::max(st.controllers[c].max_temperature_c, r.temperature_c);
    st.controllers[c].energy_j = r.energy_j;
    st.controllers[c].low_power = r.low_power;
  }
  return st;
}

Status Card::SetPowerPolicy(const PowerPolicy& p) {
  const PowerPolicy old = governor_->policy();
  VSL_RETURN_IF_ERROR(governor_->SetPolicy(p));
  if (old.limit_w() != p.limit_w() || old.override_w != p.override_w) {
    Logger("card")->warn("card {}: power limit {:.2f} W ({}; slot declared {:.2f} W)", dir_, p.limit_w(),
                         p.override_w > 0 ? fmt::format("power override {:.2f} W", p.override_w)
                                          : std::string("no override: slot limit"),
                         p.slot_capability_w);
  }
  return Status::Ok();
}

void Card::WakeMonitor() {
  if (monitor_running_.exchange(true)) return;
  PipeEngine(0).Send([this] {
    if (monitor_stopping_ || monitor_timer_ != 0) return;
    MonitorTick();
  });
}

bool Card::MonitorMustRun(double max_temp_c) const {
  const PowerPolicy pol = governor_->policy();
  const auto env = backend_->environment();
  const auto& pw = backend_->power_model();
  // Warm, or warming by itself at rest: keep watching.
  const double at_rest = env.ambient_c + pw.static_w * pw.ThermalResistance(env.airflow_lfm);
  return max_temp_c >= pol.throttle_c - 10 || at_rest >= pol.throttle_c - 10;
}

void Card::MonitorTick() {
  monitor_timer_ = 0;
  if (monitor_stopping_) return;
  const bool active = governor_->TakeActivity();
  const PowerPolicy pol = governor_->policy();
  const uint32_t nc = controllers();
  std::vector<model::PowerReading> rd(nc);
  double energy = 0, tmax = -1e9;
  uint32_t hottest = 0;
  for (uint32_t c = 0; c < nc; ++c) {
    rd[c] = backend_->ReadPower(c);
    energy += rd[c].energy_j;
    if (rd[c].temperature_c > tmax) {
      tmax = rd[c].temperature_c;
      hottest = c;
    }
  }
  const TimeNs now = PipeEngine(0).Now();
  ThermalState state;
  {
    std::lock_guard<std::mutex> l(mon_mu_);
    // Window average of the card's power monitor (energy over the last window).
    if (!samples_.empty() && now - samples_.back().at > pol.window_ns) samples_.clear();  // asleep since
    samples_.push_back({now, energy});
    while (samples_.size() > 2 && now - samples_[1].at >= pol.window_ns) samples_.pop_front();
    const Sample& first = samples_.front();
    if (now > first.at) {
      mon_.avg_w = (energy - first.energy_j) / (static_cast<double>(now - first.at) / 1e9);
      if (now - first.at >= pol.window_ns) mon_.peak_w = std::max(mon_.peak_w, mon_.avg_w);
    }
    for (uint32_t c = 0; c < nc; ++c) {
      auto& m = mon_.controllers[c];
      m.temperature_c = rd[c].temperature_c;
      m.max_temperature_c = std::max(m.max_temperature_c, rd[c].temperature_c);
      m.energy_j = rd[c].energy_j;
      m.low_power = rd[c].low_power;
    }
    if (mon_.thermal == ThermalState::kThrottling) mon_.throttled_ns += pol.sample_ns;
    state = mon_.thermal;
  }
  // Thermal control. Throttling: writes may use a share of full write power that falls
  // by a quarter per degree above throttle_c - 1 (0.75 at 78 C, none left at 81 C but a
  // 2% trickle), released 2 C below the threshold. Shutdown at shutdown_c.
  if (state == ThermalState::kShutdown) {
    bool cool = true;
    for (const auto& r : rd) cool = cool && r.temperature_c <= pol.resume_c;
    if (cool) ThermalResume();
  } else if (tmax >= pol.shutdown_c) {
    ThermalShutdown(tmax, hottest);
  } else if (tmax >= pol.throttle_c || (state == ThermalState::kThrottling && tmax >= pol.throttle_c - 2)) {
    const double share = std::clamp(1.0 - 0.25 * (tmax - (pol.throttle_c - 1)), 0.02, 1.0);
    governor_->SetWriteShare(share);
    if (state != ThermalState::kThrottling) {
      Logger("card")->warn("card {}: controller {} at {:.1f} C: throttling writes", dir_, hottest, tmax);
      std::lock_guard<std::mutex> l(mon_mu_);
      mon_.thermal = ThermalState::kThrottling;
      ++mon_.throttle_events;
    }
  } else if (state == ThermalState::kThrottling) {
    governor_->SetWriteShare(1.0);
    Logger("card")->info("card {}: {:.1f} C: write throttle released", dir_, tmax);
    std::lock_guard<std::mutex> l(mon_mu_);
    mon_.thermal = ThermalState::kNormal;
  }
  // Once a second: the lifetime counters to the card, and the write rate a lifetime
  // prediction uses (over the last hour).
  if (monitor_ticks_ % 100 == 0) {
    backend_->SaveLifetime();
    uint64_t programmed = 0;
    for (uint32_t c = 0; c < nc; ++c) programmed += backend_->lifetime(c).nand_program_bytes;
    std::lock_guard<std::mutex> l(mon_mu_);
    write_samples_.emplace_back(now, programmed);
    while (write_samples_.size() > 2 && now - write_samples_[1].first >= 3600 * kSec) write_samples_.pop_front();
    const auto& [t0, b0] = write_samples_.front();
    if (now > t0) mon_.nand_write_bps = static_cast<double>(programmed - b0) / (static_cast<double>(now - t0) / 1e9);
  }
  // Reduced-write caps follow each LUN's health, a few times a second.
  if (++monitor_ticks_ % 10 == 0) {
    // Read under the lock (a format may be replacing the LUNs); sent after it. Each task
    // runs on its LUN's engine, where a replaced LUN is deleted (LayOut): there it checks
    // that its LUN is still the card's.
    std::vector<Lun*> online;
    {
      std::lock_guard<std::mutex> lock(luns_mu_);
      for (const auto& l : luns_) {
        if (l && l->state() == LunState::kOnline) online.push_back(l.get());
      }
    }
    for (Lun* l : online) {
      l->engine().Send([this, l] {
        if (IsCurrent(l)) l->Periodic();
      });
    }
  }
  const bool held = governor_->held() > 0;
  std::lock_guard<std::mutex> l(mon_mu_);
  if (active || held || mon_.thermal != ThermalState::kNormal || MonitorMustRun(tmax)) {
    monitor_timer_ = PipeEngine(0).After(pol.sample_ns, [this] { MonitorTick(); });
    return;
  }
  // Idle and cool: sleep until the governor admits the next operation (it wakes us).
  monitor_running_ = false;
  if (governor_->TakeActivity() && !monitor_running_.exchange(true)) {
    monitor_timer_ = PipeEngine(0).After(pol.sample_ns, [this] { MonitorTick(); });
  }
}

void Card::ThermalShutdown(double temp_c, uint32_t controller) {
  {
    std::lock_guard<std::mutex> l(mon_mu_);
    mon_.thermal = ThermalState::kShutdown;
    ++mon_.thermal_shutdowns;
  }
  backend_->CountThermalShutdown(controller);
  Logger("card")->error("card {}: controller {} at {:.1f} C (limit {:.1f} C): thermal shutdown: flushing, "
                        "checkpointing and taking the LUNs offline until it is below {:.1f} C",
                        dir_, controller, temp_c, governor_->policy().shutdown_c, governor_->policy().resume_c);
  // The flush and checkpoint go at full speed: the sooner they are done, the sooner the
  // controllers can drop to standby power.
  governor_->SetWriteShare(1.0);
  auto left = std::make_shared<std::atomic<uint32_t>>(1);
  auto finish = [this, left] {
    if (left->fetch_sub(1) != 1) return;
    for (uint32_t c = 0; c < controllers(); ++c) backend_->SetLowPower(c, true);
    Logger("card")->warn("card {}: LUNs offline, controllers in low-power state", dir_);
  };
  for (Lun* l : luns()) {
    left->fetch_add(1);
    l->engine().Send([l, finish] {
      l->ThermalStop([l, finish](Status s) {
        if (!s.ok()) Logger("card")->error("{}: thermal shutdown: {}", l->name(), s.ToString());
        finish();
      });
    });
  }
  finish();
}

void Card::ThermalResume() {
  Logger("card")->warn("card {}: cool again: controllers up, LUNs attaching", dir_);
  for (uint32_t c = 0; c < controllers(); ++c) backend_->SetLowPower(c, false);
  governor_->SetWriteShare(1.0);
  {
    std::lock_guard<std::mutex> l(mon_mu_);
    mon_.thermal = ThermalState::kNormal;
  }
  for (Lun* l : luns()) {
    if (!l->thermal_stopped_.exchange(false)) continue;
    l->engine().Send([l] {
      if (l->state() != LunState::kThermalShutdown) return;  // the operator acted meanwhile
      l->Attach([l](Status s) {
        if (!s.ok()) Logger("card")->error("{}: attach after thermal shutdown: {}", l->name(), s.ToString());
      });
    });
  }
}

}  // namespace vsl::card
