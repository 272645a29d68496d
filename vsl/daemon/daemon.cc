#include "vsl/daemon/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "vsl/backend/open.h"
#include "vsl/card/volume.h"
#include "vsl/core/socket.h"
#include "vsl/core/log.h"

namespace vsl::daemon {

using nlohmann::json;

namespace {

json ErrorReply(const vsl::Status& s) {
  return {{"v", kProtocolVersion},
          {"ok", false},
          {"error", {{"code", std::string(StatusCodeName(s.code()))}, {"message", std::string(s.message())}}}};
}

Result<ftl::ReserveMode> ParseReserve(const std::string& s) {
  if (s == "stock") return ftl::ReserveMode::kStock;
  if (s == "high-performance") return ftl::ReserveMode::kHighPerformance;
  if (s == "custom") return ftl::ReserveMode::kCustom;
  if (s == "under-provision") return ftl::ReserveMode::kUnderProvision;
  return vsl::Status::InvalidArgument(fmt::format(
      "reserve mode '{}' is not one of stock, high-performance, custom, under-provision", s));
}

// Typed argument access with a clear error for a wrong type.
template <typename T>
Result<T> Arg(const json& req, const char* key, T dflt) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return dflt;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return vsl::Status::InvalidArgument(fmt::format("argument '{}' has the wrong type", key));
  }
}

}  // namespace

// ---- config ----

std::string BesideControlSocket(const std::string& control_socket, const std::string& suffix) {
  std::string base = control_socket;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".sock") == 0) base.resize(base.size() - 5);
  return base + suffix;
}

std::string SdkSocketPath(const std::string& sdk_socket, const std::string& control_socket) {
  if (sdk_socket == "none") return "";
  if (!sdk_socket.empty()) return sdk_socket;
  return BesideControlSocket(control_socket, "-sdk.sock");
}

Result<card::Lun*> FindSdkLun(const std::vector<card::Card*>& cards, uint32_t volume_chunk_kib,
                              const std::string& name) {
  for (std::size_t k = 0; k < cards.size(); ++k) {
    const std::string prefix = k == 0 ? "" : fmt::format("card{}/", k);
    for (card::Lun* l : cards[k]->luns()) {
      if (name != prefix + l->name()) continue;
      if (volume_chunk_kib != 0) {
        return Status::FailedPrecondition(fmt::format(
            "{} is striped into the card volume; the SDK reaches LUNs only without one", name));
      }
      return l;
    }
  }
  return Status::NotFound(fmt::format("no LUN named '{}' (lun0, lun1, ...; card1/lun0 on a second card)", name));
}

std::string NbdSocketPath(const std::string& nbd_socket, const std::string& control_socket) {
  if (nbd_socket == "none") return {};
  if (!nbd_socket.empty()) return nbd_socket;
  return BesideControlSocket(control_socket, "-nbd.sock");
}

uint32_t OctalMode(const std::string& m) {
  std::size_t used = 0;
  unsigned long mode = 0;
  try {
    mode = std::stoul(m, &used, 8);
  } catch (const std::exception&) {
    used = 0;
  }
  if (m.empty() || used != m.size() || mode > 0777) {
    throw std::invalid_argument(fmt::format("'{}' is not an octal mode such as \"0600\"", m));
  }
  return static_cast<uint32_t>(mode);
}

