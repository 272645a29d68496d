#include "vsl/nbd/tls.h"

#include <gnutls/gnutls.h>

#include <fmt/format.h>

namespace vsl::nbd {
namespace {

// TLS 1.2 and 1.3 only; PSK key exchanges added when a key file is configured.
constexpr const char* kPriority = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
constexpr const char* kPriorityPsk =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:+ECDHE-PSK:+DHE-PSK:+PSK";
constexpr unsigned kHandshakeTimeoutMs = 10000;

struct GlobalInit {
  GlobalInit() { gnutls_global_init(); }
};

}  // namespace

Result<TlsMode> ParseTlsMode(const std::string& s) {
  if (s == "off") return TlsMode::kOff;
  if (s == "on") return TlsMode::kOn;
  if (s == "require") return TlsMode::kRequire;
  return Status::InvalidArgument(fmt::format("TLS mode '{}' is not one of off, on, require", s));
}

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsConfig& cfg) {
  static GlobalInit init;
  std::shared_ptr<TlsContext> t(new TlsContext());
  t->cfg_ = cfg;
  if (cfg.mode == TlsMode::kOff) return t;
  const bool x509 = !cfg.cert_file.empty() || !cfg.key_file.empty();
  if (!x509 && cfg.psk_file.empty()) {
    return Status::InvalidArgument("TLS needs a certificate and key (--tls-cert, --tls-key) or a PSK file (--tls-psk)");
  }
  if (x509) {
    if (cfg.cert_file.empty() || cfg.key_file.empty()) {
      return Status::InvalidArgument("an X.509 TLS setup needs both a certificate and its key");
    }
    gnutls_certificate_credentials_t c = nullptr;
    if (gnutls_certificate_allocate_credentials(&c) < 0) return Status::Internal("gnutls: out of memory");
    t->x509_ = c;
    int r = gnutls_certificate_set_x509_key_file(c, cfg.cert_file.c_str(), cfg.key_file.c_str(), GNUTLS_X509_FMT_PEM);
    if (r < 0) {
      return Status::InvalidArgument(fmt::format("cannot load TLS certificate {} with key {}: {}", cfg.cert_file,
                                                 cfg.key_file, gnutls_strerror(r)));
    }
    if (!cfg.ca_file.empty()) {
      r = gnutls_certificate_set_x509_trust_file(c, cfg.ca_file.c_str(), GNUTLS_X509_FMT_PEM);
      if (r <= 0) {
        return Status::InvalidArgument(fmt::format("cannot load TLS CA {}: {}", cfg.ca_file,
                                                   r == 0 ? "no certificate in it" : gnutls_strerror(r)));
      }
    }
  }
  if (!cfg.psk_file.empty()) {
    gnutls_psk_server_credentials_t p = nullptr;
    if (gnutls_psk_allocate_server_credentials(&p) < 0) return Status::Internal("gnutls: out of memory");
    t->psk_ = p;
    // GnuTLS reads the file at each handshake; check now that it is there and readable.
    FILE* f = std::fopen(cfg.psk_file.c_str(), "r");
    if (f == nullptr) return Status::InvalidArgument(fmt::format("cannot read TLS PSK file {}", cfg.psk_file));
    std::fclose(f);
    int r = gnutls_psk_set_server_credentials_file(p, cfg.psk_file.c_str());
    if (r < 0) {
      return Status::InvalidArgument(fmt::format("cannot use TLS PSK file {}: {}", cfg.psk_file, gnutls_strerror(r)));
    }
  }
  return t;
}

TlsContext::~TlsContext() {
  if (x509_ != nullptr) gnutls_certificate_free_credentials(static_cast<gnutls_certificate_credentials_t>(x509_));
  if (psk_ != nullptr) gnutls_psk_free_server_credentials(static_cast<gnutls_psk_server_credentials_t>(psk_));
}

Result<void*> TlsContext::Handshake(int fd) const {
  gnutls_session_t s = nullptr;
  if (gnutls_init(&s, GNUTLS_SERVER) < 0) return Status::Internal("gnutls_init failed");
  auto fail = [s](std::string what, int r) {
    gnutls_deinit(s);
    return Status::IOError(fmt::format("TLS {}: {}", what, gnutls_strerror(r)));
  };
  int r = gnutls_priority_set_direct(s, psk_ != nullptr ? kPriorityPsk : kPriority, nullptr);
  if (r < 0) return fail("priority", r);
  if (x509_ != nullptr) {
    r = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, x509_);
    if (r < 0) return fail("certificate credentials", r);
    if (!cfg_.ca_file.empty()) {
      gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
      gnutls_session_set_verify_cert(s, nullptr, 0);  // the handshake fails on a bad chain
    }
  }
  if (psk_ != nullptr) {
    r = gnutls_credentials_set(s, GNUTLS_CRD_PSK, psk_);
    if (r < 0) return fail("PSK credentials", r);
  }
  gnutls_transport_set_int(s, fd);
  gnutls_handshake_set_timeout(s, kHandshakeTimeoutMs);
  do {
    r = gnutls_handshake(s);
  } while (r < 0 && gnutls_error_is_fatal(r) == 0);
  if (r < 0) return fail("handshake", r);
  return static_cast<void*>(s);
}

void TlsContext::Close(void* session, bool graceful) {
  auto s = static_cast<gnutls_session_t>(session);
  if (graceful) gnutls_bye(s, GNUTLS_SHUT_WR);
  gnutls_deinit(s);
}

}  // namespace vsl::nbd
