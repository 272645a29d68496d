#include "vsl/nbd/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/core/socket.h"
#include "vsl/core/thread_name.h"

namespace vsl::nbd {
namespace {

std::string PeerName(int fd, const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    return fmt::format("tcp {}:{}", buf, ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    return fmt::format("tcp [{}]:{}", buf, ntohs(a->sin6_port));
  }
  return fmt::format("unix fd {}", fd);
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(ExportCatalog& catalog, const ServerConfig& cfg) {
  std::unique_ptr<Server> s(new Server());
  s->catalog_ = &catalog;
  s->cfg_ = cfg;
  if (cfg.unix_path.empty() && cfg.tcp.empty()) return Status::InvalidArgument("the NBD server has no listener");
  if (cfg.session.tls && cfg.session.tls->config().mode == TlsMode::kOff) s->cfg_.session.tls.reset();
  if (!cfg.unix_path.empty()) {
    auto fd = ListenUnix(cfg.unix_path, cfg.unix_mode, "NBD server");
    if (!fd.ok()) return fd.status();
    s->listen_fds_.push_back(*fd);
  }
  if (!cfg.tcp.empty()) {
    auto fd = ListenTcp(cfg.tcp, &s->tcp_port_);
    if (!fd.ok()) {
      if (!cfg.unix_path.empty()) ::unlink(cfg.unix_path.c_str());
      for (int l : s->listen_fds_) ::close(l);
      s->listen_fds_.clear();
      return fd.status();
    }
    s->listen_fds_.push_back(*fd);
  }
  if (::pipe2(s->wake_, O_CLOEXEC) != 0) return Status::IOError("pipe");
  s->thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  const char* tls = !s->cfg_.session.tls                                           ? "off"
                    : s->cfg_.session.tls->config().mode == TlsMode::kRequire ? "required"
                                                                                   : "offered";
  Logger("nbd")->info("NBD server: unix {} (mode {:o}), tcp {}, TLS {}{}{}",
                      cfg.unix_path.empty() ? "-" : cfg.unix_path, cfg.unix_mode,
                      cfg.tcp.empty() ? "-" : fmt::format("{} (port {})", cfg.tcp, s->tcp_port_), tls,
                      cfg.session.read_only ? ", read-only" : "", cfg.session.write_through ? ", write-through" : "");
  return s;
}

Server::~Server() {
  if (wake_[1] >= 0) {
    const char c = 'x';
    (void)!::write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : listen_fds_) ::close(fd);
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
  if (!cfg_.unix_path.empty() && !listen_fds_.empty()) ::unlink(cfg_.unix_path.c_str());
  Reap(true);
}

uint32_t Server::connections() const {
  std::lock_guard<std::mutex> l(mu_);
  uint32_t n = 0;
  for (const Conn& c : conns_) n += !c.session->finished();
  return n;
}

void Server::Reap(bool all) {
  std::list<Conn> done;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all) it->session->Stop();
      if (all || it->session->finished()) {
        done.splice(done.end(), conns_, it++);
      } else {
        ++it;
      }
    }
  }
  for (Conn& c : done) c.thread.join();
}

void Server::AcceptLoop() {
  std::vector<pollfd> fds;
  for (int fd : listen_fds_) fds.push_back({fd, POLLIN, 0});
  fds.push_back({wake_[0], POLLIN, 0});
  for (;;) {
    for (auto& p : fds) p.revents = 0;
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Logger("nbd")->error("poll: {}", std::strerror(errno));
      return;
    }
    if (fds.back().revents != 0) return;
    Reap(false);
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      sockaddr_storage ss{};
      socklen_t sl = sizeof ss;
      const int c = ::accept4(fds[i].fd, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_CLOEXEC);
      if (c < 0) continue;
      if (connections() >= cfg_.max_connections) {
        Logger("nbd")->warn("connection refused: {} connections already", cfg_.max_connections);
        ::close(c);
        continue;
      }
      if (ss.ss_family != AF_UNIX) {
        const int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      const std::string peer = PeerName(c, ss);
      auto session = std::make_unique<Session>(std::make_unique<SocketTransport>(c), *catalog_, cfg_.session, peer);
      Session* sp = session.get();
      std::lock_guard<std::mutex> l(mu_);
      conns_.push_back({std::move(session), std::thread([sp] {
                           SetThreadName("vsl-nbd");
                           sp->Run();
                         })});
    }
  }
}

}  // namespace vsl::nbd
