#include "vsl/monitor/metrics.h"

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace vsl::monitor {
namespace {

using json = nlohmann::json;
using Labels = std::vector<std::pair<std::string, std::string>>;

// Families in first-use order, each with its HELP, TYPE and sample lines.
class Exposition {
 public:
  void Add(const std::string& name, const char* type, const char* help, const Labels& labels, double v) {
    Family& f = Get(name, type, help);
    f.lines.push_back(name + Fmt(labels) + " " + Num(v));
  }
  // A histogram from the status JSON's {"buckets": [[le_s, cumulative]...], "count", "sum_s"}.
  void Histogram(const std::string& name, const char* help, const Labels& labels, const json& h) {
    Family& f = Get(name, "histogram", help);
    for (const json& b : h["buckets"]) {
      Labels l = labels;
      l.emplace_back("le", Num(b[0].get<double>()));
      f.lines.push_back(name + "_bucket" + Fmt(l) + " " + Num(b[1].get<double>()));
    }
    Labels inf = labels;
    inf.emplace_back("le", "+Inf");
    f.lines.push_back(name + "_bucket" + Fmt(inf) + " " + Num(h["count"].get<double>()));
    f.lines.push_back(name + "_sum" + Fmt(labels) + " " + Num(h["sum_s"].get<double>()));
    f.lines.push_back(name + "_count" + Fmt(labels) + " " + Num(h["count"].get<double>()));
  }
  std::string Render() const {
    std::string out;
    for (const std::string& n : order_) {
      const Family& f = fam_.at(n);
      out += "# HELP " + n + " " + f.help + "\n# TYPE " + n + " " + f.type + "\n";
      for (const std::string& l : f.lines) out += l + "\n";
    }
    return out;
  }

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> lines;
  };
  Family& Get(const std::string& name, const char* type, const char* help) {
    auto it = fam_.find(name);
    if (it == fam_.end()) {
      order_.push_back(name);
      it = fam_.emplace(name, Family{type, help, {}}).first;
    }
    return it->second;
  }
  static std::string Fmt(const Labels& labels) {
    if (labels.empty()) return "";
    std::string s = "{";
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i) s += ",";
      s += labels[i].first + "=\"" + EscapeLabel(labels[i].second) + "\"";
    }
    return s + "}";
  }
  static std::string Num(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
    return fmt::format("{}", v);
  }
  std::map<std::string, Family> fam_;
  std::vector<std::string> order_;
};

double Num(const json& j, const char* key, double dflt = 0) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return dflt;
  return j[key].get<double>();
}

}  // namespace

