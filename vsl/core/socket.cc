#include "vsl/core/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace vsl {

Result<int> ListenUnix(const std::string& path, uint32_t mode, const std::string& owner, int type) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument(fmt::format("socket path '{}' is empty or too long", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  {
    const int probe = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
      const bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      ::close(probe);
      if (live) return Status::AlreadyExists(fmt::format("another {} serves {}", owner, path));
    }
    ::unlink(path.c_str());
  }
  const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(fmt::format("socket: {}", std::strerror(errno)));
  const mode_t old = ::umask(0777 & ~mode);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IOError(fmt::format("bind {}: {}", path, std::strerror(e)));
  }
  ::chmod(path.c_str(), mode);
  if (::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IOError(fmt::format("listen {}: {}", path, std::strerror(e)));
  }
  return fd;
}

Result<int> ListenTcp(const std::string& spec, uint16_t* port) {
  std::string host = "127.0.0.1", service = spec;
  if (!spec.empty() && spec[0] == '[') {
    const auto close = spec.find("]:");
    if (close == std::string::npos) return Status::InvalidArgument(fmt::format("TCP address '{}': expected [ADDR]:PORT", spec));
    host = spec.substr(1, close - 1);
    service = spec.substr(close + 2);
  } else if (const auto colon = spec.rfind(':'); colon != std::string::npos) {
    host = spec.substr(0, colon);
    service = spec.substr(colon + 1);
  }
  if (service.empty() || service.find_first_not_of("0123456789") != std::string::npos || service.size() > 5 ||
      std::stoul(service) > 65535) {
    return Status::InvalidArgument(fmt::format("TCP address '{}': the port must be a number 0..65535", spec));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int r = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); r != 0) {
    return Status::InvalidArgument(fmt::format("TCP address '{}': {}", spec, gai_strerror(r)));
  }
  Status last = Status::IOError(fmt::format("TCP address '{}': nothing to bind", spec));
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      last = Status::IOError(fmt::format("bind {}: {}", spec, std::strerror(errno)));
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
    if (port != nullptr) {
      *port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    }
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace vsl