Result<DaemonConfig> DaemonConfig::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return vsl::Status::NotFound(fmt::format("cannot read config file {}", path));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    return vsl::Status::InvalidArgument(fmt::format("config file {}: {}", path, e.what()));
  }
  if (!j.is_object()) return vsl::Status::InvalidArgument(fmt::format("config file {}: not a JSON object", path));
  DaemonConfig c;
  for (auto& [k, v] : j.items()) {
    try {
      if (k == "cards") {
        c.cards = v.get<std::vector<std::string>>();
      } else if (k == "socket") {
        c.socket_path = v.get<std::string>();
      } else if (k == "socket_mode") {
        c.socket_mode = OctalMode(v.get<std::string>());
      } else if (k == "attach") {
        c.attach = v.get<bool>();
      } else if (k == "sim_ecc") {
        auto m = model::ParseEccMode(v.get<std::string>());
        if (!m.ok()) return m.status().WithContext(fmt::format("config file {}", path));
        c.sim_ecc = *m;
      } else if (k == "sim_timing") {
        const std::string m = v.get<std::string>();
        if (m != "model" && m != "none") throw std::invalid_argument("expected \"model\" or \"none\"");
        c.sim_zero_time = m == "none";
      } else if (k == "host_id") {
        c.sharing.host_id = v.get<uint32_t>();
      } else if (k == "luns") {
        c.sharing.luns = v.get<std::vector<uint32_t>>();
      } else if (k == "lease_ms") {
        c.sharing.lease_ns = static_cast<DurNs>(v.get<uint32_t>()) * kMs;
      } else if (k == "takeover") {
        const std::string m = v.get<std::string>();
        if (m != "auto" && m != "manual") throw std::invalid_argument("expected \"auto\" or \"manual\"");
        c.sharing.auto_takeover = m == "auto";
      } else if (k == "volume_chunk_kib") {
        c.volume_chunk_kib = v.get<uint32_t>();
      } else if (k == "ublk") {
        const std::string m = v.get<std::string>();
        if (m != "auto" && m != "off") throw std::invalid_argument("expected \"auto\" or \"off\"");
        c.ublk = m == "auto";
      } else if (k == "nbd") {
        if (!v.is_object()) throw std::invalid_argument("expected an object");
        for (auto& [nk, nv] : v.items()) {
          if (nk == "socket") c.nbd.socket = nv.get<std::string>();
          else if (nk == "socket_mode") c.nbd.socket_mode = OctalMode(nv.get<std::string>());
          else if (nk == "tcp") c.nbd.tcp = nv.get<std::string>();
          else if (nk == "read_only") c.nbd.read_only = nv.get<bool>();
          else if (nk == "write_through") c.nbd.write_through = nv.get<bool>();
          else if (nk == "polled") c.nbd.polled = nv.get<bool>();
          else if (nk == "tls_mode") {
            auto m = nbd::ParseTlsMode(nv.get<std::string>());
            if (!m.ok()) throw std::invalid_argument(std::string(m.status().message()));
            c.nbd.tls.mode = *m;
          } else if (nk == "tls_cert") c.nbd.tls.cert_file = nv.get<std::string>();
          else if (nk == "tls_key") c.nbd.tls.key_file = nv.get<std::string>();
          else if (nk == "tls_ca") c.nbd.tls.ca_file = nv.get<std::string>();
          else if (nk == "tls_psk") c.nbd.tls.psk_file = nv.get<std::string>();
          else throw std::invalid_argument(fmt::format("unknown key '{}'", nk));
        }
      } else if (k == "power") {
        if (!v.is_object()) throw std::invalid_argument("expected an object");
        for (auto& [pk, pv] : v.items()) {
          if (pk == "slot_limit_w") c.power.slot_limit_w = pv.get<double>();
          else if (pk == "slot_capability_w") c.power.slot_capability_w = pv.get<double>();
          else if (pk == "environment") {
            for (auto& [ek, ev] : pv.items()) {
              if (ek == "ambient_c") c.power.environment.ambient_c = ev.get<double>();
              else if (ek == "airflow_lfm") c.power.environment.airflow_lfm = ev.get<double>();
              else throw std::invalid_argument(fmt::format("unknown key '{}'", ek));
            }
          } else if (pk == "cards") {
            if (!pv.is_object()) throw std::invalid_argument("'cards' expects an object keyed by card serial");
            for (auto& [serial, cv] : pv.items()) {
              CardPowerConfig cp;
              for (auto& [ck, cvv] : cv.items()) {
                if (ck == "override_w") cp.override_w = cvv.get<double>();
                else if (ck == "slot_capability_w") cp.slot_capability_w = cvv.get<double>();
                else throw std::invalid_argument(fmt::format("unknown key '{}'", ck));
              }
              c.power.cards[serial] = cp;
            }
          } else {
            throw std::invalid_argument(fmt::format("unknown key '{}'", pk));
          }
        }
      } else if (k == "monitor") {
        if (!v.is_object()) throw std::invalid_argument("expected an object");
        for (auto& [mk, mv] : v.items()) {
          if (mk == "http") c.monitor.http = mv.get<std::string>();
          else if (mk == "allow_remote") c.monitor.allow_remote = mv.get<bool>();
          else if (mk == "tls") c.monitor.tls = mv.get<bool>();
          else if (mk == "interval_s") c.monitor.interval_s = mv.get<double>();
          else if (mk == "alert_hook") c.monitor.alert_hook = mv.get<std::string>();
          else if (mk == "temp_warn_c") c.monitor.temp_warn_c = mv.get<double>();
          else if (mk == "eol_days") c.monitor.eol_days = mv.get<double>();
          else throw std::invalid_argument(fmt::format("unknown key '{}'", mk));
        }
        if (!(c.monitor.interval_s == 0 || (c.monitor.interval_s >= 0.1 && c.monitor.interval_s <= 3600))) {
          throw std::invalid_argument("interval_s must be 0 (off) or 0.1 to 3600");
        }
      } else if (k == "sdk") {
        if (!v.is_object()) throw std::invalid_argument("expected an object");
        for (auto& [sk, sv] : v.items()) {
          if (sk == "socket") c.sdk.socket = sv.get<std::string>();
          else if (sk == "socket_mode") c.sdk.socket_mode = OctalMode(sv.get<std::string>());
          else throw std::invalid_argument(fmt::format("unknown key '{}'", sk));
        }
      } else {
        return vsl::Status::InvalidArgument(fmt::format("config file {}: unknown key '{}'", path, k));
      }
    } catch (const std::exception& e) {
      return vsl::Status::InvalidArgument(fmt::format("config file {}: key '{}': {}", path, k, e.what()));
    }
  }
  return c;
}

card::PowerPolicy PowerConfig::PolicyFor(const std::string& serial) const {
  card::PowerPolicy p;
  p.slot_limit_w = slot_limit_w;
  p.slot_capability_w = slot_capability_w;
  if (auto it = cards.find(serial); it != cards.end()) {
    p.override_w = it->second.override_w;
    if (it->second.slot_capability_w > 0) p.slot_capability_w = it->second.slot_capability_w;
  }
  return p;
}

namespace {
// The card's serial (the controllers' serials are it plus "-<index>").
std::string CardSerial(card::Card& c) {
  const std::string s = c.backend().identity(0).serial;
  const auto dash = s.rfind('-');
  return dash == std::string::npos ? s : s.substr(0, dash);
}

// Write amplification of uniform random writes on the stock format (28% spare, models.md
// table): what the rated endurance in bytes written assumes.
constexpr double kRatedWaf = 2.48;
}  // namespace

// ---- daemon ----

