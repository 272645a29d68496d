// vsld's side of the SDK's attached mode (shm_format.h): a Unix socket where SDK
// applications attach to LUNs; per application a session thread that takes requests
// from its submission ring, runs them on the LUN's engine with the data in the shared
// region (no copy), and posts completions to its completion ring.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vsl/card/card.h"
#include "vsl/core/status.h"

namespace vsl::sdk {

// Finds the LUN an application names ("lun0", "card1/lun2"), or says why not.
using LunResolver = std::function<Result<card::Lun*>(const std::string& name)>;

class ShmServer {
 public:
  // Binds `path` (mode `mode`; a stale socket is replaced, a live one refused).
  static Result<std::unique_ptr<ShmServer>> Start(const std::string& path, uint32_t mode, LunResolver resolve);
  // Stops accepting; every session ends once its requests in flight have completed.
  ~ShmServer();
  uint32_t sessions() const { return sessions_.load(); }
  const std::string& path() const { return path_; }

 private:
  class Session;
  ShmServer() = default;
  void Accept();

  std::string path_;
  LunResolver resolve_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<uint32_t> sessions_{0};
  std::mutex mu_;
  std::list<std::thread> threads_;  // guarded by mu_
  std::vector<std::thread::id> finished_;  // sessions done, to join; guarded by mu_
  std::thread accept_thread_;
};

}  // namespace vsl::sdk
