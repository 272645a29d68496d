// CardServer: the simulated card as a process of its own, with a port per host per pipe
// (shared_card.h; the wire: shared_wire.h).
//
// Threads: an engine per pipe runs the card (as vsld's engines do for a card of its
// own); an accept thread; per connection a reader, which checks each message and hands
// the command to its pipe's engine, and a writer, which sends what the engine's
// completions queued. The engines never block on a host: a host that stops reading (a
// paused process) only grows its own connection's queue, and the card runs on for the
// others.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "vsl/card/shared_card.h"
#include "vsl/card/shared_wire.h"
#include "vsl/card/sim_backend.h"
#include "vsl/core/engine.h"
#include "vsl/core/log.h"
#include "vsl/core/socket.h"

namespace vsl::card {

namespace wire {

bool Send(int fd, const std::vector<uint8_t>& msg) {
  for (;;) {
    const ssize_t n = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(msg.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool Receive(int fd, std::vector<uint8_t>* msg) {
  // The next message's length first (a peek with MSG_TRUNC on a SOCK_SEQPACKET socket
  // copies nothing and returns the whole message's length), so `msg` is sized to it: a
  // buffer of kMaxMessage per message would cost an allocation and a 512 KiB fill for
  // every completion, most of which are a header.
  ssize_t len;
  do {
    len = ::recv(fd, nullptr, 0, MSG_PEEK | MSG_TRUNC);
  } while (len < 0 && errno == EINTR);
  if (len <= 0 || static_cast<std::size_t>(len) > kMaxMessage) return false;
  msg->resize(static_cast<std::size_t>(len));
  for (;;) {
    const ssize_t n = ::recv(fd, msg->data(), msg->size(), MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    // Only this thread reads the socket: the message peeked is the one received.
    if (n != len) return false;
    return true;
  }
}

}  // namespace wire

std::string SharedSocketPath(const std::string& dir) { return dir + "/card.sock"; }

namespace {

using nand::Completion;
using nand::FlashStatus;
using wire::Type;

// One host connection: a port on a pipe, or a control link.
struct Conn : std::enable_shared_from_this<Conn> {
  int fd = -1;
  wire::Link link = wire::Link::kPipe;
  uint32_t pipe = 0;
  uint32_t pid = 0;
  Engine* engine = nullptr;
  std::unique_ptr<nand::FlashPipe> port;  // on `engine`
  std::thread reader, writer;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<uint8_t>> out;
  bool closed = false;  // mu
  std::atomic<bool> finished{false};

  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
  // Any thread: queues `msg` for the writer (dropped once the connection is closed).
  void Queue(std::vector<uint8_t> msg) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (closed) return;
      out.push_back(std::move(msg));
    }
    cv.notify_one();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> l(mu);
      closed = true;
    }
    cv.notify_all();
    ::shutdown(fd, SHUT_RDWR);
  }
  void WriteLoop() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [this] { return closed || !out.empty(); });
      if (out.empty()) return;
      std::vector<uint8_t> m = std::move(out.front());
      out.pop_front();
      l.unlock();
      const bool ok = wire::Send(fd, m);
      l.lock();
      if (!ok) {
        closed = true;
        out.clear();
        return;
      }
    }
  }
};

std::vector<uint8_t> CompletionOf(Type t, uint64_t tag, const Completion& c, const void* a = nullptr,
                                  std::size_t alen = 0, const void* b = nullptr, std::size_t blen = 0) {
  wire::CompletionMsg m;
  m.h.type = static_cast<uint8_t>(t);
  m.h.tag = tag;
  m.status = static_cast<uint8_t>(c.status);
  m.corrected_bits = c.corrected_bits;
  const bool ok = c.status == FlashStatus::kOk;
  m.payload = ok ? static_cast<uint32_t>(alen + blen) : 0;
  return ok ? wire::Pack(m, a, alen, b, blen) : wire::Pack(m);
}

std::vector<uint8_t> OwnerOf(uint64_t tag, bool granted, const nand::PipeOwner& o, TimeNs now) {
  wire::OwnerMsg m;
  m.h.type = static_cast<uint8_t>(Type::kOwnerIs);
  m.h.tag = tag;
  m.granted = granted ? 1 : 0;
  m.host = o.host;
  m.generation = o.generation;
  m.lease_left_ns = o.lease_until == kTimeNever ? INT64_MAX
                    : o.lease_until > now       ? static_cast<int64_t>(o.lease_until - now)
                                                : 0;
  return wire::Pack(m);
}

}  // namespace