Result<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& cfg) {
  auto d = std::unique_ptr<Daemon>(new Daemon());
  d->cfg_ = cfg;
  if (cfg.cards.empty()) return vsl::Status::InvalidArgument("no card to serve (give --card DIR or a config file)");
  for (const std::string& dir : cfg.cards) {
    card::CardOptions o;
    o.sim.environment = cfg.power.environment;
    o.sim.ecc = cfg.sim_ecc;
    o.sim.null_timing = cfg.sim_zero_time;
    if (cfg.sim_zero_time) {
      auto spec = card::ParseCardSpec(dir);
      if (!spec.ok()) return spec.status().WithContext(fmt::format("card {}", dir));
      if (spec->kind != "sim") {
        return vsl::Status::InvalidArgument(
            fmt::format("card {}: zero-time (--timing none) applies to simulated cards only, not to a {} card",
                        dir, spec->kind));
      }
      Logger("vsld")->warn("card {}: zero-time card (--timing none): a benchmarking mode, NAND operations take "
                           "no time", dir);
    }
    o.power.slot_limit_w = cfg.power.slot_limit_w;
    o.power.slot_capability_w = cfg.power.slot_capability_w;
    o.sharing = cfg.sharing;
    auto c = backend::OpenCard(dir, o);
    if (!c.ok()) return c.status().WithContext(fmt::format("card {}", dir));
    const std::string serial = CardSerial(**c);
    const card::PowerPolicy want = cfg.power.PolicyFor(serial);
    if (vsl::Status ps = (*c)->SetPowerPolicy(want); !ps.ok()) {
      // The safe side: the slot limit stays, and the operator is told why.
      Logger("vsld")->error("card {} (serial {}): power configuration refused, staying at the {:.2f} W slot limit: {}",
                            dir, serial, o.power.limit_w(), ps.message());
    } else {
      Logger("vsld")->info("card {} (serial {}): power limit {:.2f} W{}", dir, serial, want.limit_w(),
                           want.override_w > 0 ? " (power override)" : "");
    }
    const card::ControllerIdentity id = (*c)->backend().identity(0);
    Logger("vsld")->info("card {}: serial {}, {} LUN(s), {} backend: {}, firmware {}", dir, id.serial,
                         (*c)->luns().size(), (*c)->backend().kind(), id.hardware, id.firmware_version);
    d->cards_.push_back(std::move(c).value());
    d->beacon_.push_back(false);
  }
  if (cfg.attach) {
    for (auto& c : d->cards_) {
      if (vsl::Status s = c->AttachAll(); !s.ok()) {
        Logger("vsld")->error("card {}: {}", c->dir(), s.ToString());  // its LUN says failed
      }
    }
  }
  return d;
}

Daemon::~Daemon() {
  for (auto& c : cards_) {
    if (vsl::Status s = c->DetachAll(); !s.ok()) Logger("vsld")->error("card {}: detach: {}", c->dir(), s.ToString());
  }
}

std::string Daemon::Handle(std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  json req;
  try {
    req = json::parse(line);
  } catch (const json::exception&) {
    return ErrorReply(vsl::Status::InvalidArgument("the request is not valid JSON")).dump();
  }
  if (!req.is_object()) return ErrorReply(vsl::Status::InvalidArgument("the request is not a JSON object")).dump();
  auto v = req.find("v");
  if (v == req.end() || !v->is_number_integer() || v->get<int>() != kProtocolVersion) {
    return ErrorReply(vsl::Status::NotSupported(
                          fmt::format("protocol version: this vsld speaks version {}", kProtocolVersion)))
        .dump();
  }
  Result<json> r = Dispatch(req);
  if (!r.ok()) return ErrorReply(r.status()).dump();
  return json{{"v", kProtocolVersion}, {"ok", true}, {"result", std::move(r).value()}}.dump();
}

Result<card::Card*> Daemon::CardArg(const json& req) {
  VSL_ASSIGN_OR_RETURN(int64_t i, Arg<int64_t>(req, "card", 0));
  if (i < 0 || static_cast<std::size_t>(i) >= cards_.size()) {
    return vsl::Status::InvalidArgument(fmt::format("no card {} (this vsld serves {})", i, cards_.size()));
  }
  return cards_[static_cast<std::size_t>(i)].get();
}

Result<std::vector<card::Lun*>> Daemon::LunsArg(const json& req, card::Card& c) {
  VSL_ASSIGN_OR_RETURN(int64_t i, Arg<int64_t>(req, "lun", -1));
  if (i == -1) return c.luns();  // every LUN
  if (i < 0) return vsl::Status::InvalidArgument(fmt::format("no LUN {}", i));
  card::Lun* l = c.lun(static_cast<uint32_t>(i));
  if (l == nullptr) return vsl::Status::InvalidArgument(fmt::format("card has no LUN {}", i));
  return std::vector<card::Lun*>{l};
}

