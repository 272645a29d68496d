// Daemon: what vsld runs. It owns one or more cards, attaches their LUNs, and answers the
// control protocol (docs/control-protocol.md) that vslctl speaks.
//
// Control protocol, version 1: one JSON object per line each way over a Unix stream
// socket. A request is {"v": 1, "cmd": "<name>", ...arguments}; the reply is
// {"v": 1, "ok": true, "result": {...}} or {"v": 1, "ok": false, "error": {"code":
// "<StatusCodeName>", "message": "..."}}. A malformed line, an unknown command or a
// bad argument gets an error reply, never a crash; the connection stays usable.
//
// Threads: Handle may be called from any thread; requests are served one at a time
// (the card layer's management calls are not concurrent). I/O runs on the LUN engines.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "vsl/card/card.h"
#include "vsl/core/status.h"
#include "vsl/nbd/tls.h"

namespace vsl::daemon {

inline constexpr int kProtocolVersion = 1;
// The longest request line accepted (a longer one is refused and the connection closed).
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;

// The NBD front end (docs/nbd.md). Config file: "nbd": {"socket": "...", "socket_mode":
// "0600", "tcp": "127.0.0.1:10809", "read_only": false, "write_through": false, "polled": true,
// "tls_mode": "off|on|require", "tls_cert": "...", "tls_key": "...", "tls_ca": "...",
// "tls_psk": "..."}.
struct NbdConfig {
  // "" (default): next to the control socket, "<control socket minus .sock>-nbd.sock"
  // (/run/vsld-nbd.sock for the default control socket); "none": no Unix listener.
  std::string socket;
  uint32_t socket_mode = 0600;  // whoever can connect can read and write every LUN
  std::string tcp;              // "" for none; "PORT" binds loopback
  bool read_only = false;
  bool write_through = false;   // acknowledge writes only once on flash (every write FUA)
  bool polled = true;           // a LUN's connections read by its engine (nbd::SessionOptions)
  nbd::TlsConfig tls;
};

// A file next to the control socket: "<control socket minus .sock><suffix>".
std::string BesideControlSocket(const std::string& control_socket, const std::string& suffix);
// The NBD Unix socket path `cfg` asks for ("" for none).
std::string NbdSocketPath(const std::string& nbd_socket, const std::string& control_socket);

// The SDK's attached mode (docs/sdk.md). Config file: "sdk": {"socket": "...",
// "socket_mode": "0600"}.
struct SdkConfig {
  // "" (default): "<control socket minus .sock>-sdk.sock" (/run/vsld-sdk.sock, where
  // vsl_attach looks by default); "none": no SDK socket.
  std::string socket;
  uint32_t socket_mode = 0600;  // whoever can connect can read and write every LUN
};
std::string SdkSocketPath(const std::string& sdk_socket, const std::string& control_socket);
// The LUN an SDK application names: "lun0", "card1/lun2". NotFound, or
// FailedPrecondition when a card volume stripes the LUNs.
Result<card::Lun*> FindSdkLun(const std::vector<card::Card*>& cards, uint32_t volume_chunk_kib,
                              const std::string& name);

// Power (docs/power.md). Config file: "power": {"slot_limit_w": 24.75,
// "slot_capability_w": 25, "cards": {"<card serial>": {"override_w": 55,
// "slot_capability_w": 75}}, "environment": {"ambient_c": 25, "airflow_lfm": 300}}.
// An override is refused (and logged) above the slot capability declared for that card.
struct CardPowerConfig {
  double override_w = 0;          // 0: no override
  double slot_capability_w = 0;   // 0: PowerConfig's
};
struct PowerConfig {
  double slot_limit_w = card::kSlotLimitW;
  double slot_capability_w = card::kSlotCapabilityW;
  std::map<std::string, CardPowerConfig> cards;  // by card serial
  model::Environment environment;               // the simulated card's surroundings
  // The policy for the card with `serial` (its override, if configured).
  card::PowerPolicy PolicyFor(const std::string& serial) const;
};

// Parses an octal permission string such as "0600" (throws std::invalid_argument).
uint32_t OctalMode(const std::string& m);

// The monitor (docs/monitoring.md). Config file: "monitor": {"http": "127.0.0.1:9110",
// "allow_remote": false, "tls": false, "interval_s": 10, "alert_hook": "...",
// "temp_warn_c": 0, "eol_days": 30}.
struct MonitorSettings {
  std::string http;           // "": no HTTP endpoint; "PORT", "HOST:PORT", "[V6]:PORT"
  bool allow_remote = false;  // a non-loopback HTTP address is refused without it
  bool tls = false;           // HTTPS with the NBD certificate and key
  double interval_s = 10;     // between samples; 0: no monitor (no history, no alerts)
  std::string alert_hook;     // run by /bin/sh -c on every alert raised or cleared
  double temp_warn_c = 0;     // 0: 5 C below the card's throttle temperature
  double eol_days = 30;       // end_of_life alert when the predicted end is this close
};

struct DaemonConfig {
  std::vector<std::string> cards;  // card directories (the simulated card backend)
  std::string socket_path = "/run/vsld.sock";
  uint32_t socket_mode = 0600;     // root-only by default
  bool attach = true;              // attach every LUN at start
  // The card volume (docs/card.md): one device striped over every LUN of each card, in
  // chunks of this many KiB; 0 for none. Status shows its shape (the block front ends
  // serve it).
  uint32_t volume_chunk_kib = 0;
  NbdConfig nbd;
  SdkConfig sdk;
  PowerConfig power;
  MonitorSettings monitor;
  bool ublk = true;  // /dev/ublkbN per export where the kernel has ublk (config "ublk": "auto" | "off")
  // How the simulated cards decide read errors (config "sim_ecc": "statistical" | "bit-exact";
  // docs/simcard.md): bit-exact runs the controller's BCH codec on every page.
  model::EccMode sim_ecc = model::EccMode::kStatistical;
  // Zero-time simulated cards (config "sim_timing": "model" | "none"; vsld --timing): NAND
  // operations complete as soon as their data has moved, everything else (FTL, parity,
  // groomer, checkpoints, protocols) runs for real. A benchmarking mode for measuring the
  // host path alone, not a product card: only simulated cards take it.
  bool sim_zero_time = false;
  // A card shared with other hosts (docs/ha.md; vsld --host-id, --luns, --lease-ms,
  // --takeover; config "host_id": 1, "luns": [0, 1], "lease_ms": 4000, "takeover":
  // "auto" | "manual"). Applies to every card this vsld opens.
  card::CardOptions::Sharing sharing;
  // Loads a JSON config file: {"cards": ["/var/lib/openvsl/card0"], "socket": "...",
  // "socket_mode": "0660", "attach": true, "volume_chunk_kib": 128}. Unknown keys are refused (a typo would
  // otherwise be silently ignored).
  static Result<DaemonConfig> FromFile(const std::string& path);
};

class Daemon {
 public:
  // Opens every card of `cfg` and (cfg.attach) attaches their LUNs: from the checkpoint
  // after a clean stop, by scan after a crash, with progress in the log.
  static Result<std::unique_ptr<Daemon>> Start(const DaemonConfig& cfg);
  // Detaches every LUN cleanly (a checkpoint each).
  ~Daemon();