struct CardServer::Impl {
  std::string dir, socket;
  CardServerOptions opts;
  std::vector<std::unique_ptr<EngineThread>> engines;
  std::unique_ptr<CardBackend> backend;
  int listen_fd = -1;
  std::thread acceptor, saver;
  std::mutex mu;  // conns, stopping
  std::condition_variable stop_cv;
  bool stopping = false;
  std::vector<std::shared_ptr<Conn>> conns;
  std::atomic<uint64_t> malformed{0};

  ~Impl() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu);
      if (stopping) return;
      stopping = true;
    }
    stop_cv.notify_all();
    if (listen_fd >= 0) ::shutdown(listen_fd, SHUT_RDWR);
    if (acceptor.joinable()) acceptor.join();
    if (saver.joinable()) saver.join();
    if (listen_fd >= 0) ::close(listen_fd);
    listen_fd = -1;
    std::vector<std::shared_ptr<Conn>> all;
    {
      std::lock_guard<std::mutex> l(mu);
      all.swap(conns);
    }
    for (auto& c : all) c->Close();
    for (auto& c : all) Join(*c);
    // The ports go on their engines (their pipes' state lives there), then the card.
    for (auto& c : all) {
      if (c->port) engines.at(c->pipe)->RunSync([c] { c->port.reset(); });
    }
    all.clear();
    if (backend) backend->Stop();
    engines.clear();  // their clocks held the card's pending events
    backend.reset();
    if (!socket.empty()) ::unlink(socket.c_str());
    Logger("card-server")->info("card {} closed", dir);
  }

  static void Join(Conn& c) {
    if (c.reader.joinable()) c.reader.join();
    if (c.writer.joinable()) c.writer.join();
  }

  void AcceptLoop() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      auto c = std::make_shared<Conn>();
      c->fd = fd;
      std::lock_guard<std::mutex> l(mu);
      if (stopping) return;  // c closes its fd
      // Finished connections leave (their threads are done).
      for (auto it = conns.begin(); it != conns.end();) {
        if ((*it)->finished) {
          Join(**it);
          if ((*it)->port) {
            auto dead = *it;
            engines.at(dead->pipe)->engine().Send([dead] { dead->port.reset(); });
          }
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
      conns.push_back(c);
      c->writer = std::thread([c] { c->WriteLoop(); });
      c->reader = std::thread([this, c] {
        ReadLoop(*c);
        c->Close();
        c->finished = true;
      });
    }
  }

  void SaveLoop() {
    std::unique_lock<std::mutex> l(mu);
    while (!stop_cv.wait_for(l, std::chrono::nanoseconds(opts.save_every_ns), [this] { return stopping; })) {
      l.unlock();
      backend->SaveLifetime();
      l.lock();
    }
  }

  void Malformed(const Conn& c, const std::string& why) {
    ++malformed;
    Logger("card-server")->error("host pid {} ({} link{}): malformed message: {}; connection closed", c.pid,
                                 c.link == wire::Link::kPipe ? "pipe" : "control",
                                 c.link == wire::Link::kPipe ? fmt::format(" of pipe {}", c.pipe) : "", why);
  }

  void ReadLoop(Conn& c) {
    std::vector<uint8_t> msg;
    if (!wire::Receive(c.fd, &msg)) return;
    wire::Hello hello;
    if (!wire::Unpack(msg, &hello) || hello.h.type != static_cast<uint8_t>(Type::kHello) ||
        hello.magic != wire::kMagic || hello.version != wire::kVersion) {
      c.Queue(wire::Text(Type::kRefused, 0, "not an OpenVSL port hello of this version"));
      ++malformed;
      return WaitSent(c);
    }
    c.pid = hello.pid;
    c.link = static_cast<wire::Link>(hello.link);
    if (c.link == wire::Link::kControl) {
      c.Queue(wire::Text(Type::kWelcome, hello.h.tag, Describe().dump()));
      while (wire::Receive(c.fd, &msg)) {
        wire::Header h;
        if (!wire::Unpack(msg, &h) || h.type != static_cast<uint8_t>(Type::kControl)) {
          return Malformed(c, "expected a control request");
        }
        nlohmann::json reply;
        try {
          reply = Control(nlohmann::json::parse(wire::TextOf(msg)));
        } catch (const std::exception& e) {
          reply = {{"ok", false}, {"error", fmt::format("bad control request: {}", e.what())}};
        }
        c.Queue(wire::Text(Type::kControlReply, h.tag, reply.dump()));
      }
      return;
    }
    if (c.link != wire::Link::kPipe || hello.pipe >= backend->pipe_count()) {
      c.Queue(wire::Text(Type::kRefused, hello.h.tag,
                         fmt::format("no pipe {} on this card ({} pipes)", hello.pipe, backend->pipe_count())));
      return WaitSent(c);
    }
    c.pipe = hello.pipe;
    c.engine = &engines.at(c.pipe)->engine();
    Result<std::unique_ptr<nand::FlashPipe>> port = Status::Internal("no port");
    engines.at(c.pipe)->RunSync([&] { port = backend->NewPort(c.pipe); });
    if (!port.ok()) {
      c.Queue(wire::Text(Type::kRefused, hello.h.tag, port.status().ToString()));
      return WaitSent(c);
    }
    c.port = std::move(port).value();
    const nand::Geometry& g = backend->geometry();
    wire::WelcomePipe w;
    w.h.type = static_cast<uint8_t>(Type::kWelcome);
    w.h.tag = hello.h.tag;
    w.topology = c.port->topology();
    w.stage_slots = c.port->stage_slots();
    w.copy_accumulators = c.port->copy_accumulators();
    w.page_data_bytes = g.page_data_bytes;
    w.meta_bytes = g.meta_bytes_per_page();
    w.plp = static_cast<uint8_t>(c.port->plp_state());
    w.offers_ownership = c.port->offers_ownership() ? 1 : 0;
    c.Queue(wire::Pack(w));
    Logger("card-server")->info("host pid {}: port on pipe {}", c.pid, c.pipe);
    auto self = c.shared_from_this();
    while (wire::Receive(c.fd, &msg)) {
      const std::string bad = Command(self, std::move(msg));
      if (!bad.empty()) return Malformed(c, bad);
      msg = {};
    }
    Logger("card-server")->info("host pid {}: port on pipe {} closed", c.pid, c.pipe);
  }

  // Lets a refusal reach the host before the connection closes.
  static void WaitSent(Conn& c) {
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> l(c.mu);
        if (c.out.empty() || c.closed) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Checks one pipe command and hands it to the pipe's engine; a reason when malformed.
  std::string Command(const std::shared_ptr<Conn>& c, std::vector<uint8_t> m) {
    wire::Header h;
    if (!wire::Unpack(m, &h)) return "shorter than a header";
    const nand::Geometry& g = backend->geometry();
    const uint32_t data_bytes = g.page_data_bytes, meta_bytes = g.meta_bytes_per_page();
    const uint64_t tag = h.tag;
    auto buf = std::make_shared<std::vector<uint8_t>>(std::move(m));
    switch (static_cast<Type>(h.type)) {
      case Type::kRead: {
        wire::ReadMsg r;
        if (!wire::Unpack(*buf, &r) || buf->size() != sizeof(r)) return "read: wrong length";
        const uint32_t cws = g.codewords_per_page();
        if (r.sector_count > cws) return fmt::format("read: {} codewords of a {}-codeword page", r.sector_count, cws);
        const uint32_t dlen = r.want_data ? (r.sector_count == 0 ? cws : r.sector_count) * g.ecc_codeword_bytes : 0;
        const uint32_t mlen = r.want_meta ? meta_bytes : 0;
        c->engine->Send([c, r, dlen, mlen, tag] {
          auto out = std::make_shared<std::vector<uint8_t>>(dlen + mlen);
          nand::ReadRequest q;
          q.ppa = r.ppa;
          q.first_sector = r.first_sector;
          q.sector_count = r.sector_count;
          q.data = dlen != 0 ? out->data() : nullptr;
          q.meta = mlen != 0 ? out->data() + dlen : nullptr;
          c->port->Read(q, [c, out, tag](const Completion& cc) {
            c->Queue(CompletionOf(Type::kDone, tag, cc, out->data(), out->size()));
          });
        });
        return {};
      }
      case Type::kProgram:
      case Type::kStage: {
        wire::ProgramMsg p;
        if (!wire::Unpack(*buf, &p)) return "program: too short";
        if (buf->size() != sizeof(p) + (p.has_data ? data_bytes : 0) + (p.has_meta ? meta_bytes : 0)) {
          return "program: length does not match its data and metadata";
        }
        if (p.acc_op > static_cast<uint8_t>(nand::AccOp::kPeek)) return "program: unknown accumulator operation";
        nand::ProgramRequest q;
        q.ppa = p.ppa;
        q.data = p.has_data ? buf->data() + sizeof(p) : nullptr;
        q.meta = p.has_meta ? buf->data() + sizeof(p) + (p.has_data ? data_bytes : 0) : nullptr;
        q.fence = p.fence != 0;
        q.acc = p.acc;
        q.acc_op = static_cast<nand::AccOp>(p.acc_op);
        q.acc_meta_at = p.acc_meta_at;
        q.acc_meta_len = p.acc_meta_len;
        q.acc_crc_at = p.acc_crc_at;
        if (q.acc_meta_len != 0 &&
            (uint32_t{q.acc_meta_at} + q.acc_meta_len > meta_bytes || q.acc_crc_at + 4u > meta_bytes)) {
          return "program: accumulator metadata outside the page's metadata";
        }
        const bool stage = h.type == static_cast<uint8_t>(Type::kStage);
        c->engine->Send([c, buf, q, tag, stage, slot = p.slot] {
          auto accepted = [c, buf, tag](const Completion& cc) { c->Queue(CompletionOf(Type::kAccepted, tag, cc)); };
          auto done = [c, buf, tag](const Completion& cc) { c->Queue(CompletionOf(Type::kDone, tag, cc)); };
          if (stage) {
            c->port->Stage(slot, q, std::move(accepted), std::move(done));
          } else {
            c->port->Program(q, std::move(accepted), std::move(done));
          }
        });
        return {};
      }
      case Type::kCopy: {
        wire::CopyMsg p;
        if (!wire::Unpack(*buf, &p)) return "copy: too short";
        if (buf->size() != sizeof(p) + (p.has_meta ? meta_bytes : 0) + (p.has_fail_meta ? meta_bytes : 0)) {
          return "copy: length does not match its metadata";
        }
        if (p.segment_count > nand::kMaxCopySegments) return "copy: too many segments";
        nand::CopyRequest q;
        q.src = p.src;
        q.dst = p.dst;
        q.acc = p.acc;
        q.segment_count = p.segment_count;
        std::copy(p.segments, p.segments + nand::kMaxCopySegments, q.segments);
        q.meta = p.has_meta ? buf->data() + sizeof(p) : nullptr;
        q.fail_meta = p.has_fail_meta ? buf->data() + sizeof(p) + (p.has_meta ? meta_bytes : 0) : nullptr;
        c->engine->Send([c, buf, q, tag] {
          c->port->Copy(
              q, [c, buf, tag](const Completion& cc) { c->Queue(CompletionOf(Type::kAccepted, tag, cc)); },
              [c, buf, tag](const Completion& cc) { c->Queue(CompletionOf(Type::kDone, tag, cc)); });
        });
        return {};
      }
      case Type::kErase:
      case Type::kReset:
      case Type::kReadId:
      case Type::kParam: {
        wire::DieMsg d;
        if (!wire::Unpack(*buf, &d) || buf->size() != sizeof(d)) return "die command: wrong length";
        if (d.len > 64 * 1024) return "die command: reply longer than 64 KiB";
        const Type t = static_cast<Type>(h.type);
        c->engine->Send([c, d, tag, t] {
          auto done = [c, tag](const Completion& cc) { c->Queue(CompletionOf(Type::kDone, tag, cc)); };
          if (t == Type::kErase) return c->port->Erase(d.die, d.block, std::move(done));
          if (t == Type::kReset) return c->port->Reset(d.die, std::move(done));
          auto out = std::make_shared<std::vector<uint8_t>>(d.len);
          auto with = [c, tag, out](const Completion& cc) {
            c->Queue(CompletionOf(Type::kDone, tag, cc, out->data(), out->size()));
          };
          if (t == Type::kReadId) return c->port->ReadId(d.die, d.address, out->data(), d.len, std::move(with));
          c->port->ReadParameterPage(d.die, out->data(), d.len, std::move(with));
        });
        return {};
      }
      case Type::kClearStage:
      case Type::kClearAcc:
      case Type::kClaim:
      case Type::kRenew:
      case Type::kRelease:
      case Type::kOwner: {
        wire::ValueMsg v;
        if (!wire::Unpack(*buf, &v) || buf->size() != sizeof(v)) return "wrong length";
        const Type t = static_cast<Type>(h.type);
        c->engine->Send([c, v, tag, t] {
          nand::FlashPipe& port = *c->port;
          const TimeNs now = c->engine->Now();
          switch (t) {
            case Type::kClearStage: return port.ClearStage(v.value);
            case Type::kClearAcc: return port.ClearAccumulator(v.value);
            case Type::kClaim: {
              const nand::ClaimReply r = port.Claim(v.host, v.force != 0, v.lease_ns);
              Logger("card-server")->info("pipe {}: host {} (pid {}) claims{}: {} (owner host {}, generation {})",
                                          c->pipe, v.host, c->pid, v.force ? " with force" : "",
                                          r.granted ? "granted" : "refused", r.owner.host, r.owner.generation);
              return c->Queue(OwnerOf(tag, r.granted, r.owner, now));
            }
            case Type::kRenew: {
              const bool ok = port.Renew(v.lease_ns);
              return c->Queue(OwnerOf(tag, ok, port.owner(), now));
            }
            case Type::kRelease:
              port.Release();
              return c->Queue(OwnerOf(tag, true, port.owner(), now));
            default:
              return c->Queue(OwnerOf(tag, true, port.owner(), now));
          }
        });
        return {};
      }
      default:
        return fmt::format("unknown message type {}", h.type);
    }
  }

  // What a host needs of the card before it lays out its LUNs.
  nlohmann::json Describe() {
    const CardBackend& b = *backend;
    nlohmann::json j;
    j["geometry"] = b.geometry();
    j["timing"] = b.timing();
    j["power"] = b.power_model();
    j["reliability"] = b.reliability();
    j["ecc_mode"] = b.ecc_mode();
    j["zero_time"] = b.zero_time();
    j["plp"] = static_cast<int>(b.plp_state());
    nlohmann::json modes = nlohmann::json::array(), ids = nlohmann::json::array();
    for (uint32_t c = 0; c < b.geometry().controllers; ++c) {
      modes.push_back(b.pipe_mode(c));
      const ControllerIdentity id = b.identity(c);
      ids.push_back({{"serial", id.serial},
                     {"model", id.model},
                     {"profile", id.profile},
                     {"firmware_version", id.firmware_version},
                     {"hardware", "shared card (vslflash serve): " + id.hardware}});
    }
    j["pipe_modes"] = modes;
    j["identity"] = ids;
    return j;
  }

  // One control request: {"cmd": ..., args}; {"ok": true, "result": ...} or {"ok": false, "error": "..."}.
  // Each connection's requests are served in order by its reader; the backend's calls
  // used here are safe from any thread (those of a pipe run on its engine), so hosts do
  // not wait for one another.
  nlohmann::json Control(const nlohmann::json& req) {
    CardBackend& b = *backend;
    const std::string cmd = req.at("cmd").get<std::string>();
    auto ok = [](nlohmann::json r) { return nlohmann::json{{"ok", true}, {"result", std::move(r)}}; };
    auto err = [](const Status& s) { return nlohmann::json{{"ok", false}, {"error", s.ToString()}}; };
    const uint32_t nc = b.geometry().controllers;
    auto controller = [&]() -> uint32_t {
      const uint32_t c = req.at("controller").get<uint32_t>();
      if (c >= nc) throw std::out_of_range(fmt::format("no controller {}", c));
      return c;
    };
    auto pipe = [&]() -> uint32_t {
      const uint32_t p = req.at("pipe").get<uint32_t>();
      if (p >= b.pipe_count()) throw std::out_of_range(fmt::format("no pipe {}", p));
      return p;
    };
    if (cmd == "read_power") return ok(b.ReadPower(controller()));
    if (cmd == "environment") return ok(b.environment());
    if (cmd == "set_environment") {
      const Status s = b.SetEnvironment(req.at("environment").get<model::Environment>());
      return s.ok() ? ok(nullptr) : err(s);
    }
    if (cmd == "set_low_power") {
      b.SetLowPower(controller(), req.at("on").get<bool>());
      return ok(nullptr);
    }
    if (cmd == "lifetime") return ok(b.lifetime(controller()));
    if (cmd == "account_host_io") {
      b.AccountHostIo(controller(), req.at("read").get<uint64_t>(), req.at("write").get<uint64_t>());
      return ok(nullptr);
    }
    if (cmd == "count_thermal_shutdown") {
      b.CountThermalShutdown(controller());
      return ok(nullptr);
    }
    if (cmd == "save_lifetime") {
      b.SaveLifetime();
      return ok(nullptr);
    }
    if (cmd == "power_cycles") {
      const auto pc = b.power_cycles(controller());
      return ok({{"power_on_count", pc.power_on_count}, {"unsafe_power_offs", pc.unsafe_power_offs}});
    }
    if (cmd == "plp_state") return ok(static_cast<int>(b.plp_state()));
    if (cmd == "pipe_counters") {
      const uint32_t p = pipe();
      model::DieCounters d;
      engines.at(p)->RunSync([&] { d = b.PipeCounters(p); });
      return ok(d);
    }
    if (cmd == "health") {
      return ok(b.Health(controller(), req.at("per_pipe").get<std::vector<model::DieCounters>>()));
    }
    if (cmd == "inject_die_failure") {
      const uint32_t p = pipe();
      Status s;
      engines.at(p)->RunSync([&] { s = b.InjectDieFailure(p, req.at("die").get<uint32_t>()); });
      return s.ok() ? ok(nullptr) : err(s);
    }
    if (cmd == "set_pipe_mode") {
      const uint32_t c = controller();
      const uint8_t mode = req.at("mode").get<uint8_t>();
      if (mode == b.pipe_mode(c)) return ok(nullptr);
      return err(Status::FailedPrecondition(fmt::format(
          "controller {}'s pipe mode is not changed on a shared card: stop vslflash serve and format it from "
          "one host",
          c)));
    }
    return err(Status::InvalidArgument(fmt::format("unknown control request '{}'", cmd)));
  }
};

