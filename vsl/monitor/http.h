// The monitor's HTTP endpoint in vsld (`--http`; off by default): GET /metrics (the
// Prometheus exposition), GET / (the live dashboard, one self-contained page), and the
// JSON it reads: GET /api/status, /api/state (alerts, predictions), /api/history?card=N
// &tier=fine|coarse&since=UNIX&max=N. Every other method is answered 405.
//
// It binds loopback unless told otherwise: a non-loopback address is refused unless
// `allow_remote` (the data is not secret, but the card's serials and load are nobody
// else's business). With a certificate and key (the NBD ones, --http-tls) it serves HTTPS.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "vsl/core/status.h"

namespace httplib {
class Server;
}

namespace vsl::monitor {

class Monitor;

struct HttpConfig {
  std::string listen;         // "PORT" (loopback), "HOST:PORT" or "[V6]:PORT"; port 0 picks one
  bool allow_remote = false;  // a non-loopback HOST is refused without it
  std::string cert_file, key_file;  // both: HTTPS
};

// Splits "PORT", "HOST:PORT", "[V6]:PORT" (host "127.0.0.1" for a bare port).
Result<std::pair<std::string, int>> ParseListen(const std::string& s);
// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopback(const std::string& host);

class HttpServer {
 public:
  // `status_json`: the status command's result (for /api/status).
  static Result<std::unique_ptr<HttpServer>> Start(Monitor& m, const HttpConfig& cfg);
  ~HttpServer();  // stops listening; requests in progress finish first
  int port() const { return port_; }
  const std::string& host() const { return host_; }
  bool tls() const { return tls_; }

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;
};

// The dashboard page (vsl/monitor/dashboard.html, embedded at build time).
extern const char* const kDashboardHtml;

}  // namespace vsl::monitor
