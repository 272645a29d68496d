// The NBD server: listens on a Unix socket and/or TCP, runs one Session per connection
// (a thread that reads it or, polled, waits for its end, and a writer thread each), and
// stops them all on destruction.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vsl/nbd/session.h"

namespace vsl::nbd {

struct ServerConfig {
  std::string unix_path;      // "" for none
  uint32_t unix_mode = 0600;  // the socket's permissions: whoever can connect can write the LUNs
  std::string tcp;            // "" for none; "PORT", "HOST:PORT" or "[V6]:PORT" (host default 127.0.0.1)
  uint32_t max_connections = 64;
  SessionOptions session;
};

class Server {
 public:
  // Binds every listener (a stale Unix socket file is replaced, a live one refused).
  static Result<std::unique_ptr<Server>> Start(ExportCatalog& catalog, const ServerConfig& cfg);
  // Stops accepting, ends every connection once its accepted requests are answered.
  ~Server();

  // The TCP port bound (useful with port 0), or 0.
  uint16_t tcp_port() const { return tcp_port_; }
  uint32_t connections() const;

 private:
  Server() = default;
  void AcceptLoop();
  void Reap(bool all);

  ExportCatalog* catalog_ = nullptr;
  ServerConfig cfg_;
  std::vector<int> listen_fds_;
  int wake_[2] = {-1, -1};
  uint16_t tcp_port_ = 0;
  std::thread thread_;
  struct Conn {
    std::unique_ptr<Session> session;
    std::thread thread;
  };
  mutable std::mutex mu_;
  std::list<Conn> conns_;
};

}  // namespace vsl::nbd