Result<json> Daemon::LunStatus(card::Card& c, card::Lun& l, bool all) {
  json j = {{"name", l.name()},
            {"index", l.index()},
            {"controller", l.controller()},
            {"pipes", l.pipes()},
            {"state", std::string(card::LunStateName(l.state()))}};
  if (!l.error().empty()) j["error"] = l.error();
  if (c.options().sharing.host_id != 0) {
    // What the card says of the LUN's owner (its first pipe's).
    nand::PipeOwner o;
    TimeNs now = 0;
    c.RunOnPipe(l.pipes()[0], [&] {
      o = l.owner();
      now = l.engine().Now();
    });
    j["owner"] = {{"host", o.host},
                  {"generation", o.generation},
                  {"this_host", o.host == c.options().sharing.host_id},
                  {"lease_left_ms", o.lease_until == kTimeNever ? -1.0
                                    : o.lease_until > now       ? (o.lease_until - now) / 1e6
                                                                : 0.0}};
  }
  VSL_RETURN_IF_ERROR(l.Call([&l, &j, all](card::Lun::Done d) {
    ftl::Ftl* f = l.ftl();
    if (f == nullptr) return d(vsl::Status::Ok());
    const auto& st = f->stats();
    const auto fb = f->flashback_status();
    const uint64_t sb = f->sector_bytes();
    j["sector_bytes"] = sb;
    j["sectors"] = f->sectors();
    j["size_bytes"] = f->sectors() * sb;
    j["mapped_bytes"] = f->mapped_sectors() * sb;
    const auto rs = f->reserve_status();
    j["health"] = std::string(ftl::HealthModeName(rs.mode));
    j["reserve"] = {{"percent", rs.percent},
                    {"warning", rs.warning},
                    {"warn_at_percent", ftl::kReserveWarnPercent},
                    {"reduced_write_at_percent", ftl::kReducedWritePercent},
                    {"spare_bytes", rs.sectors * sb},
                    {"formatted_spare_bytes", rs.full_sectors * sb},
                    {"free_lebs", f->free_lebs()}};
    j["flashback"] = {{"enabled", fb.enabled},
                      {"substitution_active", fb.active},
                      {"failed_dies", fb.failed_dies},
                      {"rebuild_lebs_left", fb.rebuild_lebs_left},
                      {"lost_sectors", fb.lost_lbas.size()},
                      {"unnamed_lost_stripes", fb.unnamed_lost_stripes}};
    // Counters since this attach (lifetime counters come with the health work).
    j["since_attach"] = {{"host_read_bytes", st.host_read_sectors * sb},
                         {"host_write_bytes", st.host_write_sectors * sb},
                         {"physical_write_bytes", st.pages_programmed * f->geometry().page_data_bytes},
                         {"waf", st.Waf()}};
    // Requests and their latency since this attach (cumulative buckets, as Prometheus
    // histograms count them; docs/monitoring.md).
    auto hist = [](const LatencyHistogram& h) {
      json b = json::array();
      uint64_t cum = 0;
      for (std::size_t i = 0; i < LatencyHistogram::kBoundsNs.size(); ++i) {
        cum += h.bucket(i);
        b.push_back({LatencyHistogram::kBoundsNs[i] / 1e9, cum});
      }
      return json{{"buckets", b}, {"count", h.count()}, {"sum_s", h.sum_ns() / 1e9},
                  {"p99_s_bound", h.QuantileBoundNs(0.99) / 1e9}};
    };
    j["io"] = {{"reads", st.host_reads},
               {"writes", st.host_writes},
               {"trims", st.host_trims},
               {"atomic_batches", st.atomic_batches},
               {"read_latency", hist(st.read_latency)},
               {"write_latency", hist(st.write_latency)},
               {"write_stalls", st.write_stalls},
               {"gc_write_bytes", st.gc_write_sectors * sb},
               {"victims", st.victims},
               {"wear_moves", st.wear_moves}};
    const auto& m = l.media();
    j["media"] = {{"corrected_bits", m.corrected_bits}, {"corrected_commands", m.corrected_ops},
                  {"uncorrectable", m.uncorrectable}, {"die_timeouts", m.die_timeouts},
                  {"program_failures", st.program_failures}, {"erase_failures", st.erase_failures}};
    j["host_ram_bytes"] = f->memory_bytes();
    const auto ai = f->attach_info();
    j["attach"] = {{"from_checkpoint", ai.from_checkpoint}, {"lebs_scanned", ai.lebs_scanned},
                   {"ms", ai.attach_ns / 1e6}};
    if (all) {
      j["flashback"]["events"] = fb.events;
      j["flashback"]["lost_lbas"] = fb.lost_lbas;
      const auto [lo, hi] = f->EraseCountRange();
      j["erase_count"] = {{"min", lo}, {"max", hi}};
      j["stats"] = {{"gc_write_sectors", st.gc_write_sectors}, {"victims", st.victims},
                    {"lebs_erased", st.lebs_erased}, {"program_failures", st.program_failures},
                    {"erase_failures", st.erase_failures}, {"read_errors", st.read_errors},
                    {"parity_pages", st.parity_pages}, {"rebuilt_pages", st.rebuilt_pages},
                    {"read_retries", f->read_retry_stats().retries},
                    {"reads_recovered_by_retry", f->read_retry_stats().recovered}};
    }
    d(vsl::Status::Ok());
  }));
  return j;
}

namespace {
// Card-level health from its LUNs' status and its controllers' counters: reserve space
// and state (the worst LUN), endurance, lifetime bytes and a prediction, and the
// NVMe-SMART-like summary (docs/power.md).
json CardHealth(card::Card& c, const json& luns, const json& power) {
  double reserve = 100;
  bool warning = false, read_only = false, reduced = false, degraded = false;
  uint64_t lost = 0;
  for (const json& l : luns) {
    if (!l.contains("reserve")) continue;
    reserve = std::min(reserve, l["reserve"]["percent"].get<double>());
    warning = warning || l["reserve"]["warning"].get<bool>();
    const std::string h = l["health"].get<std::string>();
    read_only = read_only || h == "read-only";
    reduced = reduced || h == "reduced-write";
    degraded = degraded || l["flashback"]["substitution_active"].get<bool>();
    lost += l["flashback"]["lost_sectors"].get<uint64_t>();
  }
  const auto& g = c.geometry();
  const auto& rel = c.backend().reliability();
  const double raw_bytes = static_cast<double>(g.controllers) * g.pipes_per_controller * g.dies_per_pipe() *
                           g.blocks_per_lun * g.pages_per_block * g.page_data_bytes;
  const double rated_pb = rel.endurance_cycles * raw_bytes / kRatedWaf / 1e15;
  model::Lifetime sum;
  uint64_t unsafe = 0, cycles = 0;
  for (uint32_t k = 0; k < c.controllers(); ++k) {
    sum += c.backend().lifetime(k);
    const auto st = c.backend().power_cycles(k);
    unsafe = std::max<uint64_t>(unsafe, st.unsafe_power_offs);
    cycles = std::max<uint64_t>(cycles, st.power_on_count);
  }
  // Wear from the block tables (the pipes' engines own them).
  uint64_t pe_sum = 0, blocks = 0;
  for (uint32_t p = 0; p < c.backend().pipe_count(); ++p) {
    c.RunOnPipe(p, [&c, &pe_sum, &blocks, p] {
      const auto d = c.backend().PipeCounters(p);
      pe_sum += d.pe_sum;
      blocks += d.blocks - d.factory_bad_blocks - d.grown_bad_blocks;
    });
  }
  const double pe_mean = blocks ? static_cast<double>(pe_sum) / static_cast<double>(blocks) : 0;
  const double pe_used = 100.0 * pe_mean / rel.endurance_cycles;
  const bool plp_ok = c.backend().plp_state() == nand::PlpState::kHealthy;
  const double rate = power.contains("nand_write_bps") ? power["nand_write_bps"].get<double>() : 0;
  const double left_bytes = std::max(0.0, (rel.endurance_cycles - pe_mean)) * raw_bytes;
  json prediction = nullptr;
  if (rate > 1.0) prediction = left_bytes / rate / 86400.0;
  const double temp = power["temperature_c"].get<double>();
  const bool hot = temp >= power["thermal"]["throttle_c"].get<double>() ||
                   power["thermal"]["state"].get<std::string>() == "shutdown";
  const uint32_t critical = (warning ? 1u : 0u) | (hot ? 2u : 0u) | ((degraded || reduced || lost > 0) ? 4u : 0u) |
                            (read_only ? 8u : 0u) | (plp_ok ? 0u : 16u);
  const std::string state = read_only ? "read-only" : reduced ? "reduced-write" : "healthy";
  return json{
      {"state", state},
      {"reserve_percent", reserve},
      {"reserve_warning", warning},
      {"reserve_warn_at_percent", ftl::kReserveWarnPercent},
      {"rated_pb_written", rated_pb},
      {"pb_written", sum.host_write_bytes / 1e15},
      {"endurance_used_percent", pe_used},
      {"endurance_remaining_percent", std::max(0.0, 100.0 - pe_used)},
      {"lifetime", {{"host_read_bytes", sum.host_read_bytes}, {"host_write_bytes", sum.host_write_bytes},
                    {"physical_read_bytes", sum.nand_read_bytes}, {"physical_write_bytes", sum.nand_program_bytes},
                    {"erases", sum.erases}}},
      {"nand_write_bytes_per_s", rate},
      {"lifetime_prediction_days", prediction},
      {"smart", {{"critical_warning", critical},
                 {"available_spare", reserve},
                 {"available_spare_threshold", ftl::kReserveWarnPercent},
                 {"percentage_used", std::min(255.0, pe_used)},
                 {"data_units_read", sum.host_read_bytes / 512000},
                 {"data_units_written", sum.host_write_bytes / 512000},
                 {"media_errors", sum.uncorrectable_reads},
                 {"program_fails", sum.program_fails},
                 {"erase_fails", sum.erase_fails},
                 {"lost_sectors", lost},
                 {"unsafe_shutdowns", unsafe},
                 {"power_cycles", cycles},
                 {"power_on_hours", sum.powered_ns / 3.6e12}}}};
}
}  // namespace

