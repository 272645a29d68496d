#include "vsl/monitor/http.h"

#include <arpa/inet.h>

#include <httplib.h>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/monitor/monitor.h"

namespace vsl::monitor {

using json = nlohmann::json;

Result<std::pair<std::string, int>> ParseListen(const std::string& s) {
  std::string host = "127.0.0.1", port = s;
  if (!s.empty() && s[0] == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      return Status::InvalidArgument(fmt::format("--http '{}': expected [V6]:PORT", s));
    }
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else if (const auto colon = s.rfind(':'); colon != std::string::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535 || host.empty()) {
    return Status::InvalidArgument(fmt::format("--http '{}': expected PORT, HOST:PORT or [V6]:PORT", s));
  }
  return std::make_pair(host, static_cast<int>(p));
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Monitor& m, const HttpConfig& cfg) {
  VSL_ASSIGN_OR_RETURN(auto hp, ParseListen(cfg.listen));
  auto [host, port] = hp;
  if (!IsLoopback(host) && !cfg.allow_remote) {
    return Status::InvalidArgument(fmt::format(
        "--http {}: {} is not a loopback address; the monitor serves other hosts only with --http-allow-remote",
        cfg.listen, host));
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  if (!cfg.cert_file.empty() || !cfg.key_file.empty()) {
    if (cfg.cert_file.empty() || cfg.key_file.empty()) {
      return Status::InvalidArgument("HTTPS needs both a certificate and its key (--tls-cert, --tls-key)");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(cfg.cert_file.c_str(), cfg.key_file.c_str());
    if (!ssl->is_valid()) {
      return Status::InvalidArgument(fmt::format("HTTPS: cannot load certificate {} with key {}", cfg.cert_file,
                                                 cfg.key_file));
    }
    s->svr_ = std::move(ssl);
    s->tls_ = true;
  } else {
    s->svr_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& svr = *s->svr_;
  svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
  svr.set_read_timeout(5);
  svr.set_write_timeout(5);
  // Only GET (and HEAD, its bodiless form): nothing here changes state.
  svr.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD") return httplib::Server::HandlerResponse::Unhandled;
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("only GET is served here\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  Monitor* mon = &m;
  auto fail = [](httplib::Response& res, const Status& st) {
    res.status = 503;
    res.set_content(st.ToString() + "\n", "text/plain");
  };
  svr.Get("/metrics", [mon, fail](const httplib::Request&, httplib::Response& res) {
    auto r = mon->Metrics();
    if (!r.ok()) return fail(res, r.status());
    res.set_content(*r, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardHtml, "text/html; charset=utf-8");
  });
  svr.Get("/api/state", [mon](const httplib::Request&, httplib::Response& res) {
    res.set_content(mon->StateJson().dump(), "application/json");
  });
  svr.Get("/api/status", [mon, fail](const httplib::Request&, httplib::Response& res) {
    auto r = mon->Status();
    if (!r.ok()) return fail(res, r.status());
    res.set_content(r->dump(), "application/json");
  });
  svr.Get("/api/history", [mon](const httplib::Request& req, httplib::Response& res) {
    json q = json::object();
    try {
      if (req.has_param("card")) q["card"] = std::stoll(req.get_param_value("card"));
      if (req.has_param("tier")) q["tier"] = req.get_param_value("tier");
      if (req.has_param("since")) q["since"] = std::stod(req.get_param_value("since"));
      if (req.has_param("max")) q["max"] = std::stoll(req.get_param_value("max"));
    } catch (const std::exception&) {
      res.status = 400;
      res.set_content("card, since and max must be numbers\n", "text/plain");
      return;
    }
    auto r = mon->HistoryJson(q);
    if (!r.ok()) {
      res.status = 400;
      res.set_content(r.status().ToString() + "\n", "text/plain");
      return;
    }
    res.set_content(r->dump(), "application/json");
  });
  if (port == 0) {
    port = svr.bind_to_any_port(host);
    if (port <= 0) return Status::IOError(fmt::format("--http {}: cannot bind {}", cfg.listen, host));
  } else if (!svr.bind_to_port(host, port)) {
    return Status::IOError(fmt::format("--http {}: cannot bind (in use, or no such address)", cfg.listen));
  }
  s->host_ = host;
  s->port_ = port;
  s->thread_ = std::thread([&svr] { svr.listen_after_bind(); });
  Logger("monitor")->info("serving {}://{}:{}/ (dashboard) and /metrics", s->tls_ ? "https" : "http",
                          host.find(':') != std::string::npos ? "[" + host + "]" : host, port);
  return s;
}

HttpServer::~HttpServer() {
  if (svr_) svr_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace vsl::monitor
