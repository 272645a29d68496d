// vslctl: manage OpenVSL cards through vsld (and make simulated cards).
//
//   vslctl status [-a]                       cards, controllers, LUNs, health
//   vslctl attach|detach [--lun N]           one LUN or all
//   vslctl reset --lun N                     drop a LUN's host state and recover it
//   vslctl format [--controller N] [--mode dual|single] [--sector-size 512|4096]
//                 [--reserve stock|high-performance|custom|under-provision]
//                 [--spare-percent P] [--no-flashback] [--yes]
//   vslctl sure-erase --controller N [--yes] erase and verify every block
//   vslctl beacon on|off                     identify the card
//   vslctl update IMAGE [--controller N] [--yes]   load controller firmware
//   vslctl create-card SPEC [--profile P] [--blocks N] [--seed S]  (no vsld needed; SPEC: DIR,
//                      sim:DIR, rtl:DIR, kernel:DIR, xrt:N)
//   vslctl fail-die --lun N --die D          (test hook: a die dies through the fault path)
//   vslctl make-firmware OUT --version V --model M [--payload F]   (no vsld needed)
// Every command takes --json (machine-readable output), --socket PATH, --card N.
//
// Exit codes: 0 done; 1 the card or vsld refused or failed the operation; 2 bad usage;
// 3 vsld not reachable; 4 declined at the confirmation prompt.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <ctime>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vsl/hw/xrt_port.h"
#include "vsl/simcard/firmware.h"
#include "vsl/backend/open.h"
#include "vsl/simcard/sim_card.h"

namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitNoDaemon = 3, kExitDeclined = 4;

struct Global {
  std::string socket = "/run/vsld.sock";
  bool json_out = false;
  int card = -1;  // not given: every card for status, card 0 otherwise
};

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

// Sends one request and returns the reply; exits with kExitNoDaemon if vsld cannot be
// reached.
json Request(const Global& g, json req) {
  req["v"] = 1;
  if (!req.contains("card") && g.card >= 0) req["card"] = g.card;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", g.socket.c_str());
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr,
                 "vslctl: cannot reach vsld at %s (%s). Is vsld running (systemctl status vsld), and "
                 "may you open its socket (root by default)?\n",
                 g.socket.c_str(), std::strerror(errno));
    std::exit(kExitNoDaemon);
  }
  const std::string line = req.dump() + "\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    std::fprintf(stderr, "vslctl: vsld closed the connection\n");
    std::exit(kExitNoDaemon);
  }
  std::string buf;
  char chunk[65536];
  while (buf.find('\n') == std::string::npos) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      std::fprintf(stderr, "vslctl: vsld closed the connection before replying\n");
      std::exit(kExitNoDaemon);
    }
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  try {
    return json::parse(buf.substr(0, buf.find('\n')));
  } catch (const json::exception&) {
    std::fprintf(stderr, "vslctl: vsld sent a reply that is not JSON\n");
    std::exit(kExitFailed);
  }
}

// Prints an error reply in words and returns the exit code; kExitOk for success.
int Check(const Global& g, const json& reply) {
  if (reply.value("ok", false)) return kExitOk;
  const json err = reply.value("error", json::object());
  if (g.json_out) {
    std::cout << reply.dump(2) << "\n";
  } else {
    std::fprintf(stderr, "vslctl: %s: %s\n", err.value("code", std::string("Error")).c_str(),
                 err.value("message", std::string("(no message)")).c_str());
  }
  const std::string code = err.value("code", std::string());
  return code == "InvalidArgument" || code == "NotSupported" ? kExitUsage : kExitFailed;
}

bool Confirm(const std::string& what, bool yes) {
  if (yes) return true;
  std::fprintf(stderr, "%s\nType 'yes' to go on: ", what.c_str());
  std::string answer;
  if (!std::getline(std::cin, answer) || answer != "yes") {
    std::fprintf(stderr, "vslctl: not done\n");
    return false;
  }
  return true;
}