Result<json> Daemon::StatusCmd(const json& req) {
  VSL_ASSIGN_OR_RETURN(bool all, Arg<bool>(req, "all", false));
  card::Card* only = nullptr;  // every card unless one is named
  if (req.contains("card")) {
    VSL_ASSIGN_OR_RETURN(only, CardArg(req));
  }
  json cards = json::array();
  for (std::size_t i = 0; i < cards_.size(); ++i) {
    card::Card& c = *cards_[i];
    if (only != nullptr && only != &c) continue;
    const card::ControllerIdentity id = c.backend().identity(0);
    json cj = {{"index", i},
               {"dir", c.dir()},
               {"serial", id.serial.substr(0, id.serial.rfind('-'))},
               {"model", id.model},
               {"profile", id.profile},
               {"firmware_version", id.firmware_version},
               {"backend", c.backend().kind()},
               {"hardware", id.hardware},
               {"device_cycles", c.backend().device_cycles()},
               {"ecc_mode", c.backend().ecc_mode()},
               {"timing", c.backend().zero_time() ? "none" : "model"},
               {"beacon", bool(beacon_[i])}};
    const json pj = PowerJson(c);
    cj["temperature_c"] = pj["temperature_c"];
    cj["power_w"] = pj["avg_w"];
    cj["power"] = pj;
    json ctrls = json::array();
    for (uint32_t k = 0; k < c.controllers(); ++k) {
      // The block tables belong to the pipes' engines: each counts its own dies.
      const uint32_t ppc = c.geometry().pipes_per_controller;
      std::vector<model::DieCounters> counters(ppc);
      for (uint32_t q = 0; q < ppc; ++q) {
        c.RunOnPipe(k * ppc + q, [&c, &counters, k, q, ppc] { counters[q] = c.backend().PipeCounters(k * ppc + q); });
      }
      const auto h = c.backend().Health(k, counters);
      json hj = {{"index", k},
                 {"serial", h.serial},
                 {"firmware_version", h.firmware_version},
                 {"pipe_mode", std::string(card::PipeModeName(c.pipe_mode(k)))},
                 {"dies", h.dies},
                 {"failed_dies", h.failed_dies},
                 {"plp", std::string(nand::PlpStateName(h.plp))},
                 {"rated_pe_used_percent", h.rated_pe_used_percent},
                 {"power_on_count", h.power_on_count},
                 {"unsafe_power_offs", h.unsafe_power_offs}};
      if (pj.contains("controllers") && k < pj["controllers"].size()) {
        hj["temperature_c"] = pj["controllers"][k]["temperature_c"];
      }
      if (all) {
        hj["blocks"] = h.blocks;
        hj["factory_bad_blocks"] = h.factory_bad_blocks;
        hj["grown_bad_blocks"] = h.grown_bad_blocks;
        hj["erase_count"] = {{"min", h.min_erase_count}, {"max", h.max_erase_count}, {"mean", h.mean_erase_count}};
        hj["image_bytes"] = h.image_bytes;
        hj["image_allocated_bytes"] = h.image_allocated_bytes;
      }
      ctrls.push_back(hj);
    }
    cj["controllers"] = ctrls;
    json luns = json::array();
    for (card::Lun* l : c.luns()) {
      VSL_ASSIGN_OR_RETURN(json lj, LunStatus(c, *l, all));
      luns.push_back(lj);
    }
    cj["luns"] = luns;
    if (const auto& sh = c.options().sharing; sh.host_id != 0) {
      cj["sharing"] = {{"host_id", sh.host_id},
                       {"luns", sh.luns},
                       {"lease_ms", sh.lease_ns / 1e6},
                       {"takeover", sh.auto_takeover ? "auto" : "manual"},
                       {"power_budget_share", c.governor().budget_share()}};
    }
    cj["health"] = CardHealth(c, luns, pj);
    if (cfg_.volume_chunk_kib != 0) {
      auto v = card::CardVolume::Create(c.luns(), cfg_.volume_chunk_kib * 1024);
      if (v.ok()) {
        cj["volume"] = {{"luns", (*v)->lun_count()},
                        {"chunk_bytes", uint64_t{cfg_.volume_chunk_kib} * 1024},
                        {"sector_bytes", (*v)->sector_bytes()},
                        {"sectors", (*v)->sectors()},
                        {"size_bytes", (*v)->sectors() * (*v)->sector_bytes()}};
      } else {
        cj["volume"] = {{"error", std::string(v.status().message())}};
      }
    }
    cards.push_back(cj);
  }
  json r{{"protocol", kProtocolVersion}, {"pid", ::getpid()}, {"cards", cards}};
  {
    std::lock_guard<std::mutex> l(front_mu_);
    if (front_status_) r["front_ends"] = front_status_();
    if (monitor_state_) r["monitor"] = monitor_state_();
  }
  return r;
}

