// vsld: the OpenVSL daemon. Owns the cards named on the command line or in a config file,
// attaches their LUNs (from the checkpoint after a clean stop, by scan after a crash),
// serves the control protocol on a Unix socket (vslctl), and detaches every LUN cleanly
// on SIGTERM or SIGINT (a checkpoint each). Every LUN (and the card volume, if any) is
// served as a block device over NBD (docs/nbd.md) and, where the kernel has ublk, as
// /dev/ublkbN (vsld says plainly when it has not). SDK applications attach to LUNs through
// the SDK socket (docs/sdk.md). Logs go to stderr.
//
//   vsld --card DIR [--card DIR...] [--socket PATH] [--socket-mode 0600] [--no-attach]
//        [--nbd-socket PATH] [--nbd-tcp [HOST:]PORT] [--tls off|on|require ...]
//        [--sdk-socket PATH|none]
//   vsld --card shared:DIR --host-id N [--luns 0,1] [--takeover auto] ...
//                                            one of several hosts of a card served by
//                                            `vslflash serve DIR` (docs/ha.md)
//   vsld --config /etc/openvsl/vsld.json
//
// Exit codes: 0 clean stop; 2 bad usage, config or card; 3 cannot serve (socket taken).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "vsl/core/log.h"
#include "vsl/daemon/daemon.h"
#include "vsl/daemon/exports.h"
#include "vsl/daemon/ublk_front.h"
#include "vsl/monitor/http.h"
#include "vsl/monitor/monitor.h"
#include "vsl/nbd/server.h"
#include "sdk/src/shm_server.h"
#include "vsl/hw/xrt_port.h"

