// TLS for the NBD server (NBD_OPT_STARTTLS) through GnuTLS: TLS 1.2 or later, with an
// X.509 certificate (optionally requiring client certificates signed by a CA) or with
// pre-shared keys (a psktool file: one "username:hexkey" per line).
#pragma once

#include <memory>
#include <string>

#include "vsl/core/status.h"

namespace vsl::nbd {

enum class TlsMode : uint8_t {
  kOff,      // STARTTLS answered ERR_UNSUP
  kOn,       // STARTTLS offered; plaintext clients are served too
  kRequire,  // every export is refused (ERR_TLS_REQD) until STARTTLS
};

struct TlsConfig {
  TlsMode mode = TlsMode::kOff;
  std::string cert_file;  // PEM server certificate (X.509)
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA: when set, clients must present a certificate it signed
  std::string psk_file;   // psktool key file (PSK); may be combined with X.509
};

// Parses "off" / "on" / "require".
Result<TlsMode> ParseTlsMode(const std::string& s);

// Loaded credentials, shared by every connection. Thread-safe after Create.
class TlsContext {
 public:
  // InvalidArgument when the mode needs credentials and none are given, or a file cannot
  // be loaded (the message names the file and GnuTLS's reason).
  static Result<std::shared_ptr<TlsContext>> Create(const TlsConfig& cfg);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  const TlsConfig& config() const { return cfg_; }
  // Runs the server side of a handshake on connected socket `fd`; on success the returned
  // session (an opaque gnutls_session_t) carries the connection's records.
  Result<void*> Handshake(int fd) const;
  static void Close(void* session, bool graceful);

 private:
  TlsContext() = default;
  TlsConfig cfg_;
  void* x509_ = nullptr;  // gnutls_certificate_credentials_t
  void* psk_ = nullptr;   // gnutls_psk_server_credentials_t
};

}  // namespace vsl::nbd