Result<json> Daemon::PowerCmd(const json& req) {
  VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
  card::PowerPolicy p = c->governor().policy();
  VSL_ASSIGN_OR_RETURN(p.override_w, Arg<double>(req, "override_w", p.override_w));
  VSL_ASSIGN_OR_RETURN(p.slot_capability_w, Arg<double>(req, "slot_capability_w", p.slot_capability_w));
  if (vsl::Status s = c->SetPowerPolicy(p); !s.ok()) {
    Logger("vsld")->warn("card {} (serial {}): power change refused: {}", c->dir(), CardSerial(*c), s.message());
    return s;
  }
  return PowerJson(*c);
}

json Daemon::PowerJson(card::Card& c) {
  const card::PowerStatus ps = c.power_status();
  json ctrls = json::array();
  double tnow = -1e9, tmax = -1e9;
  for (uint32_t k = 0; k < ps.controllers.size(); ++k) {
    const auto& cp = ps.controllers[k];
    const auto life = c.backend().lifetime(k);
    tnow = std::max(tnow, cp.temperature_c);
    tmax = std::max({tmax, cp.max_temperature_c, life.max_temperature_c});
    ctrls.push_back({{"controller", k}, {"temperature_c", cp.temperature_c},
                     {"max_temperature_c", std::max(cp.max_temperature_c, life.max_temperature_c)},
                     {"energy_j", cp.energy_j}, {"low_power", cp.low_power}});
  }
  return json{
      {"limit_w", ps.limit_w},
      {"slot_limit_w", ps.policy.slot_limit_w},
      {"slot_capability_w", ps.policy.slot_capability_w},
      {"override", {{"on", ps.override_on}, {"watts", ps.policy.override_w}}},
      {"avg_w", ps.avg_w},
      {"peak_w", ps.peak_w},
      {"window_ms", ps.policy.window_ns / 1e6},
      {"static_w", ps.static_w},
      {"nand_write_bps", ps.nand_write_bps},
      {"full_write_w", ps.full_write_w},
      {"governor", {{"refill_w", ps.refill_w}, {"burst_j", ps.burst_j}, {"reads", ps.governor.reads},
                    {"writes", ps.governor.writes}, {"read_waits", ps.governor.read_waits},
                    {"write_waits", ps.governor.write_waits}, {"write_wait_s", ps.governor.write_wait_ns / 1e9}}},
      {"temperature_c", tnow},
      {"max_temperature_c", tmax},
      {"thermal", {{"state", std::string(card::ThermalStateName(ps.thermal))},
                   {"throttle_c", ps.policy.throttle_c}, {"shutdown_c", ps.policy.shutdown_c},
                   {"resume_c", ps.policy.resume_c}, {"write_share", ps.write_share},
                   {"throttle_events", ps.throttle_events}, {"shutdowns", ps.thermal_shutdowns},
                   {"throttled_s", ps.throttled_ns / 1e9}}},
      {"environment", {{"ambient_c", ps.environment.ambient_c}, {"airflow_lfm", ps.environment.airflow_lfm}}},
      {"controllers", ctrls}};
}

Result<json> Daemon::SureErase(card::Card& c, uint32_t controller) {
  if (controller >= c.controllers()) {
    return vsl::Status::InvalidArgument(fmt::format("the card has no controller {}", controller));
  }
  json out = json::array();
  for (card::Lun* l : c.luns()) {
    if (l->controller() != controller) continue;
    VSL_RETURN_IF_ERROR(l->Call([l](card::Lun::Done d) { l->Detach(std::move(d)); }));
  }
  for (card::Lun* l : c.luns()) {
    if (l->controller() != controller) continue;
    card::Lun::EraseReport rep;
    vsl::Status s = l->Call([l, &rep](card::Lun::Done d) {
      l->SureErase([d = std::move(d), &rep](vsl::Status st, card::Lun::EraseReport r) mutable {
        rep = r;
        d(st);
      });
    });
    out.push_back({{"lun", l->name()}, {"blocks", rep.blocks}, {"erased_and_verified", rep.erased},
                   {"bad", rep.bad}, {"not_blank", rep.not_blank}});
    VSL_RETURN_IF_ERROR(s);
  }
  return json{{"luns", out}};
}

namespace {
// The LUNs of `c` on any of `controllers`.
std::vector<card::Lun*> LunsOf(card::Card& c, const std::vector<uint32_t>& controllers) {
  std::vector<card::Lun*> out;
  for (card::Lun* l : c.luns()) {
    if (std::find(controllers.begin(), controllers.end(), l->controller()) != controllers.end()) out.push_back(l);
  }
  return out;
}
}  // namespace

vsl::Status Daemon::RefuseInUse(const json& req, const card::Card& c, const std::vector<card::Lun*>& luns) {
  VSL_ASSIGN_OR_RETURN(bool force, Arg<bool>(req, "force", false));
  std::lock_guard<std::mutex> l(front_mu_);
  if (force || !in_use_) return vsl::Status::Ok();
  std::size_t k = 0;
  while (k < cards_.size() && cards_[k].get() != &c) ++k;
  for (const card::Lun* lun : luns) {
    if (std::string why = in_use_(k, *lun); !why.empty()) {
      return vsl::Status::Busy(fmt::format("{} is in use: {}; unmount it first (or force)", lun->name(), why));
    }
  }
  return vsl::Status::Ok();
}