std::string EscapeLabel(const std::string& v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

std::string RenderMetrics(const json& status, const json& mon) {
  Exposition e;
  e.Add("vsl_up", "gauge", "1 while vsld answers (the scrape itself succeeded).", {}, 1);
  if (status.contains("front_ends")) {
    const json& fe = status["front_ends"];
    if (fe.contains("nbd")) {
      e.Add("vsl_nbd_connections", "gauge", "NBD client connections open.", {}, Num(fe["nbd"], "connections"));
    }
    if (fe.contains("sdk")) {
      e.Add("vsl_sdk_applications", "gauge", "SDK applications attached through shared memory.", {},
            Num(fe["sdk"], "applications"));
    }
  }
  for (const json& c : status.value("cards", json::array())) {
    const std::string card = std::to_string(c.value("index", 0));
    const Labels cl{{"card", card}};
    e.Add("vsl_card_info", "gauge", "The card's identity (value 1).",
          {{"card", card}, {"serial", c.value("serial", "")}, {"model", c.value("model", "")},
           {"profile", c.value("profile", "")}, {"firmware", c.value("firmware_version", "")},
           {"backend", c.value("backend", "")}, {"timing", c.value("timing", "")}},
          1);
    const json& p = c.value("power", json::object());
    e.Add("vsl_card_temperature_celsius", "gauge", "The card's hottest controller now.", cl, Num(c, "temperature_c"));
    e.Add("vsl_card_max_temperature_celsius", "gauge", "The highest temperature the card has recorded.", cl,
          Num(p, "max_temperature_c"));
    e.Add("vsl_card_power_watts", "gauge", "PCIe power over the governor's window (static and NAND).", cl,
          Num(p, "avg_w"));
    e.Add("vsl_card_power_peak_watts", "gauge", "The highest window average since the card opened.", cl,
          Num(p, "peak_w"));
    e.Add("vsl_card_power_limit_watts", "gauge", "The power the governor holds the card to.", cl, Num(p, "limit_w"));
    const json& ov = p.value("override", json::object());
    e.Add("vsl_card_power_override", "gauge", "1 while a power override raises the limit above the slot's.", cl,
          ov.value("on", false) ? 1 : 0);
    e.Add("vsl_card_power_override_watts", "gauge", "The override's limit (0: none configured).", cl,
          Num(ov, "watts"));
    const json& gov = p.value("governor", json::object());
    e.Add("vsl_card_power_write_waits_total", "counter", "NAND programs the power governor held back.", cl,
          Num(gov, "write_waits"));
    e.Add("vsl_card_power_write_wait_seconds_total", "counter", "Time programs waited for the power governor.",
          cl, Num(gov, "write_wait_s"));
    const json& th = p.value("thermal", json::object());
    const std::string tstate = th.value("state", "normal");
    for (const char* s : {"normal", "throttle", "shutdown"}) {
      e.Add("vsl_card_thermal_state", "gauge", "1 for the card's thermal state (normal, throttle, shutdown).",
            {{"card", card}, {"state", s}}, tstate == s ? 1 : 0);
    }
    e.Add("vsl_card_thermal_throttle_threshold_celsius", "gauge", "Writes are throttled from this temperature.",
          cl, Num(th, "throttle_c"));
    e.Add("vsl_card_thermal_shutdown_threshold_celsius", "gauge", "LUNs shut down at this temperature.", cl,
          Num(th, "shutdown_c"));
    e.Add("vsl_card_thermal_throttle_seconds_total", "counter", "Time writes were thermally throttled.", cl,
          Num(th, "throttled_s"));
    e.Add("vsl_card_thermal_throttle_events_total", "counter", "Times thermal throttling started.", cl,
          Num(th, "throttle_events"));
    e.Add("vsl_card_thermal_shutdowns_total", "counter", "Thermal shutdowns.", cl, Num(th, "shutdowns"));
    for (const json& pc : p.value("controllers", json::array())) {
      const Labels ctl{{"card", card}, {"controller", std::to_string(pc.value("controller", 0))}};
      e.Add("vsl_controller_temperature_celsius", "gauge", "A controller's temperature.", ctl,
            Num(pc, "temperature_c"));
      e.Add("vsl_controller_energy_joules_total", "counter", "Energy a controller used since the card opened.",
            ctl, Num(pc, "energy_j"));
    }
    const json& h = c.value("health", json::object());
    const std::string hstate = h.value("state", "healthy");
    for (const char* s : {"healthy", "reduced-write", "read-only"}) {
      e.Add("vsl_card_health_state", "gauge", "1 for the card's health state (its worst LUN).",
            {{"card", card}, {"state", s}}, hstate == s ? 1 : 0);
    }
    e.Add("vsl_card_reserve_ratio", "gauge", "Spare room left, the worst LUN's (1: as formatted).", cl,
          Num(h, "reserve_percent", 100) / 100);
    e.Add("vsl_card_reserve_warning_ratio", "gauge", "The reserve below which the card warns.", cl,
          Num(h, "reserve_warn_at_percent") / 100);
    e.Add("vsl_card_endurance_used_ratio", "gauge", "Mean P/E cycles used against the rated endurance.", cl,
          Num(h, "endurance_used_percent") / 100);
    e.Add("vsl_card_rated_endurance_bytes", "gauge", "Host bytes the card is rated to write (at the rated WAF).",
          cl, Num(h, "rated_pb_written") * 1e15);
    e.Add("vsl_card_nand_write_bytes_per_second", "gauge", "NAND programs per second over the last hour.", cl,
          Num(h, "nand_write_bytes_per_s"));
    const json& lt = h.value("lifetime", json::object());
    e.Add("vsl_card_host_read_bytes_total", "counter", "Host bytes read over the card's life.", cl,
          Num(lt, "host_read_bytes"));
    e.Add("vsl_card_host_written_bytes_total", "counter", "Host bytes written over the card's life.", cl,
          Num(lt, "host_write_bytes"));
    e.Add("vsl_card_nand_read_bytes_total", "counter", "NAND bytes read over the card's life.", cl,
          Num(lt, "physical_read_bytes"));
    e.Add("vsl_card_nand_written_bytes_total", "counter", "NAND bytes programmed over the card's life.", cl,
          Num(lt, "physical_write_bytes"));
    e.Add("vsl_card_erases_total", "counter", "Block erases over the card's life.", cl, Num(lt, "erases"));
    const json& sm = h.value("smart", json::object());
    e.Add("vsl_card_media_errors_total", "counter", "Reads ECC could not correct over the card's life.", cl,
          Num(sm, "media_errors"));
    e.Add("vsl_card_program_failures_total", "counter", "Failed programs over the card's life.", cl,
          Num(sm, "program_fails"));
    e.Add("vsl_card_erase_failures_total", "counter", "Failed erases over the card's life.", cl,
          Num(sm, "erase_fails"));
    e.Add("vsl_card_unsafe_shutdowns_total", "counter", "Power losses without a clean stop.", cl,
          Num(sm, "unsafe_shutdowns"));
    e.Add("vsl_card_power_cycles_total", "counter", "Times the card powered on.", cl, Num(sm, "power_cycles"));
    e.Add("vsl_card_power_on_seconds_total", "counter", "Time the card has been powered.", cl,
          Num(sm, "power_on_hours") * 3600);
    e.Add("vsl_card_critical_warning", "gauge", "NVMe-style critical warning bits (docs/power.md).", cl,
          Num(sm, "critical_warning"));
    for (const json& k : c.value("controllers", json::array())) {
      const Labels ctl{{"card", card}, {"controller", std::to_string(k.value("index", 0))}};
      e.Add("vsl_controller_dies", "gauge", "NAND dies behind a controller.", ctl, Num(k, "dies"));
      e.Add("vsl_controller_failed_dies", "gauge", "Dies a controller has lost.", ctl, Num(k, "failed_dies"));
      e.Add("vsl_controller_plp_healthy", "gauge", "1 while the power-loss protection is healthy.", ctl,
            k.value("plp", "") == "healthy" ? 1 : 0);
      e.Add("vsl_controller_rated_pe_used_ratio", "gauge", "P/E cycles used against the rating.", ctl,
            Num(k, "rated_pe_used_percent") / 100);
      e.Add("vsl_controller_blocks", "gauge", "Erase blocks behind a controller.", ctl, Num(k, "blocks"));
      e.Add("vsl_controller_factory_bad_blocks", "gauge", "Blocks marked bad at the factory.", ctl,
            Num(k, "factory_bad_blocks"));
      e.Add("vsl_controller_grown_bad_blocks", "gauge", "Blocks retired since (grown bad).", ctl,
            Num(k, "grown_bad_blocks"));
      const json& ec = k.value("erase_count", json::object());
      e.Add("vsl_controller_erase_count_mean", "gauge", "Mean erase count of the good blocks.", ctl, Num(ec, "mean"));
      e.Add("vsl_controller_erase_count_max", "gauge", "Highest erase count of any block.", ctl, Num(ec, "max"));
      e.Add("vsl_controller_power_ons", "gauge", "Times a controller powered on.", ctl, Num(k, "power_on_count"));
    }
    for (const json& l : c.value("luns", json::array())) {
      const std::string lun = l.value("name", "");
      const Labels ll{{"card", card}, {"lun", lun}};
      const std::string st = l.value("state", "offline");
      e.Add("vsl_lun_info", "gauge", "A LUN's controller and state (value 1).",
            {{"card", card}, {"lun", lun}, {"controller", std::to_string(l.value("controller", 0))},
             {"state", st}},
            1);
      e.Add("vsl_lun_online", "gauge", "1 while the LUN is attached and serving.", ll, st == "online" ? 1 : 0);
      if (!l.contains("io")) continue;  // not attached: no FTL to ask
      e.Add("vsl_lun_size_bytes", "gauge", "The LUN's capacity.", ll, Num(l, "size_bytes"));
      e.Add("vsl_lun_mapped_bytes", "gauge", "Bytes of the LUN holding data.", ll, Num(l, "mapped_bytes"));
      const json& io = l["io"];
      e.Add("vsl_lun_reads_total", "counter", "Read requests since the LUN attached.", ll, Num(io, "reads"));
      e.Add("vsl_lun_writes_total", "counter", "Write requests since the LUN attached.", ll, Num(io, "writes"));
      e.Add("vsl_lun_trims_total", "counter", "Trim requests since the LUN attached.", ll, Num(io, "trims"));
      e.Add("vsl_lun_atomic_batches_total", "counter", "Atomic batches since the LUN attached.", ll,
            Num(io, "atomic_batches"));
      const json& sa = l.value("since_attach", json::object());
      e.Add("vsl_lun_read_bytes_total", "counter", "Bytes read by the host since the LUN attached.", ll,
            Num(sa, "host_read_bytes"));
      e.Add("vsl_lun_written_bytes_total", "counter", "Bytes written by the host since the LUN attached.", ll,
            Num(sa, "host_write_bytes"));
      e.Add("vsl_lun_nand_written_bytes_total", "counter", "NAND bytes programmed since the LUN attached.", ll,
            Num(sa, "physical_write_bytes"));
      e.Add("vsl_lun_groomer_written_bytes_total", "counter", "Bytes the groomer relocated since the LUN attached.",
            ll, Num(io, "gc_write_bytes"));
      e.Add("vsl_lun_groomer_victims_total", "counter", "Erase units the groomer reclaimed.", ll, Num(io, "victims"));
      e.Add("vsl_lun_wear_moves_total", "counter", "Erase units moved to level wear.", ll, Num(io, "wear_moves"));
      e.Add("vsl_lun_write_stalls_total", "counter", "Host writes that waited for the groomer.", ll,
            Num(io, "write_stalls"));
      e.Add("vsl_lun_write_amplification", "gauge", "NAND writes per host write since the LUN attached.", ll,
            Num(sa, "waf"));
      e.Histogram("vsl_lun_read_latency_seconds", "Read request latency, call to answer.", ll, io["read_latency"]);
      e.Histogram("vsl_lun_write_latency_seconds", "Write request latency, call to durable answer.", ll,
                  io["write_latency"]);
      const json& r = l.value("reserve", json::object());
      e.Add("vsl_lun_free_lebs", "gauge", "Erase units free for writing.", ll, Num(r, "free_lebs"));
      e.Add("vsl_lun_reserve_ratio", "gauge", "The LUN's spare room left (1: as formatted).", ll,
            Num(r, "percent", 100) / 100);
      e.Add("vsl_lun_reserve_bytes", "gauge", "The LUN's spare room now.", ll, Num(r, "spare_bytes"));
      const std::string hs = l.value("health", "healthy");
      for (const char* s : {"healthy", "reduced-write", "read-only"}) {
        e.Add("vsl_lun_health_state", "gauge", "1 for the LUN's health state.", {{"card", card}, {"lun", lun}, {"state", s}},
              hs == s ? 1 : 0);
      }
      const json& ec = l.value("erase_count", json::object());
      e.Add("vsl_lun_erase_count_max", "gauge", "Highest erase count among the LUN's erase units.", ll, Num(ec, "max"));
      e.Add("vsl_lun_erase_count_min", "gauge", "Lowest erase count among the LUN's erase units.", ll, Num(ec, "min"));
      const json& m = l.value("media", json::object());
      e.Add("vsl_lun_ecc_corrected_bitflips_total", "counter", "Bit flips the controller's ECC corrected on this LUN's reads and copies.",
            ll, Num(m, "corrected_bits"));
      e.Add("vsl_lun_ecc_corrected_commands_total", "counter", "Reads and copies that needed ECC correction.", ll,
            Num(m, "corrected_commands"));
      const std::pair<const char*, double> kinds[] = {
          {"uncorrectable", Num(m, "uncorrectable")},       {"die_timeout", Num(m, "die_timeouts")},
          {"program_failure", Num(m, "program_failures")}, {"erase_failure", Num(m, "erase_failures")},
          {"lost_sector", Num(l.value("flashback", json::object()), "lost_sectors")}};
      for (const auto& [k, v] : kinds) {
        e.Add("vsl_lun_errors_total", "counter", "Errors on this LUN by kind (media counters since the card opened).",
              {{"card", card}, {"lun", lun}, {"kind", k}}, v);
      }
      const json& fb = l.value("flashback", json::object());
      e.Add("vsl_lun_flashback_enabled", "gauge", "1 when the LUN's stripes carry parity.", ll,
            fb.value("enabled", false) ? 1 : 0);
      e.Add("vsl_lun_flashback_failed_dies", "gauge", "Dies FlashBack has substituted on this LUN.", ll,
            static_cast<double>(fb.value("failed_dies", json::array()).size()));
      e.Add("vsl_lun_flashback_rebuild_lebs_remaining", "gauge", "Erase units still to rebuild under parity.", ll,
            Num(fb, "rebuild_lebs_left"));
      e.Add("vsl_lun_flashback_substitution_active", "gauge", "1 while a failed die's data is served from parity.",
            ll, fb.value("substitution_active", false) ? 1 : 0);
      const json& at = l.value("attach", json::object());
      e.Add("vsl_lun_attach_seconds", "gauge", "How long the last attach took.", ll, Num(at, "ms") / 1e3);
      e.Add("vsl_lun_attach_from_checkpoint", "gauge", "1 if the last attach came from a clean checkpoint.", ll,
            at.value("from_checkpoint", false) ? 1 : 0);
      e.Add("vsl_lun_host_memory_bytes", "gauge", "Host RAM the LUN's FTL holds.", ll, Num(l, "host_ram_bytes"));
    }
  }
  if (mon.is_object()) {
    for (const json& p : mon.value("predictions", json::array())) {
      const Labels cl{{"card", std::to_string(p.value("card", 0))}};
      e.Add("vsl_card_life_remaining_ratio", "gauge", "Endurance left, from P/E cycles against the rating.", cl,
            Num(p, "percent_remaining") / 100);
      if (p.contains("days") && p["days"].is_number()) {
        e.Add("vsl_card_predicted_life_seconds", "gauge",
              "Time until the rated endurance is used at the recent write rate.", cl, Num(p, "days") * 86400);
        e.Add("vsl_card_predicted_end_of_life_timestamp_seconds", "gauge",
              "When the rated endurance will be used at the recent write rate (Unix time).", cl,
              Num(p, "end_of_life_unix"));
      }
    }
    e.Add("vsl_monitor_samples_total", "counter", "History samples taken since vsld started.", {},
          Num(mon, "samples"));
    for (const json& a : mon.value("alerts", json::array())) {
      e.Add("vsl_alert_active", "gauge", "1 for each alert now raised (docs/monitoring.md).",
            {{"alert", a.value("name", "")}, {"severity", a.value("severity", "")},
             {"card", std::to_string(a.value("card", 0))}, {"lun", a.value("lun", "")}},
            1);
    }
    const json raised = mon.value("raised_total", json::object());  // items() must not outlive it
    for (const auto& [name, n] : raised.items()) {
      e.Add("vsl_alerts_raised_total", "counter", "Times each alert was raised since vsld started.",
            {{"alert", name}}, n.get<double>());
    }
  }
  return e.Render();
}

}  // namespace vsl::monitor