void PrintPower(const json& p) {
  const auto& th = p["thermal"];
  std::cout << fmt::format(
      "  Temperature: {:.1f} C (max {:.1f} C); thermal {} (throttle writes at {:.0f} C, shut down at {:.0f} C){}\n",
      p["temperature_c"].get<double>(), p["max_temperature_c"].get<double>(), th["state"].get<std::string>(),
      th["throttle_c"].get<double>(), th["shutdown_c"].get<double>(),
      th["state"].get<std::string>() == "throttling"
          ? fmt::format(": writes at {:.0f}% of full power", 100 * th["write_share"].get<double>())
          : std::string());
  std::cout << fmt::format("  PCIe power: {:.2f} W average, {:.2f} W peak ({:.0f} ms window); limit {:.2f} W; "
                           "power override {}\n",
                           p["avg_w"].get<double>(), p["peak_w"].get<double>(), p["window_ms"].get<double>(),
                           p["limit_w"].get<double>(),
                           p["override"]["on"].get<bool>()
                               ? fmt::format("ON ({:.2f} W; slot declared {:.2f} W)", p["override"]["watts"].get<double>(),
                                             p["slot_capability_w"].get<double>())
                               : fmt::format("off (slot limit {:.2f} W)", p["slot_limit_w"].get<double>()));
  if (th["shutdowns"].get<uint64_t>() > 0 || th["throttle_events"].get<uint64_t>() > 0) {
    std::cout << fmt::format("  Thermal events: {} throttle(s) ({:.1f} s throttled), {} shutdown(s)\n",
                             th["throttle_events"].get<uint64_t>(), th["throttled_s"].get<double>(),
                             th["shutdowns"].get<uint64_t>());
  }
}

void PrintHealth(const json& h) {
  const auto& lt = h["lifetime"];
  const auto& sm = h["smart"];
  std::cout << fmt::format("  Health: {}; reserve space {:.2f}% (warning at {:.0f}%){}\n", h["state"].get<std::string>(),
                           h["reserve_percent"].get<double>(), h["reserve_warn_at_percent"].get<double>(),
                           h["reserve_warning"].get<bool>() ? " -- RESERVE LOW" : "");
  std::cout << fmt::format("  Endurance: rated {:.2f} PB written, {:.4f} PB written, {:.2f}% remaining; lifetime {}\n",
                           h["rated_pb_written"].get<double>(), h["pb_written"].get<double>(),
                           h["endurance_remaining_percent"].get<double>(),
                           h["lifetime_prediction_days"].is_null()
                               ? std::string("prediction: no recent writes")
                               : fmt::format("prediction {:.0f} days at the recent write rate",
                                             h["lifetime_prediction_days"].get<double>()));
  std::cout << fmt::format("  Lifetime: host read {}, host written {}; physical read {}, physical written {}\n",
                           Bytes(lt["host_read_bytes"].get<uint64_t>()), Bytes(lt["host_write_bytes"].get<uint64_t>()),
                           Bytes(lt["physical_read_bytes"].get<uint64_t>()),
                           Bytes(lt["physical_write_bytes"].get<uint64_t>()));
  std::cout << fmt::format("  SMART: critical warning 0x{:02x}, available spare {:.0f}%, {:.2f}% used, media errors {}, "
                           "unsafe shutdowns {}, power cycles {}, {:.2f} power-on hours\n",
                           sm["critical_warning"].get<uint32_t>(), sm["available_spare"].get<double>(),
                           sm["percentage_used"].get<double>(), sm["media_errors"].get<uint64_t>(),
                           sm["unsafe_shutdowns"].get<uint64_t>(), sm["power_cycles"].get<uint64_t>(),
                           sm["power_on_hours"].get<double>());
}

// The monitor's alerts (docs/monitoring.md), worst first; nothing when vsld runs no monitor.
void PrintAlerts(const json& r) {
  if (!r.contains("monitor")) return;
  const json& m = r["monitor"];
  std::vector<json> alerts(m["alerts"].begin(), m["alerts"].end());
  auto rank = [](const json& a) {
    const std::string s = a.value("severity", "");
    return s == "critical" ? 0 : s == "warning" ? 1 : 2;
  };
  std::stable_sort(alerts.begin(), alerts.end(), [&](const json& a, const json& b) { return rank(a) < rank(b); });
  if (alerts.empty()) {
    std::cout << "Alerts: none\n";
    return;
  }
  std::cout << fmt::format("Alerts: {} raised\n", alerts.size());
  for (const json& a : alerts) {
    std::cout << fmt::format("  ALERT {} {}: {}\n", a.value("severity", ""), a.value("name", ""), a.value("message", ""));
  }
}