Result<json> Daemon::Dispatch(const json& req) {
  VSL_ASSIGN_OR_RETURN(std::string cmd, Arg<std::string>(req, "cmd", ""));
  if (cmd == "version") {
    return json{{"protocol", kProtocolVersion}, {"daemon", "vsld (OpenVSL)"}};
  }
  if (cmd == "status") return StatusCmd(req);
  if (cmd == "history") {
    std::function<Result<json>(const json&)> h;
    {
      std::lock_guard<std::mutex> l(front_mu_);
      h = monitor_history_;
    }
    if (!h) return vsl::Status::FailedPrecondition("this vsld keeps no history (the monitor is off: --monitor-interval 0)");
    return h(req);
  }
  if (cmd == "power") return PowerCmd(req);
  if (cmd == "environment") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    model::Environment env = c->backend().environment();
    VSL_ASSIGN_OR_RETURN(env.ambient_c, Arg<double>(req, "ambient_c", env.ambient_c));
    VSL_ASSIGN_OR_RETURN(env.airflow_lfm, Arg<double>(req, "airflow_lfm", env.airflow_lfm));
    if (!(env.ambient_c > -40 && env.ambient_c < 150) || !(env.airflow_lfm >= 0 && env.airflow_lfm < 10000)) {
      return vsl::Status::InvalidArgument("ambient_c must be in (-40, 150) and airflow_lfm in [0, 10000)");
    }
    VSL_RETURN_IF_ERROR(c->backend().SetEnvironment(env));
    Logger("vsld")->warn("card {}: simulated environment now {:.1f} C ambient, {:.0f} LFM", c->dir(), env.ambient_c,
                         env.airflow_lfm);
    return PowerJson(*c);
  }
  if (cmd == "attach" || cmd == "detach" || cmd == "reset") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(auto luns, LunsArg(req, *c));
    if (cmd != "attach") VSL_RETURN_IF_ERROR(RefuseInUse(req, *c, luns));
    json done = json::array();
    for (card::Lun* l : luns) {
      vsl::Status s = l->Call([l, &cmd](card::Lun::Done d) {
        if (cmd == "attach") return l->Attach(std::move(d));
        if (cmd == "detach") return l->Detach(std::move(d));
        if (l->state() != card::LunState::kOnline) {
          return d(vsl::Status::FailedPrecondition(fmt::format("{} is not online", l->name())));
        }
        l->Reset(std::move(d));
      });
      if (!s.ok() && !(cmd == "attach" && s.code() == StatusCode::kNotFound && luns.size() > 1)) {
        return s.WithContext(l->name());
      }
      done.push_back({{"lun", l->name()}, {"state", std::string(card::LunStateName(l->state()))}});
    }
    return json{{"luns", done}};
  }
  if (cmd == "takeover" || cmd == "release") {
    // Shared cards (docs/ha.md): take a LUN over from another host (fencing it), or hand
    // one over (checkpoint, release).
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    if (c->options().sharing.host_id == 0) {
      return vsl::Status::FailedPrecondition(fmt::format("card {} is not shared: vsld runs without --host-id", c->dir()));
    }
    VSL_ASSIGN_OR_RETURN(auto luns, LunsArg(req, *c));
    VSL_ASSIGN_OR_RETURN(bool force, Arg<bool>(req, "force", false));
    if (cmd == "release") VSL_RETURN_IF_ERROR(RefuseInUse(req, *c, luns));
    json done = json::array();
    for (card::Lun* l : luns) {
      const auto t0 = std::chrono::steady_clock::now();
      vsl::Status s = l->Call([l, &cmd, force](card::Lun::Done d) {
        if (cmd == "takeover") return l->Takeover(force, std::move(d));
        l->Release(std::move(d));
      });
      if (!s.ok()) return s.WithContext(l->name());
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      json e = {{"lun", l->name()}, {"state", std::string(card::LunStateName(l->state()))}, {"ms", ms}};
      if (cmd == "takeover") {
        VSL_RETURN_IF_ERROR(l->Call([l, &e](card::Lun::Done d) {
          if (l->ftl() != nullptr) {
            const auto& ai = l->ftl()->attach_info();
            e["attach"] = {{"from_checkpoint", ai.from_checkpoint}, {"lebs_scanned", ai.lebs_scanned},
                           {"ms", ai.attach_ns / 1e6}};
          }
          d(vsl::Status::Ok());
        }));
      }
      done.push_back(e);
    }
    return json{{"luns", done}};
  }
  if (cmd == "fail-die") {
    // A die of the LUN's pipe dies through the backend's fault path, on the pipe's engine.
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(int64_t li, Arg<int64_t>(req, "lun", -1));
    VSL_ASSIGN_OR_RETURN(int64_t die, Arg<int64_t>(req, "die", -1));
    card::Lun* l = li >= 0 ? c->lun(static_cast<uint32_t>(li)) : nullptr;
    if (l == nullptr) return vsl::Status::InvalidArgument(fmt::format("the card has no LUN {}", li));
    const uint32_t dpp = c->geometry().dies_per_pipe();
    if (die < 0 || static_cast<uint64_t>(die) >= dpp * l->pipes().size()) {
      return vsl::Status::InvalidArgument(fmt::format("{} has dies 0-{}", l->name(), dpp * l->pipes().size() - 1));
    }
    const uint32_t pipe = l->pipes()[static_cast<uint32_t>(die) / dpp];
    vsl::Status s = vsl::Status::Ok();
    c->RunOnPipe(pipe, [&] { s = c->backend().InjectDieFailure(pipe, static_cast<uint32_t>(die) % dpp); });
    VSL_RETURN_IF_ERROR(s);
    Logger("vsld")->warn("card {}: {} die {} failed by request (fault injection)", c->dir(), l->name(), die);
    return json{{"lun", l->name()}, {"die", die}, {"pipe", pipe}};
  }
  if (cmd == "format") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(int64_t ctrl, Arg<int64_t>(req, "controller", -1));
    VSL_ASSIGN_OR_RETURN(std::string mode_s, Arg<std::string>(req, "mode", "dual"));
    VSL_ASSIGN_OR_RETURN(card::PipeMode mode, card::ParsePipeMode(mode_s));
    ftl::FormatOptions fo;
    VSL_ASSIGN_OR_RETURN(int64_t sb, Arg<int64_t>(req, "sector_bytes", 4096));
    if (sb != 512 && sb != 4096) {
      return vsl::Status::InvalidArgument(fmt::format("sector size {} B: 512 or 4096", sb));
    }
    fo.sector_bytes = static_cast<uint32_t>(sb);
    VSL_ASSIGN_OR_RETURN(std::string reserve, Arg<std::string>(req, "reserve", "stock"));
    VSL_ASSIGN_OR_RETURN(fo.reserve, ParseReserve(reserve));
    VSL_ASSIGN_OR_RETURN(fo.spare_percent, Arg<double>(req, "spare_percent", fo.spare_percent));
    VSL_ASSIGN_OR_RETURN(fo.flashback, Arg<bool>(req, "flashback", true));
    std::vector<uint32_t> ctrls;
    if (ctrl < 0) {
      for (uint32_t k = 0; k < c->controllers(); ++k) ctrls.push_back(k);
    } else {
      ctrls.push_back(static_cast<uint32_t>(ctrl));
    }
    VSL_RETURN_IF_ERROR(RefuseInUse(req, *c, LunsOf(*c, ctrls)));
    VSL_ASSIGN_OR_RETURN(bool attach, Arg<bool>(req, "attach", true));
    vsl::Status formatted = vsl::Status::Ok();
    for (uint32_t k : ctrls) {
      formatted = c->FormatController(k, mode, fo);
      if (!formatted.ok()) break;
    }
    if (formatted.ok() && attach) formatted = c->AttachAll();
    {
      // Even after a failure part of the card may have been reformatted.
      std::lock_guard<std::mutex> l(front_mu_);
      if (formatted_) formatted_();
    }
    VSL_RETURN_IF_ERROR(formatted);
    json luns = json::array();
    for (card::Lun* l : c->luns()) {
      luns.push_back({{"lun", l->name()}, {"state", std::string(card::LunStateName(l->state()))}});
    }
    return json{{"luns", luns}};
  }
  if (cmd == "sure-erase") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(int64_t ctrl, Arg<int64_t>(req, "controller", -1));
    if (ctrl < 0) return vsl::Status::InvalidArgument("sure-erase needs a controller");
    VSL_RETURN_IF_ERROR(RefuseInUse(req, *c, LunsOf(*c, {static_cast<uint32_t>(ctrl)})));
    return SureErase(*c, static_cast<uint32_t>(ctrl));
  }
  if (cmd == "beacon") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(bool on, Arg<bool>(req, "on", true));
    std::size_t i = 0;
    while (cards_[i].get() != c) ++i;
    beacon_[i] = on;
    Logger("vsld")->warn("card {}: beacon {} (the simulated card has no LED: status shows it)", c->dir(),
                         on ? "on" : "off");
    return json{{"beacon", on}};
  }
  if (cmd == "update") {
    VSL_ASSIGN_OR_RETURN(card::Card * c, CardArg(req));
    VSL_ASSIGN_OR_RETURN(std::string path, Arg<std::string>(req, "path", ""));
    VSL_ASSIGN_OR_RETURN(int64_t ctrl, Arg<int64_t>(req, "controller", -1));
    if (path.empty()) return vsl::Status::InvalidArgument("update needs the firmware image's path");
    if (ctrl >= static_cast<int64_t>(c->controllers())) {
      return vsl::Status::InvalidArgument(fmt::format("the card has no controller {}", ctrl));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return vsl::Status::NotFound(fmt::format("cannot read firmware image {}", path));
    std::vector<uint8_t> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (image.size() > (64u << 20)) return vsl::Status::InvalidArgument("firmware image over 64 MiB");
    json done = json::array();
    for (uint32_t k = 0; k < c->controllers(); ++k) {
      if (ctrl >= 0 && k != static_cast<uint32_t>(ctrl)) continue;
      const std::string before = c->backend().identity(k).firmware_version;
      VSL_RETURN_IF_ERROR(c->backend().UpdateFirmware(k, image).WithContext(fmt::format("controller {}", k)));
      done.push_back({{"controller", k}, {"from", before}, {"to", c->backend().identity(k).firmware_version}});
    }
    return json{{"controllers", done}};
  }
  if (cmd.empty()) return vsl::Status::InvalidArgument("the request has no 'cmd'");
  return vsl::Status::InvalidArgument(fmt::format("unknown command '{}'", cmd));
}