CardServer::CardServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CardServer::~CardServer() = default;
const std::string& CardServer::socket_path() const { return impl_->socket; }
CardBackend& CardServer::backend() { return *impl_->backend; }
uint64_t CardServer::malformed() const { return impl_->malformed; }
uint32_t CardServer::connections() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  uint32_t n = 0;
  for (const auto& c : impl_->conns) n += c->finished ? 0 : 1;
  return n;
}

Result<std::unique_ptr<CardServer>> CardServer::Start(const std::string& dir, const CardServerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->opts = opts;
  VSL_ASSIGN_OR_RETURN(impl->backend, MakeSimBackend(dir, opts.sim));
  const uint32_t pipes = impl->backend->pipe_count();
  std::vector<Clock*> clocks;
  for (uint32_t p = 0; p < pipes; ++p) {
    impl->engines.push_back(std::make_unique<EngineThread>(fmt::format("card-pipe{}", p)));
    clocks.push_back(&impl->engines.back()->engine().clock());
  }
  struct NoRunner final : PipeRunner {
    Status Call(uint32_t, Function<void(Function<void(Status)>)>) override {
      return Status::Internal("the simulated card runs nothing at start");
    }
  } runner;
  Status s = impl->backend->Start(clocks, runner);
  if (!s.ok()) {
    impl->engines.clear();
    impl->backend.reset();
    return s;
  }
  impl->socket = opts.socket.empty() ? SharedSocketPath(dir) : opts.socket;
  auto fd = ListenUnix(impl->socket, opts.socket_mode, "vslflash serve", SOCK_SEQPACKET);
  if (!fd.ok()) {
    impl->socket.clear();  // not ours to unlink
    return fd.status();
  }
  impl->listen_fd = *fd;
  Impl* p = impl.get();
  impl->acceptor = std::thread([p] { p->AcceptLoop(); });
  impl->saver = std::thread([p] { p->SaveLoop(); });
  Logger("card-server")->info("card {} served on {} ({} pipes)", dir, impl->socket, pipes);
  return std::unique_ptr<CardServer>(new CardServer(std::move(impl)));
}

}  // namespace vsl::card