// `vslctl monitor`: a live view like top, from status every `interval` s: alerts, each
// card's temperature, power and wear, each LUN's rates over the last interval.
int Monitor(const Global& g, double interval, int count) {
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  std::map<std::string, json> prev;
  double prev_t = 0;
  for (int frame = 0; count <= 0 || frame < count; ++frame) {
    if (frame > 0) ::usleep(static_cast<useconds_t>(interval * 1e6));
    json reply = Request(g, {{"cmd", "status"}});
    if (int rc = Check(g, reply); rc != kExitOk) return rc;
    const json& r = reply["result"];
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double now = static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
    const double dt = prev_t > 0 ? now - prev_t : 0;
    prev_t = now;
    std::string out = tty ? "\033[H\033[2J" : (frame > 0 ? "\n" : "");
    const std::time_t wall = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&wall));
    out += fmt::format("vslctl monitor: vsld pid {}, {} card(s), {}; every {:.1f} s (Ctrl-C to stop)\n",
                       r.value("pid", 0), r["cards"].size(), when, interval);
    std::ostringstream alerts;
    auto* old = std::cout.rdbuf(alerts.rdbuf());
    PrintAlerts(r);
    std::cout.rdbuf(old);
    out += alerts.str();
    for (const json& c : r["cards"]) {
      const json& p = c["power"];
      const json& h = c["health"];
      const json pred = [&] {
        if (!r.contains("monitor")) return json();
        for (const json& x : r["monitor"]["predictions"]) {
          if (x.value("card", -1) == c.value("index", -2)) return x;
        }
        return json();
      }();
      std::string life = "no wear to extrapolate";
      if (pred.is_object() && pred["days"].is_number()) life = fmt::format("{:.0f} days", pred["days"].get<double>());
      out += fmt::format(
          "\nCard {} {} {}: {}, {:.1f} C ({}; throttle {:.0f} C), {:.2f} W of {:.2f} W{}, reserve {:.1f}%, "
          "endurance left {:.3f}% (end of life in {})\n",
          c.value("index", 0), c.value("model", ""), c.value("serial", ""), h.value("state", ""),
          c.value("temperature_c", 0.0), p["thermal"].value("state", ""), p["thermal"].value("throttle_c", 0.0),
          p.value("avg_w", 0.0), p.value("limit_w", 0.0), p["override"].value("on", false) ? " (override)" : "",
          h.value("reserve_percent", 0.0), 100 - h.value("endurance_used_percent", 0.0), life);
      out += fmt::format("  {:<6} {:<12} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>6} {:>5} {}\n", "LUN", "state",
                         "read MB/s", "write MB/s", "read IOPS", "wr IOPS", "read lat", "write lat", "WAF", "free",
                         "FlashBack");
      for (const json& l : c["luns"]) {
        const std::string key = fmt::format("{}/{}", c.value("index", 0), l.value("name", ""));
        std::string cols = fmt::format("{:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>6} {:>5}", "-", "-", "-", "-", "-",
                                       "-", "-", "-");
        std::string fbs = "-";
        if (l.contains("io")) {
          const json& io = l["io"];
          const json& sa = l["since_attach"];
          auto d = [&](const json& cur, const json* before, const char* k) {
            const double a = cur.value(k, 0.0), b = before ? before->value(k, 0.0) : a;
            return a >= b ? a - b : a;
          };
          const json* pv = prev.count(key) ? &prev[key] : nullptr;
          auto lat = [&](const char* which) {
            const json& cur = io[which];
            const json* b = pv ? &(*pv)["io"][which] : nullptr;
            const double n = d(cur, b, "count");
            return n > 0 ? fmt::format("{:.0f} us", 1e6 * d(cur, b, "sum_s") / n) : std::string("-");
          };
          if (pv != nullptr && dt > 0) {
            cols = fmt::format("{:>10.1f} {:>10.1f} {:>9.0f} {:>9.0f} {:>10} {:>10} {:>6.2f} {:>5}",
                               d(sa, &(*pv)["since_attach"], "host_read_bytes") / dt / 1e6,
                               d(sa, &(*pv)["since_attach"], "host_write_bytes") / dt / 1e6,
                               d(io, &(*pv)["io"], "reads") / dt, d(io, &(*pv)["io"], "writes") / dt, lat("read_latency"),
                               lat("write_latency"), sa.value("waf", 0.0), l["reserve"].value("free_lebs", 0));
          }
          const json& fb = l["flashback"];
          fbs = !fb.value("enabled", false) ? "off"
                : fb.value("substitution_active", false)
                    ? fmt::format("{} die(s) substituted, {} LEB(s) to rebuild", fb["failed_dies"].size(),
                                  fb.value("rebuild_lebs_left", 0))
                    : "protected";
          prev[key] = l;
        }
        out += fmt::format("  {:<6} {:<12} {} {}\n", l.value("name", ""), l.value("state", ""), cols, fbs);
      }
    }
    std::cout << out << std::flush;
  }
  return kExitOk;
}