int main(int argc, char** argv) {
  using vsl::daemon::DaemonConfig;
  CLI::App app{"vsld: the OpenVSL daemon"};
  std::string config, socket, socket_mode, log_level = "info";
  std::vector<std::string> cards;
  bool no_attach = false;
  app.add_option("--config", config, "JSON config file (cards, socket, socket_mode, attach)");
  app.add_option("--card", cards, "card spec (repeatable): DIR or sim:DIR, rtl:DIR, kernel:DIR, xrt:N[:XCLBIN] (docs/backends.md)");
  app.add_option("--socket", socket, "control socket path (default /run/vsld.sock)");
  app.add_option("--socket-mode", socket_mode, "control socket permissions, octal (default 0600: root only)");
  app.add_flag("--no-attach", no_attach, "do not attach the LUNs at start");
  uint32_t volume_kib = 0;
  app.add_option("--volume-chunk-kib", volume_kib, "a card volume striped over every LUN in chunks of N KiB (0: none)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  std::string sim_ecc, timing;
  app.add_option("--timing", timing,
                 "simulated cards' NAND timing: model (default) or none (zero-time, a benchmarking mode: "
                 "operations complete as soon as their data has moved)");
  app.add_option("--sim-ecc", sim_ecc, "simulated cards' ECC: statistical (default) or bit-exact (the BCH codec on every read)");
  std::string nbd_socket, nbd_socket_mode, nbd_tcp, tls_mode, tls_cert, tls_key, tls_ca, tls_psk;
  bool nbd_read_only = false, nbd_write_through = false, nbd_threaded = false;
  app.add_option("--nbd-socket", nbd_socket, "NBD Unix socket (default: <control socket>-nbd.sock; 'none' for none)");
  app.add_option("--nbd-socket-mode", nbd_socket_mode, "its permissions, octal (default 0600)");
  app.add_option("--nbd-tcp", nbd_tcp, "also serve NBD on TCP: PORT (loopback), HOST:PORT or [V6]:PORT");
  app.add_flag("--nbd-read-only", nbd_read_only, "every export read-only");
  app.add_flag("--nbd-write-through", nbd_write_through, "acknowledge writes only once on flash (every write FUA)");
  app.add_flag("--nbd-threaded", nbd_threaded,
               "read each NBD connection on a thread of its own, not on its LUN's engine (for comparison)");
  std::string sdk_socket, sdk_socket_mode;
  app.add_option("--sdk-socket", sdk_socket,
                 "SDK attach socket (default: <control socket>-sdk.sock; 'none' for none)");
  app.add_option("--sdk-socket-mode", sdk_socket_mode, "its permissions, octal (default 0600)");
  std::string ublk_mode;
  app.add_option("--ublk", ublk_mode, "auto (default: /dev/ublkbN per export where the kernel has ublk) or off");
  bool ublk_release = false;
  app.add_flag("--ublk-release", ublk_release,
               "vsld died and will not come back: delete the ublk devices it left waiting (their held I/O fails "
               "with EIO) and exit");
  app.add_option("--tls", tls_mode, "NBD TLS: off, on (offered), require (plaintext refused)");
  app.add_option("--tls-cert", tls_cert, "PEM server certificate");
  app.add_option("--tls-key", tls_key, "PEM private key of the certificate");
  app.add_option("--tls-ca", tls_ca, "PEM CA: clients must present a certificate it signed");
  app.add_option("--tls-psk", tls_psk, "PSK key file (psktool format: name:hexkey per line)");
  std::string http, alert_hook;
  bool http_allow_remote = false, http_tls = false;
  double monitor_interval = -1, temp_warn = -1, eol_days = -1;
  app.add_option("--http", http,
                 "serve /metrics (Prometheus) and the live dashboard: PORT (loopback), HOST:PORT or [V6]:PORT "
                 "(off by default; docs/monitoring.md)");
  app.add_flag("--http-allow-remote", http_allow_remote, "let --http bind a non-loopback address");
  app.add_flag("--http-tls", http_tls, "serve HTTPS with the --tls-cert/--tls-key certificate");
  app.add_option("--monitor-interval", monitor_interval,
                 "seconds between monitor samples (history, alerts; default 10; 0: no monitor)");
  app.add_option("--alert-hook", alert_hook,
                 "command run (/bin/sh -c) on every alert raised or cleared, with VSL_ALERT, VSL_ALERT_STATE, "
                 "VSL_ALERT_SEVERITY, VSL_ALERT_CARD, VSL_ALERT_LUN and VSL_ALERT_MESSAGE set");
  app.add_option("--alert-temp-warn", temp_warn, "temperature warning threshold, C (default: 5 C below throttling)");
  app.add_option("--alert-eol-days", eol_days, "end-of-life alert when the predicted end is this many days away (default 30)");
  uint32_t host_id = 0, lease_ms = 0;
  std::string luns_arg, takeover;
  app.add_option("--host-id", host_id,
                 "this host's id on a shared card (1-65535; docs/ha.md): its LUNs are claimed, leased and fenced");
  app.add_option("--luns", luns_arg, "the LUNs this host serves on a shared card, e.g. 0,1 (default: all)");
  app.add_option("--lease-ms", lease_ms, "a shared card's lease, ms (default 4000): renewed every quarter of it");
  app.add_option("--takeover", takeover,
                 "manual (default) or auto: take over another host's LUN once its lease runs out");
  bool list_alveo = false;
  std::string alveo_xclbin;
  app.add_flag("--list-alveo", list_alveo, "list the Alveo cards XRT sees and exit (with --alveo-xclbin: check it too)");
  app.add_option("--alveo-xclbin", alveo_xclbin, "the OpenVSL kernel xclbin for Alveo cards (docs/alveo.md)");
  CLI11_PARSE(app, argc, argv);

  if (list_alveo) {
    auto lines = vsl::hw::DescribeAlveoCards(alveo_xclbin);
    if (!lines.ok()) {
      std::fprintf(stderr, "vsld: %s\n", std::string(lines.status().message()).c_str());
      return 1;
    }
    for (const auto& l : *lines) std::printf("%s\n", l.c_str());
    return 0;
  }
  vsl::SetLogLevel(spdlog::level::from_str(log_level));
  DaemonConfig cfg;
  if (!config.empty()) {
    auto c = DaemonConfig::FromFile(config);
    if (!c.ok()) {
      std::fprintf(stderr, "vsld: %s\n", c.status().ToString().c_str());
      return 2;
    }
    cfg = std::move(c).value();
  }
  for (const auto& c : cards) cfg.cards.push_back(c);
  if (!socket.empty()) cfg.socket_path = socket;
  if (!socket_mode.empty()) {
    char* end = nullptr;
    const unsigned long m = std::strtoul(socket_mode.c_str(), &end, 8);
    if (end == socket_mode.c_str() || *end != '\0' || m > 0777) {
      std::fprintf(stderr, "vsld: --socket-mode '%s' is not an octal mode such as 0600\n", socket_mode.c_str());
      return 2;
    }
    cfg.socket_mode = static_cast<uint32_t>(m);
  }
  if (no_attach) cfg.attach = false;
  if (!sim_ecc.empty()) {
    auto m = vsl::model::ParseEccMode(sim_ecc);
    if (!m.ok()) {
      std::fprintf(stderr, "vsld: --sim-ecc: %s\n", m.status().ToString().c_str());
      return 2;
    }
    cfg.sim_ecc = *m;
  }
  if (!timing.empty()) {
    if (timing != "model" && timing != "none") {
      std::fprintf(stderr, "vsld: --timing must be model or none, not '%s'\n", timing.c_str());
      return 2;
    }
    cfg.sim_zero_time = timing == "none";
  }
  if (volume_kib != 0) cfg.volume_chunk_kib = volume_kib;
  if (host_id != 0) cfg.sharing.host_id = host_id;
  if (lease_ms != 0) cfg.sharing.lease_ns = static_cast<vsl::DurNs>(lease_ms) * vsl::kMs;
  if (!luns_arg.empty()) {
    cfg.sharing.luns.clear();
    std::size_t at = 0;
    while (at <= luns_arg.size()) {
      const std::size_t comma = std::min(luns_arg.find(',', at), luns_arg.size());
      const std::string one = luns_arg.substr(at, comma - at);
      if (one.empty() || one.find_first_not_of("0123456789") != std::string::npos || one.size() > 4) {
        std::fprintf(stderr, "vsld: --luns '%s': expected LUN numbers separated by commas, e.g. 0,1\n",
                     luns_arg.c_str());
        return 2;
      }
      cfg.sharing.luns.push_back(static_cast<uint32_t>(std::stoul(one)));
      at = comma + 1;
    }
  }
  if (!takeover.empty()) {
    if (takeover != "auto" && takeover != "manual") {
      std::fprintf(stderr, "vsld: --takeover must be auto or manual, not '%s'\n", takeover.c_str());
      return 2;
    }
    cfg.sharing.auto_takeover = takeover == "auto";
  }
  if (cfg.sharing.host_id == 0 && (!cfg.sharing.luns.empty() || cfg.sharing.auto_takeover)) {
    std::fprintf(stderr, "vsld: --luns and --takeover apply to a shared card: give --host-id\n");
    return 2;
  }
  try {
    if (!nbd_socket.empty()) cfg.nbd.socket = nbd_socket;
    if (!nbd_socket_mode.empty()) cfg.nbd.socket_mode = vsl::daemon::OctalMode(nbd_socket_mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vsld: --nbd-socket-mode: %s\n", e.what());
    return 2;
  }
  if (!nbd_tcp.empty()) cfg.nbd.tcp = nbd_tcp;
  if (!sdk_socket.empty()) cfg.sdk.socket = sdk_socket;
  if (!sdk_socket_mode.empty()) {
    try {
      cfg.sdk.socket_mode = vsl::daemon::OctalMode(sdk_socket_mode);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vsld: --sdk-socket-mode: %s\n", e.what());
      return 2;
    }
  }
  if (ublk_release) {
    auto n = vsl::daemon::UblkFrontEnd::Release(vsl::daemon::BesideControlSocket(cfg.socket_path, "-ublk.json"));
    if (!n.ok()) {
      std::fprintf(stderr, "vsld: --ublk-release: %s\n", n.status().ToString().c_str());
      return n.status().code() == vsl::StatusCode::kNotFound ? 0 : 1;
    }
    std::printf("vsld: %d ublk device(s) released\n", *n);
    return 0;
  }
  if (!ublk_mode.empty()) {
    if (ublk_mode != "auto" && ublk_mode != "off") {
      std::fprintf(stderr, "vsld: --ublk '%s' is not auto or off\n", ublk_mode.c_str());
      return 2;
    }
    cfg.ublk = ublk_mode == "auto";
  }
  if (nbd_read_only) cfg.nbd.read_only = true;
  if (nbd_write_through) cfg.nbd.write_through = true;
  if (nbd_threaded) cfg.nbd.polled = false;
  if (!tls_mode.empty()) {
    auto m = vsl::nbd::ParseTlsMode(tls_mode);
    if (!m.ok()) {
      std::fprintf(stderr, "vsld: --tls: %s\n", std::string(m.status().message()).c_str());
      return 2;
    }
    cfg.nbd.tls.mode = *m;
  }
  if (!tls_cert.empty()) cfg.nbd.tls.cert_file = tls_cert;
  if (!tls_key.empty()) cfg.nbd.tls.key_file = tls_key;
  if (!tls_ca.empty()) cfg.nbd.tls.ca_file = tls_ca;
  if (!tls_psk.empty()) cfg.nbd.tls.psk_file = tls_psk;
  if (cfg.nbd.tls.mode == vsl::nbd::TlsMode::kOff &&
      (!cfg.nbd.tls.cert_file.empty() || !cfg.nbd.tls.psk_file.empty())) {
    cfg.nbd.tls.mode = vsl::nbd::TlsMode::kOn;  // credentials given: offer TLS
  }
  if (!http.empty()) cfg.monitor.http = http;
  if (http_allow_remote) cfg.monitor.allow_remote = true;
  if (http_tls) cfg.monitor.tls = true;
  if (!alert_hook.empty()) cfg.monitor.alert_hook = alert_hook;
  if (temp_warn >= 0) cfg.monitor.temp_warn_c = temp_warn;
  if (eol_days >= 0) cfg.monitor.eol_days = eol_days;
  if (monitor_interval >= 0) {
    if (monitor_interval != 0 && (monitor_interval < 0.1 || monitor_interval > 3600)) {
      std::fprintf(stderr, "vsld: --monitor-interval must be 0 (off) or 0.1 to 3600 seconds\n");
      return 2;
    }
    cfg.monitor.interval_s = monitor_interval;
  }
  if (!cfg.monitor.http.empty() && cfg.monitor.interval_s == 0) {
    std::fprintf(stderr, "vsld: --http needs the monitor (--monitor-interval is 0)\n");
    return 2;
  }
  if (!cfg.monitor.http.empty()) {  // refused before any card is opened
    auto hp = vsl::monitor::ParseListen(cfg.monitor.http);
    if (!hp.ok()) {
      std::fprintf(stderr, "vsld: %s\n", std::string(hp.status().message()).c_str());
      return 2;
    }
    if (!vsl::monitor::IsLoopback(hp->first) && !cfg.monitor.allow_remote) {
      std::fprintf(stderr,
                   "vsld: --http %s: %s is not a loopback address; the monitor serves other hosts only with "
                   "--http-allow-remote\n",
                   cfg.monitor.http.c_str(), hp->first.c_str());
      return 2;
    }
  }
  if (cfg.monitor.tls && (cfg.nbd.tls.cert_file.empty() || cfg.nbd.tls.key_file.empty())) {
    std::fprintf(stderr, "vsld: --http-tls needs --tls-cert and --tls-key\n");
    return 2;
  }
  auto tls = vsl::nbd::TlsContext::Create(cfg.nbd.tls);
  if (!tls.ok()) {
    std::fprintf(stderr, "vsld: %s\n", tls.status().ToString().c_str());
    return 2;
  }

  // The signals that stop vsld are taken by this thread alone (sigwait), before any
  // engine thread starts, so they never interrupt I/O.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto d = vsl::daemon::Daemon::Start(cfg);
  if (!d.ok()) {
    std::fprintf(stderr, "vsld: %s\n", d.status().ToString().c_str());
    return 2;
  }
  auto server = vsl::daemon::ControlServer::Start(**d, cfg.socket_path, cfg.socket_mode);
  if (!server.ok()) {
    std::fprintf(stderr, "vsld: %s\n", server.status().ToString().c_str());
    return 3;
  }
  vsl::daemon::CardCatalog catalog((*d)->cards(), cfg.volume_chunk_kib * 1024);
  // ublk where the kernel has it; otherwise say so once and let NBD serve.
  std::unique_ptr<vsl::daemon::UblkFrontEnd> ublk;
  std::string ublk_state = "off (--ublk off)";
  if (cfg.ublk) {
    auto u = vsl::daemon::UblkFrontEnd::Start(catalog, vsl::daemon::BesideControlSocket(cfg.socket_path, "-ublk.json"));
    if (u.ok()) {
      ublk = std::move(u).value();
      ublk_state = "serving";
    } else if (u.status().code() == vsl::StatusCode::kNotSupported) {
      ublk_state = std::string(u.status().message());
      vsl::Logger("vsld")->info("ublk: {}; block devices are served over NBD only", ublk_state);
    } else {
      ublk_state = u.status().ToString();
      vsl::Logger("vsld")->error("ublk: {}; block devices are served over NBD only", ublk_state);
    }
  }
  std::unique_ptr<vsl::nbd::Server> nbd;
  const std::string nbd_path = vsl::daemon::NbdSocketPath(cfg.nbd.socket, cfg.socket_path);
  if (!nbd_path.empty() || !cfg.nbd.tcp.empty()) {
    vsl::nbd::ServerConfig sc;
    sc.unix_path = nbd_path;
    sc.unix_mode = cfg.nbd.socket_mode;
    sc.tcp = cfg.nbd.tcp;
    sc.session.tls = *tls;
    sc.session.read_only = cfg.nbd.read_only;
    sc.session.write_through = cfg.nbd.write_through;
    sc.session.polled = cfg.nbd.polled;
    auto ns = vsl::nbd::Server::Start(catalog, sc);
    if (!ns.ok()) {
      std::fprintf(stderr, "vsld: NBD: %s\n", ns.status().ToString().c_str());
      return 3;
    }
    nbd = std::move(ns).value();
  }
  // The SDK's attached mode: applications reach LUNs through shared-memory rings.
  std::unique_ptr<vsl::sdk::ShmServer> sdk;
  const std::string sdk_path = vsl::daemon::SdkSocketPath(cfg.sdk.socket, cfg.socket_path);
  if (!sdk_path.empty()) {
    auto owned = (*d)->cards();
    const uint32_t chunk = cfg.volume_chunk_kib;
    auto ss = vsl::sdk::ShmServer::Start(sdk_path, cfg.sdk.socket_mode, [owned, chunk](const std::string& name) {
      return vsl::daemon::FindSdkLun(owned, chunk, name);
    });
    if (!ss.ok()) {
      std::fprintf(stderr, "vsld: SDK: %s\n", ss.status().ToString().c_str());
      return 3;
    }
    sdk = std::move(ss).value();
  }
  (*d)->SetFrontEndStatus([&nbd, &cfg, &ublk, &sdk, nbd_path, ublk_state] {
    nlohmann::json j;
    if (sdk) j["sdk"] = {{"socket", sdk->path()}, {"applications", sdk->sessions()}};
    j["ublk"] = {{"state", ublk_state}, {"devices", ublk ? ublk->Status() : nlohmann::json::array()}};
    if (nbd) {
      j["nbd"] = {{"socket", nbd_path},
                  {"tcp", cfg.nbd.tcp},
                  {"tcp_port", nbd->tcp_port()},
                  {"tls", cfg.nbd.tls.mode == vsl::nbd::TlsMode::kOff       ? "off"
                          : cfg.nbd.tls.mode == vsl::nbd::TlsMode::kRequire ? "require"
                                                                             : "on"},
                  {"read_only", cfg.nbd.read_only},
                  {"write_through", cfg.nbd.write_through},
                  {"polled", cfg.nbd.polled},
                  {"connections", nbd->connections()}};
    }
    return j;
  });
  if (ublk) {
    // A LUN whose /dev/ublkbN is mounted is not detached, reset or formatted under it.
    (*d)->SetInUseCheck([&ublk, &catalog](std::size_t card, const vsl::card::Lun& lun) {
      return ublk->InUse(catalog.ExportOf(card, lun));
    });
    (*d)->SetFormatted([&ublk] { ublk->Refresh(); });
  }
  // The monitor: history in each card's directory, alerts, and (--http) the endpoint.
  std::unique_ptr<vsl::monitor::Monitor> monitor;
  std::unique_ptr<vsl::monitor::HttpServer> http_server;
  if (cfg.monitor.interval_s > 0) {
    vsl::monitor::MonitorConfig mc;
    mc.interval_s = cfg.monitor.interval_s;
    mc.alerts.hook = cfg.monitor.alert_hook;
    mc.alerts.temp_warn_c = cfg.monitor.temp_warn_c;
    mc.alerts.eol_days = cfg.monitor.eol_days;
    std::vector<std::string> dirs;
    for (vsl::card::Card* c : (*d)->cards()) dirs.push_back(c->dir());
    vsl::daemon::Daemon* dp = d->get();
    monitor = std::make_unique<vsl::monitor::Monitor>(
        [dp]() -> vsl::Result<nlohmann::json> {
          const nlohmann::json r = nlohmann::json::parse(dp->Handle(R"({"v": 1, "cmd": "status", "all": true})"));
          if (!r.value("ok", false)) {
            return vsl::Status::Internal(r["error"].value("message", std::string("status failed")));
          }
          return r["result"];
        },
        dirs, mc);
    (*d)->SetMonitor([&monitor] { return monitor->StateJson(); },
                     [&monitor](const nlohmann::json& req) { return monitor->HistoryJson(req); });
    monitor->Start();
    if (!cfg.monitor.http.empty()) {
      vsl::monitor::HttpConfig hc;
      hc.listen = cfg.monitor.http;
      hc.allow_remote = cfg.monitor.allow_remote;
      if (cfg.monitor.tls) {
        hc.cert_file = cfg.nbd.tls.cert_file;
        hc.key_file = cfg.nbd.tls.key_file;
      }
      auto hs = vsl::monitor::HttpServer::Start(*monitor, hc);
      if (!hs.ok()) {
        std::fprintf(stderr, "vsld: %s\n", hs.status().ToString().c_str());
        (*d)->SetMonitor(nullptr, nullptr);
        return hs.status().code() == vsl::StatusCode::kInvalidArgument ? 2 : 3;
      }
      http_server = std::move(hs).value();
    }
  }
  vsl::Logger("vsld")->info("ready: {} card(s), control socket {}", (*d)->card_count(), cfg.socket_path);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  vsl::Logger("vsld")->info("signal {}: detaching every LUN", sig);
  http_server.reset();
  (*d)->SetMonitor(nullptr, nullptr);
  monitor.reset();  // its history files are up to date: every sample is appended as taken
  (*d)->SetFrontEndStatus(nullptr);
  (*d)->SetInUseCheck(nullptr);
  (*d)->SetFormatted(nullptr);
  ublk.reset();  // block devices stopped (their requests answered) and deleted
  nbd.reset();   // every connection's accepted requests answered first
  sdk.reset();   // every application's requests in flight answered first
  server->reset();
  d->reset();
  vsl::Logger("vsld")->info("stopped cleanly");
  return 0;
}