  // One request line in, one reply line out (without the newline).
  std::string Handle(std::string_view line);

  card::Card& card(std::size_t i) { return *cards_.at(i); }
  std::vector<card::Card*> cards() const {
    std::vector<card::Card*> v;
    for (const auto& c : cards_) v.push_back(c.get());
    return v;
  }
  // What `status` reports under "front_ends" (NBD listeners, connections, ublk); set by
  // whoever starts them, cleared (nullptr) before they stop.
  void SetFrontEndStatus(std::function<nlohmann::json()> f) {
    std::lock_guard<std::mutex> l(front_mu_);
    front_status_ = std::move(f);
  }
  // Who holds a LUN's block device: `f(card, lun)` returns why the LUN is in use (e.g.
  // "/dev/ublkb0 is mounted or open exclusively") or "" when it is not. detach, reset,
  // format and sure-erase refuse a LUN in use with Busy unless the request says "force";
  // set by whoever serves block devices, cleared (nullptr) before they stop.
  void SetInUseCheck(std::function<std::string(std::size_t card, const card::Lun& lun)> f) {
    std::lock_guard<std::mutex> l(front_mu_);
    in_use_ = std::move(f);
  }
  // Called after a format (the LUNs' sizes or sector sizes may have changed), so block
  // front ends can remake their devices; cleared (nullptr) before they stop.
  void SetFormatted(std::function<void()> f) {
    std::lock_guard<std::mutex> l(front_mu_);
    formatted_ = std::move(f);
  }
  std::size_t card_count() const { return cards_.size(); }
  // The monitor (docs/monitoring.md): `state` is what `status` reports under "monitor"
  // (alerts, predictions); `history` answers the "history" command ({"card": N, "tier":
  // "fine"|"coarse", "since": unix_s, "max": n}). Cleared (nullptr) before it stops.
  void SetMonitor(std::function<nlohmann::json()> state,
                  std::function<Result<nlohmann::json>(const nlohmann::json&)> history) {
    std::lock_guard<std::mutex> l(front_mu_);
    monitor_state_ = std::move(state);
    monitor_history_ = std::move(history);
  }

 private:
  Daemon() = default;
  // Busy naming the holder when any of `luns` is in use and `req` does not force.
  vsl::Status RefuseInUse(const nlohmann::json& req, const card::Card& c, const std::vector<card::Lun*>& luns);
  Result<nlohmann::json> Dispatch(const nlohmann::json& req);
  Result<nlohmann::json> StatusCmd(const nlohmann::json& req);
  Result<card::Card*> CardArg(const nlohmann::json& req);
  Result<std::vector<card::Lun*>> LunsArg(const nlohmann::json& req, card::Card& c);
  Result<nlohmann::json> LunStatus(card::Card& c, card::Lun& l, bool all);
  Result<nlohmann::json> SureErase(card::Card& c, uint32_t controller);
  Result<nlohmann::json> PowerCmd(const nlohmann::json& req);
  nlohmann::json PowerJson(card::Card& c);

  DaemonConfig cfg_;
  std::vector<std::unique_ptr<card::Card>> cards_;
  std::vector<bool> beacon_;
  std::mutex mu_;
  std::mutex front_mu_;
  std::function<nlohmann::json()> front_status_;
  std::function<std::string(std::size_t, const card::Lun&)> in_use_;
  std::function<void()> formatted_;
  std::function<nlohmann::json()> monitor_state_;
  std::function<Result<nlohmann::json>(const nlohmann::json&)> monitor_history_;
};

// Serves a daemon's control protocol on a Unix socket, on its own thread.
class ControlServer {
 public:
  // Binds `path` (a stale socket file is replaced; a live one is refused: another vsld
  // is running), with permissions `mode`.
  static Result<std::unique_ptr<ControlServer>> Start(Daemon& d, const std::string& path, uint32_t mode);
  ~ControlServer();  // stops accepting, closes, removes the socket file

 private:
  ControlServer() = default;
  void Run();
  void Serve(int fd);

  Daemon* daemon_ = nullptr;
  std::string path_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: written to stop the accept loop
  std::thread thread_;
};

}  // namespace vsl::daemon