void PrintStatus(const json& r, bool all) {
  const auto& cards = r["cards"];
  std::cout << fmt::format("vsld (pid {}) serves {} card(s)\n", r.value("pid", 0), cards.size());
  if (r.contains("front_ends")) {
    const auto& f = r["front_ends"];
    if (f.contains("nbd")) {
      const auto& n = f["nbd"];
      std::string where = n.value("socket", "");
      if (!n.value("tcp", "").empty()) where += fmt::format("{}tcp port {}", where.empty() ? "" : ", ", n.value("tcp_port", 0));
      std::cout << fmt::format("Block devices: NBD on {} (TLS {}{}{}), {} connection(s)\n", where, n.value("tls", ""),
                               n.value("read_only", false) ? ", read-only" : "",
                               n.value("write_through", false) ? ", write-through" : "", n.value("connections", 0));
    }
    if (f.contains("ublk")) {
      const auto& u = f["ublk"];
      std::string devs;
      for (const auto& d : u["devices"]) devs += fmt::format(" {}={}", d.value("export", ""), d.value("device", ""));
      std::cout << fmt::format("               ublk: {}{}\n", u.value("state", ""), devs);
    }
    if (f.contains("sdk")) {
      const auto& k = f["sdk"];
      std::cout << fmt::format("SDK: attach on {}, {} application(s)\n", k.value("socket", ""),
                               k.value("applications", 0));
    }
  }
  PrintAlerts(r);
  for (const auto& c : cards) {
    std::cout << fmt::format("\nCard {}: OpenVSL {} ({}), serial {}, firmware {}\n", c["index"].get<int>(),
                             c.value("model", ""), c.value("profile", ""), c.value("serial", ""),
                             c.value("firmware_version", ""));
    std::cout << fmt::format("  Directory: {}\n", c.value("dir", ""));
    if (c.contains("hardware")) {
      std::cout << fmt::format("  Hardware: {} backend: {}\n", c.value("backend", ""), c.value("hardware", ""));
      if (c.value("device_cycles", uint64_t{0}) > 0) {
        std::cout << fmt::format("  Co-simulated: {} controller clock cycles\n", c.value("device_cycles", uint64_t{0}));
      }
    }
    std::cout << fmt::format("  Beacon: {}\n", c.value("beacon", false) ? "ON" : "off");
    if (c.contains("power")) PrintPower(c["power"]);
    if (c.contains("health")) PrintHealth(c["health"]);
    for (const auto& k : c["controllers"]) {
      std::cout << fmt::format(
          "  Controller {} ({}): {}-pipe mode, {} dies ({} failed), PLP {}, {:.2f}% of rated P/E used, "
          "powered on {} time(s) ({} unsafe)\n",
          k["index"].get<int>(), k.value("serial", ""), k.value("pipe_mode", ""), k.value("dies", 0),
          k.value("failed_dies", 0), k.value("plp", ""), k.value("rated_pe_used_percent", 0.0),
          k.value("power_on_count", 0), k.value("unsafe_power_offs", 0));
      if (all && k.contains("blocks")) {
        std::cout << fmt::format("    blocks {}, factory bad {}, grown bad {}, erase count {}..{} (mean {:.1f})\n",
                                 k["blocks"].get<uint64_t>(), k["factory_bad_blocks"].get<uint64_t>(),
                                 k["grown_bad_blocks"].get<uint64_t>(), k["erase_count"]["min"].get<uint32_t>(),
                                 k["erase_count"]["max"].get<uint32_t>(), k["erase_count"]["mean"].get<double>());
      }
    }
    if (c.contains("volume")) {
      const auto& v = c["volume"];
      if (v.contains("error")) {
        std::cout << fmt::format("  Card volume: not available ({})\n", v["error"].get<std::string>());
      } else {
        std::cout << fmt::format("  Card volume: {} over {} LUNs in {} KiB chunks ({} x {} B sectors)\n",
                                 Bytes(v["size_bytes"].get<uint64_t>()), v["luns"].get<uint32_t>(),
                                 v["chunk_bytes"].get<uint64_t>() / 1024, v["sectors"].get<uint64_t>(),
                                 v["sector_bytes"].get<uint32_t>());
      }
    }
    for (const auto& l : c["luns"]) {
      std::string line = fmt::format("  {}: {}", l.value("name", ""), l.value("state", ""));
      if (l.contains("sectors")) {
        line += fmt::format(", {} ({} x {} B sectors), health {}, {} free LEBs, {} in use",
                            Bytes(l["size_bytes"].get<uint64_t>()), l["sectors"].get<uint64_t>(),
                            l["sector_bytes"].get<uint32_t>(),
                            fmt::format("{} (reserve {:.1f}%)", l.value("health", ""), l["reserve"]["percent"].get<double>()),
                            l["reserve"]["free_lebs"].get<uint32_t>(), Bytes(l["mapped_bytes"].get<uint64_t>()));
      }
      if (l.contains("error")) line += fmt::format(" ({})", l["error"].get<std::string>());
      if (l.contains("owner")) {
        const auto& o = l["owner"];
        const double left = o.value("lease_left_ms", 0.0);
        line += o.value("host", 0u) == 0
                    ? std::string(" [owner: none]")
                    : fmt::format(" [owner: host {}{}, generation {}, lease {}]", o.value("host", 0u),
                                  o.value("this_host", false) ? " (this host)" : "", o.value("generation", 0u),
                                  left < 0 ? std::string("never runs out") : fmt::format("{:.1f} s left", left / 1e3));
      }
      std::cout << line << "\n";
      if (!l.contains("sectors")) continue;
      const auto& fb = l["flashback"];
      std::cout << fmt::format("    FlashBack: {}{}; host RAM {}\n", fb.value("enabled", false) ? "on" : "off",
                               fb.value("substitution_active", false)
                                   ? fmt::format(", SUBSTITUTION ACTIVE (failed dies {}, {} LEB(s) to rebuild, "
                                                 "{} sector(s) lost)",
                                                 fb["failed_dies"].dump(), fb.value("rebuild_lebs_left", 0),
                                                 fb.value("lost_sectors", 0))
                                   : "",
                               Bytes(l.value("host_ram_bytes", uint64_t{0})));
      const auto& sa = l["since_attach"];
      std::cout << fmt::format("    Since attach: read {}, written {} (physical {}, WAF {:.2f})\n",
                               Bytes(sa.value("host_read_bytes", uint64_t{0})),
                               Bytes(sa.value("host_write_bytes", uint64_t{0})),
                               Bytes(sa.value("physical_write_bytes", uint64_t{0})), sa.value("waf", 0.0));
      if (all && fb.contains("events")) {
        for (const auto& e : fb["events"]) std::cout << "    event: " << e.get<std::string>() << "\n";
      }
    }
  }
}

