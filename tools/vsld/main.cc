// vsld: the OpenVSL daemon. Owns the cards named on the command line or in a config file,
// attaches their LUNs (from the checkpoint after a clean stop, by scan after a crash),
// serves the control protocol on a Unix socket (vslctl), and detaches every LUN cleanly
// on SIGTERM or SIGINT (a checkpoint each). Logs go to stderr.
//
//   vsld --card DIR [--card DIR...] [--socket PATH] [--socket-mode 0600] [--no-attach]
//   vsld --config /etc/openvsl/vsld.json
//
// Exit codes: 0 clean stop; 2 bad usage, config or card; 3 cannot serve (socket taken).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "vsl/core/log.h"
#include "vsl/daemon/daemon.h"

int main(int argc, char** argv) {
  using vsl::daemon::DaemonConfig;
  CLI::App app{"vsld: the OpenVSL daemon"};
  std::string config, socket, socket_mode, log_level = "info";
  std::vector<std::string> cards;
  bool no_attach = false;
  app.add_option("--config", config, "JSON config file (cards, socket, socket_mode, attach)");
  app.add_option("--card", cards, "card directory (repeatable)");
  app.add_option("--socket", socket, "control socket path (default /run/vsld.sock)");
  app.add_option("--socket-mode", socket_mode, "control socket permissions, octal (default 0600: root only)");
  app.add_flag("--no-attach", no_attach, "do not attach the LUNs at start");
  uint32_t volume_kib = 0;
  app.add_option("--volume-chunk-kib", volume_kib, "a card volume striped over every LUN in chunks of N KiB (0: none)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);

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
  if (volume_kib != 0) cfg.volume_chunk_kib = volume_kib;

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
  vsl::Logger("vsld")->info("ready: {} card(s), control socket {}", (*d)->card_count(), cfg.socket_path);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  vsl::Logger("vsld")->info("signal {}: detaching every LUN", sig);
  server->reset();
  d->reset();
  vsl::Logger("vsld")->info("stopped cleanly");
  return 0;
}
