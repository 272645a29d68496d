// Listening sockets shared by vsld's servers (control protocol, NBD).
#pragma once

#include <cstdint>
#include <string>

#include <sys/socket.h>

#include "vsl/core/status.h"

namespace vsl {

// Binds and listens on Unix stream socket `path` with permissions `mode`. A socket file
// left by a process that died is replaced; one that answers is refused (AlreadyExists:
// `owner` names who is likely serving it, for the message). `type`: SOCK_STREAM, or
// SOCK_SEQPACKET for a protocol of whole messages.
Result<int> ListenUnix(const std::string& path, uint32_t mode, const std::string& owner, int type = SOCK_STREAM);

// Binds and listens on TCP `spec`: "PORT", "HOST:PORT" or "[V6ADDR]:PORT" (host default
// 127.0.0.1: loopback unless asked otherwise). `port` receives the port bound (for 0).
Result<int> ListenTcp(const std::string& spec, uint16_t* port);

}  // namespace vsl