// ---- control socket ----

Result<std::unique_ptr<ControlServer>> ControlServer::Start(Daemon& d, const std::string& path, uint32_t mode) {
  auto s = std::unique_ptr<ControlServer>(new ControlServer());
  s->daemon_ = &d;
  auto fd = ListenUnix(path, mode, "vsld");
  if (!fd.ok()) return fd.status();
  s->listen_fd_ = *fd;
  s->path_ = path;  // only now ours to remove (a refused start must not unlink a live socket)
  if (::pipe2(s->wake_, O_CLOEXEC) != 0) return vsl::Status::IOError("pipe");
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  Logger("vsld")->info("control socket {} (mode {:o})", path, mode);
  return s;
}

ControlServer::~ControlServer() {
  if (wake_[1] >= 0) {
    const char c = 'x';
    (void)!::write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
  if (!path_.empty()) ::unlink(path_.c_str());
}

void ControlServer::Run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Serve(fd);
      ::close(fd);
    }
  }
}

// One client at a time: requests are short and serialized anyway. A client that sends
// nothing for 10 s, or an over-long line, is disconnected.
void ControlServer::Serve(int fd) {
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string buf;
  char chunk[4096];
  for (;;) {
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string reply = daemon_->Handle(std::string_view(buf).substr(0, nl)) + "\n";
      buf.erase(0, nl + 1);
      std::size_t off = 0;
      while (off < reply.size()) {
        const ssize_t w = ::send(fd, reply.data() + off, reply.size() - off, MSG_NOSIGNAL);
        if (w <= 0) return;
        off += static_cast<std::size_t>(w);
      }
    }
    if (buf.size() > kMaxRequestBytes) {
      const std::string reply =
          ErrorReply(vsl::Status::InvalidArgument(fmt::format("request longer than {} bytes", kMaxRequestBytes)))
              .dump() +
          "\n";
      (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      return;
    }
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace vsl::daemon