int Simple(const Global& g, json req, const char* verb) {
  json reply = Request(g, std::move(req));
  if (int rc = Check(g, reply); rc != kExitOk) return rc;
  if (g.json_out) {
    std::cout << reply["result"].dump(2) << "\n";
  } else if (reply["result"].contains("luns")) {
    for (const auto& l : reply["result"]["luns"]) {
      std::cout << fmt::format("{}: {}\n", l.value("lun", ""), l.contains("state") ? l["state"].get<std::string>() : verb);
    }
  } else {
    std::cout << verb << "\n";
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vslctl: manage OpenVSL cards through vsld"};
  app.require_subcommand(1);
  app.fallthrough();  // --json, --socket and --card also after the subcommand
  Global g;
  app.add_option("--socket", g.socket, "vsld's control socket")->envname("VSLD_SOCKET");
  app.add_flag("--json", g.json_out, "machine-readable output");
  app.add_option("--card", g.card, "card index (default: all for status, else 0)");

  bool all = false;
  auto* status = app.add_subcommand("status", "cards, controllers, LUNs and their health");
  status->add_flag("-a,--all", all, "everything (blocks, wear, events)");

  int lun = -1;
  bool force = false;
  const char* kForceHelp = "even if the LUN's block device is mounted or open (its users then see I/O errors)";
  auto* attach = app.add_subcommand("attach", "attach a LUN (or all)");
  attach->add_option("--lun", lun, "LUN index");
  auto* detach = app.add_subcommand("detach", "detach a LUN (or all): flush and checkpoint");
  detach->add_option("--lun", lun, "LUN index");
  detach->add_flag("--force", force, kForceHelp);
  auto* reset = app.add_subcommand("reset", "drop a LUN's host state and recover it from flash");
  reset->add_option("--lun", lun, "LUN index")->required();
  reset->add_flag("--force", force, kForceHelp);

  auto* takeover = app.add_subcommand("takeover",
                                      "shared card (docs/ha.md): claim a LUN from another host (fencing it) and "
                                      "attach it from flash");
  takeover->add_option("--lun", lun, "LUN index")->required();
  bool force_claim = false;
  takeover->add_flag("--force", force_claim, "even while the other host's lease runs (it is fenced at once)");
  auto* release = app.add_subcommand("release",
                                     "shared card: detach a LUN (checkpoint) and give it up, for another host to "
                                     "attach from the checkpoint");
  release->add_option("--lun", lun, "LUN index")->required();
  release->add_flag("--force", force, kForceHelp);

  uint32_t die = 0;
  auto* faildie = app.add_subcommand("fail-die",
                                     "kill a die of a LUN through the card's fault path (test hook: FlashBack remaps "
                                     "and rebuilds)");
  faildie->add_option("--lun", lun, "LUN index")->required();
  faildie->add_option("--die", die, "die of the LUN's pipe (0-based)")->required();

  int controller = -1;
  std::string mode = "dual", reserve = "stock";
  uint32_t sector_size = 4096;
  double spare = 28.0;
  bool no_flashback = false, yes = false;
  auto* format = app.add_subcommand("format", "format a controller's LUNs (all data is lost)");
  format->add_option("--controller", controller, "controller (default: all)");
  format->add_option("--mode", mode, "dual (a LUN per pipe) or single (one LUN per controller)");
  format->add_option("--sector-size", sector_size, "512 or 4096");
  format->add_option("--reserve", reserve, "stock, high-performance, custom, under-provision");
  format->add_option("--spare-percent", spare, "spare for custom and under-provision");
  format->add_flag("--no-flashback", no_flashback, "no parity across dies (more capacity, no die-failure protection)");
  format->add_flag("-y,--yes", yes, "do not ask for confirmation");
  format->add_flag("--force", force, kForceHelp);

  auto* erase = app.add_subcommand("sure-erase", "erase every block of a controller and verify it (data is gone for good)");
  erase->add_option("--controller", controller, "controller")->required();
  erase->add_flag("-y,--yes", yes, "do not ask for confirmation");
  erase->add_flag("--force", force, kForceHelp);

  std::string onoff;
  auto* beacon = app.add_subcommand("beacon", "identify the card");
  beacon->add_option("state", onoff, "on or off")->required()->check(CLI::IsMember({"on", "off"}));

  double override_w = -1, capability_w = -1;
  bool override_off = false;
  auto* power = app.add_subcommand("power-override",
                                   "set or clear power override for a card (refused above the slot's declared capability)");
  power->add_option("--watts", override_w, "the card's power limit with override on, e.g. 55");
  power->add_flag("--off", override_off, "back to the slot limit");
  power->add_option("--slot-capability", capability_w,
                    "what the slot (with any external power cable) can supply, in watts");
  double ambient = -1000, airflow = -1;
  auto* envcmd = app.add_subcommand("sim-environment", "set the simulated card's ambient temperature and airflow");
  envcmd->add_option("--ambient", ambient, "inlet air temperature, C");
  envcmd->add_option("--airflow", airflow, "airflow over the card, LFM");

  std::string dir, profile;
  uint32_t blocks = 0;
  uint64_t seed = 1;
  auto* monitor = app.add_subcommand("monitor", "a live view of cards, LUNs and alerts, refreshed like top");
  double mon_interval = 2;
  int mon_count = 0;
  monitor->add_option("--interval", mon_interval, "seconds between refreshes (default 2)");
  monitor->add_option("--count", mon_count, "stop after N refreshes (default: until interrupted)");
  auto* create = app.add_subcommand("create-card",
                                    "make a new card: DIR or sim:DIR (simulated), rtl:DIR (co-simulated RTL controller), "
                                    "kernel:DIR (co-simulated Alveo kernel), xrt:N (no vsld needed)");
  create->add_option("spec", dir, "card spec (docs/backends.md)")->required();
  create->add_option("--profile", profile,
                     "card profile (default: duo-slc-small; rtl-duo on rtl:, kernel-emu on kernel: and xrt:)");
  create->add_option("--blocks", blocks, "blocks per die (smaller cards)");
  create->add_option("--seed", seed, "seed of the card's identity and factory bad blocks");

  std::string xclbin;
  auto* alveo = app.add_subcommand("alveo-cards",
                                   "list the Alveo cards XRT sees (no vsld needed); with --xclbin, check that xclbin too");
  alveo->add_option("--xclbin", xclbin, "an OpenVSL kernel xclbin (rtl/alveo, docs/alveo.md) to check");

  auto* update = app.add_subcommand("update", "load a controller firmware image (checked first; the old one stays on failure)");
  std::string image;
  update->add_option("image", image, "firmware image")->required();
  update->add_option("--controller", controller, "controller (default: all)");
  update->add_flag("-y,--yes", yes, "do not ask for confirmation");

  std::string fw_version, fw_model, fw_payload;
  auto* mkfw = app.add_subcommand("make-firmware", "build a controller firmware image (release tooling, tests)");
  mkfw->add_option("out", image, "image to write")->required();
  mkfw->add_option("--version", fw_version, "firmware version, e.g. 1.1.0")->required();
  mkfw->add_option("--model", fw_model, "controller model, e.g. OVSL-SLC-16G")->required();
  mkfw->add_option("--payload", fw_payload, "payload file (default: empty)");

  CLI11_PARSE(app, argc, argv);

  if (*status) {
    json reply = Request(g, {{"cmd", "status"}, {"all", all}});
    if (int rc = Check(g, reply); rc != kExitOk) return rc;
    if (g.json_out) {
      std::cout << reply["result"].dump(2) << "\n";
    } else {
      PrintStatus(reply["result"], all);
    }
    return kExitOk;
  }
  if (*monitor) {
    if (!(mon_interval >= 0.1 && mon_interval <= 3600)) {
      std::cerr << "vslctl: --interval must be 0.1 to 3600 seconds\n";
      return kExitUsage;
    }
    return Monitor(g, mon_interval, mon_count);
  }
  if (*power || *envcmd) {
    json req = {{"cmd", *power ? "power" : "environment"}};
    if (*power) {
      if (override_off == (override_w >= 0) && capability_w < 0) {
        std::cerr << "vslctl: give --watts W or --off (and/or --slot-capability W)\n";
        return kExitUsage;
      }
      if (override_off) req["override_w"] = 0.0;
      if (override_w >= 0) req["override_w"] = override_w;
      if (capability_w >= 0) req["slot_capability_w"] = capability_w;
    } else {
      if (ambient > -1000) req["ambient_c"] = ambient;
      if (airflow >= 0) req["airflow_lfm"] = airflow;
    }
    json reply = Request(g, req);
    if (int rc = Check(g, reply); rc != kExitOk) return rc;
    if (g.json_out) {
      std::cout << reply["result"].dump(2) << "\n";
    } else {
      PrintPower(reply["result"]);
    }
    return kExitOk;
  }
  if (*attach) return Simple(g, {{"cmd", "attach"}, {"lun", lun}}, "attached");
  if (*detach) return Simple(g, {{"cmd", "detach"}, {"lun", lun}, {"force", force}}, "detached");
  if (*reset) return Simple(g, {{"cmd", "reset"}, {"lun", lun}, {"force", force}}, "reset");
  if (*takeover) return Simple(g, {{"cmd", "takeover"}, {"lun", lun}, {"force", force_claim}}, "taken over");
  if (*release) return Simple(g, {{"cmd", "release"}, {"lun", lun}, {"force", force}}, "released");
  if (*faildie) return Simple(g, {{"cmd", "fail-die"}, {"lun", lun}, {"die", die}}, "die failed");
  if (*format) {
    const std::string what =
        controller < 0 ? fmt::format("Format every controller of card {}", std::max(g.card, 0))
                       : fmt::format("Format controller {} of card {}", controller, std::max(g.card, 0));
    if (!Confirm(what + fmt::format(" in {}-pipe mode with {} B sectors: ALL DATA ON IT IS LOST.", mode, sector_size),
                 yes)) {
      return kExitDeclined;
    }
    return Simple(g,
                  {{"cmd", "format"}, {"controller", controller}, {"mode", mode}, {"sector_bytes", sector_size},
                   {"reserve", reserve}, {"spare_percent", spare}, {"flashback", !no_flashback}, {"force", force}},
                  "formatted");
  }
  if (*erase) {
    if (!Confirm(fmt::format("Sure-erase controller {} of card {}: every block is erased; the data cannot be "
                             "recovered.",
                             controller, std::max(g.card, 0)),
                 yes)) {
      return kExitDeclined;
    }
    json reply = Request(g, {{"cmd", "sure-erase"}, {"controller", controller}, {"force", force}});
    if (int rc = Check(g, reply); rc != kExitOk) return rc;
    if (g.json_out) {
      std::cout << reply["result"].dump(2) << "\n";
    } else {
      for (const auto& l : reply["result"]["luns"]) {
        std::cout << fmt::format("{}: {} blocks erased and verified blank, {} bad (skipped), {} not blank\n",
                                 l.value("lun", ""), l.value("erased_and_verified", 0), l.value("bad", 0),
                                 l.value("not_blank", 0));
      }
    }
    return kExitOk;
  }
  if (*beacon) return Simple(g, {{"cmd", "beacon"}, {"on", onoff == "on"}}, onoff == "on" ? "beacon on" : "beacon off");
  if (*create) {
    vsl::backend::CreateArgs ca;
    ca.profile = profile;
    ca.blocks_per_lun = blocks;
    ca.seed = seed;
    vsl::Status s = vsl::backend::CreateCard(dir, ca);
    if (!s.ok()) {
      std::fprintf(stderr, "vslctl: %s\n", s.ToString().c_str());
      return s.code() == vsl::StatusCode::kIOError ? kExitFailed : kExitUsage;
    }
    auto spec = vsl::card::ParseCardSpec(dir);
    const std::string used = profile.empty() ? vsl::backend::DefaultProfile(spec->kind) : profile;
    if (g.json_out) {
      std::cout << json{{"dir", dir}, {"backend", spec->kind}, {"profile", used}}.dump(2) << "\n";
    } else {
      std::cout << fmt::format("created a {} card in {} ({} backend)\n", used, dir, spec->kind);
    }
    return kExitOk;
  }
  if (*alveo) {
    auto lines = vsl::hw::DescribeAlveoCards(xclbin);
    if (!lines.ok()) {
      std::fprintf(stderr, "vslctl: %s\n", std::string(lines.status().message()).c_str());
      return kExitFailed;
    }
    for (const auto& l : *lines) std::cout << l << "\n";
    return kExitOk;
  }
  if (*update) {
    char abs[4096];
    const std::string path = ::realpath(image.c_str(), abs) != nullptr ? std::string(abs) : image;
    if (!Confirm(fmt::format("Load firmware image {} into {} of card {}.", path,
                             controller < 0 ? std::string("every controller") : fmt::format("controller {}", controller),
                             std::max(g.card, 0)),
                 yes)) {
      return kExitDeclined;
    }
    json reply = Request(g, {{"cmd", "update"}, {"path", path}, {"controller", controller}});
    if (int rc = Check(g, reply); rc != kExitOk) return rc;
    if (g.json_out) {
      std::cout << reply["result"].dump(2) << "\n";
    } else {
      for (const auto& k : reply["result"]["controllers"]) {
        std::cout << fmt::format("controller {}: firmware {} -> {}\n", k["controller"].get<int>(),
                                 k["from"].get<std::string>(), k["to"].get<std::string>());
      }
    }
    return kExitOk;
  }
  if (*mkfw) {
    std::vector<uint8_t> payload;
    if (!fw_payload.empty()) {
      std::ifstream in(fw_payload, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "vslctl: cannot read %s\n", fw_payload.c_str());
        return kExitUsage;
      }
      payload.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    auto fw = vsl::simcard::BuildFirmware(fw_version, fw_model, payload);
    if (!fw.ok()) {
      std::fprintf(stderr, "vslctl: %s\n", fw.status().ToString().c_str());
      return kExitUsage;
    }
    std::ofstream outf(image, std::ios::binary);
    outf.write(reinterpret_cast<const char*>(fw->data()), static_cast<std::streamsize>(fw->size()));
    if (!outf) {
      std::fprintf(stderr, "vslctl: cannot write %s\n", image.c_str());
      return kExitFailed;
    }
    std::cout << fmt::format("wrote {} ({} bytes, firmware {} for {})\n", image, fw->size(), fw_version, fw_model);
    return kExitOk;
  }
  return kExitUsage;
}
