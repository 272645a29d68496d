// A host's side of a shared card (shared_card.h): each pipe is a RemotePipe, one host's
// port on the card server; sensors, lifetime and health go over the control link.
//
// Threads: a RemotePipe is called on its pipe's engine, like any FlashPipe; a reader
// thread per port receives the card's replies and hands completions to that engine
// (RealClock::Submit), so callbacks run on the engine as the contract says. The claim,
// renew, release and owner calls wait on the engine for the card's answer (the reader
// answers them directly: the engine is the one waiting).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "vsl/card/shared_card.h"
#include "vsl/card/shared_wire.h"
#include "vsl/core/log.h"

namespace vsl::card {
namespace {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;
using wire::Type;

// How long a host waits for the card to answer a claim or a control request before it
// takes the card for gone.
constexpr auto kAnswerTimeout = std::chrono::seconds(10);

Result<int> Connect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return Status::InvalidArgument(fmt::format("socket path {} is too long", path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::NotFound(fmt::format("no card server answers on {} ({}): start one with `vslflash serve DIR`",
                                        path, std::strerror(e)));
  }
  return fd;
}

// Sends `hello` on a new connection to `path` and returns the welcome.
Result<std::pair<int, std::vector<uint8_t>>> Greet(const std::string& path, wire::Link link, uint32_t pipe) {
  VSL_ASSIGN_OR_RETURN(int fd, Connect(path));
  wire::Hello h;
  h.h.type = static_cast<uint8_t>(Type::kHello);
  h.link = static_cast<uint16_t>(link);
  h.pipe = pipe;
  h.pid = static_cast<uint32_t>(::getpid());
  std::vector<uint8_t> msg;
  wire::Header rh;
  if (!wire::Send(fd, wire::Pack(h)) || !wire::Receive(fd, &msg) || !wire::Unpack(msg, &rh)) {
    ::close(fd);
    return Status::IOError(fmt::format("the card server on {} closed the connection at hello", path));
  }
  if (rh.type == static_cast<uint8_t>(Type::kRefused)) {
    ::close(fd);
    return Status::FailedPrecondition(fmt::format("the card server refused: {}", wire::TextOf(msg)));
  }
  if (rh.type != static_cast<uint8_t>(Type::kWelcome)) {
    ::close(fd);
    return Status::IOError("the card server answered hello with something else");
  }
  return std::make_pair(fd, std::move(msg));
}

class RemotePipe final : public nand::FlashPipe {
 public:
  RemotePipe(int fd, const wire::WelcomePipe& w, Clock& clock, uint32_t index)
      : fd_(fd), w_(w), clock_(&clock), index_(index) {
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~RemotePipe() override {
    Shutdown();
    ::close(fd_);
  }
  // Before the engine's clock stops: the reader hands it nothing more.
  void Shutdown() {
    if (closing_.exchange(true)) return;
    ::shutdown(fd_, SHUT_RDWR);
    reader_.join();
  }

  const nand::PipeTopology& topology() const override { return w_.topology; }
  nand::PlpState plp_state() const override { return static_cast<nand::PlpState>(w_.plp); }
  uint32_t stage_slots() const override { return w_.stage_slots; }
  uint32_t copy_accumulators() const override { return w_.copy_accumulators; }
  bool offers_ownership() const override { return w_.offers_ownership != 0; }

  void Read(const nand::ReadRequest& req, FlashCallback done) override {
    wire::ReadMsg m;
    m.h = Head(Type::kRead);
    m.ppa = req.ppa;
    m.first_sector = req.first_sector;
    m.sector_count = req.sector_count;
    m.want_data = req.data != nullptr;
    m.want_meta = req.meta != nullptr;
    Pending p;
    p.done = std::move(done);
    p.data = req.data;
    p.dlen = req.data ? (req.sector_count == 0 ? w_.page_data_bytes : req.sector_count * w_.topology.ecc_codeword_bytes) : 0;
    p.meta = req.meta;
    p.mlen = req.meta ? w_.meta_bytes : 0;
    Issue(m.h.tag, std::move(p), wire::Pack(m));
  }
  void Program(const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    Put(Type::kProgram, 0, req, std::move(accepted), std::move(done));
  }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    Put(Type::kStage, slot, req, std::move(accepted), std::move(done));
  }
  void Erase(uint32_t die, uint32_t block, FlashCallback done) override {
    DieCommand(Type::kErase, die, block, 0, nullptr, 0, std::move(done));
  }
  void Reset(uint32_t die, FlashCallback done) override { DieCommand(Type::kReset, die, 0, 0, nullptr, 0, std::move(done)); }
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, FlashCallback done) override {
    DieCommand(Type::kReadId, die, 0, address, out, len, std::move(done));
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) override {
    DieCommand(Type::kParam, die, 0, 0, out, len, std::move(done));
  }
  void ClearStage(uint32_t slot) override { Value(Type::kClearStage, slot); }
  void ClearAccumulator(uint32_t acc) override { Value(Type::kClearAcc, acc); }
  void Copy(const nand::CopyRequest& req, FlashCallback accepted, FlashCallback done) override {
    wire::CopyMsg m;
    m.h = Head(Type::kCopy);
    m.src = req.src;
    m.dst = req.dst;
    m.acc = req.acc;
    m.segment_count = req.segment_count;
    std::copy(req.segments, req.segments + nand::kMaxCopySegments, m.segments);
    m.has_meta = req.meta != nullptr;
    m.has_fail_meta = req.fail_meta != nullptr;
    Pending p;
    p.accepted = std::move(accepted);
    p.done = std::move(done);
    Issue(m.h.tag, std::move(p),
          wire::Pack(m, req.meta, req.meta ? w_.meta_bytes : 0, req.fail_meta, req.fail_meta ? w_.meta_bytes : 0));
  }

  nand::ClaimReply Claim(uint32_t host, bool force, DurNs lease) override {
    wire::ValueMsg m;
    m.h = Head(Type::kClaim);
    m.host = host;
    m.force = force ? 1 : 0;
    m.lease_ns = lease;
    nand::ClaimReply r;
    const auto o = Ask(m);
    if (!o) return r;
    r.granted = o->granted != 0;
    r.owner = OwnerFrom(*o);
    return r;
  }
  bool Renew(DurNs lease) override {
    wire::ValueMsg m;
    m.h = Head(Type::kRenew);
    m.lease_ns = lease;
    const auto o = Ask(m);
    return o && o->granted != 0;
  }
  void Release() override {
    wire::ValueMsg m;
    m.h = Head(Type::kRelease);
    (void)Ask(m);
  }
  nand::PipeOwner owner() const override {
    wire::ValueMsg m;
    m.h = Head(Type::kOwner);
    const auto o = Ask(m);
    return o ? OwnerFrom(*o) : nand::PipeOwner{};
  }

  void Rebind(Clock& clock) { clock_.store(&clock); }
  bool lost() const { return lost_.load(); }

 private:
  struct Pending {
    FlashCallback accepted, done;
    uint8_t* data = nullptr;
    uint8_t* meta = nullptr;
    uint32_t dlen = 0, mlen = 0;
    TimeNs submit = 0;
  };

  wire::Header Head(Type t) const {
    wire::Header h;
    h.type = static_cast<uint8_t>(t);
    h.tag = ++next_tag_;
    return h;
  }

  void Put(Type t, uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) {
    wire::ProgramMsg m;
    m.h = Head(t);
    m.ppa = req.ppa;
    m.acc = req.acc;
    m.slot = slot;
    m.fence = req.fence;
    m.acc_op = static_cast<uint8_t>(req.acc_op);
    m.has_data = req.data != nullptr;
    m.has_meta = req.meta != nullptr;
    m.acc_meta_at = req.acc_meta_at;
    m.acc_meta_len = req.acc_meta_len;
    m.acc_crc_at = req.acc_crc_at;
    Pending p;
    p.accepted = std::move(accepted);
    p.done = std::move(done);
    // The data crosses now: the caller's buffers are free once this returns (they must
    // stay valid only until `accepted`, which is later).
    Issue(m.h.tag, std::move(p),
          wire::Pack(m, req.data, req.data ? w_.page_data_bytes : 0, req.meta, req.meta ? w_.meta_bytes : 0));
  }

  void DieCommand(Type t, uint32_t die, uint32_t block, uint8_t address, uint8_t* out, uint32_t len,
                  FlashCallback done) {
    wire::DieMsg m;
    m.h = Head(t);
    m.die = die;
    m.block = block;
    m.address = address;
    m.len = out ? len : 0;
    Pending p;
    p.done = std::move(done);
    p.data = out;
    p.dlen = out ? len : 0;
    Issue(m.h.tag, std::move(p), wire::Pack(m));
  }

  void Value(Type t, uint32_t v) {
    if (lost_) return;
    wire::ValueMsg m;
    m.h = Head(t);
    m.value = v;
    if (!wire::Send(fd_, wire::Pack(m))) Lose("the card server is gone");
  }

  void Issue(uint64_t tag, Pending p, const std::vector<uint8_t>& msg) {
    p.submit = clock_.load()->Now();
    if (lost_) {
      // The card is gone: the command ends as a power loss would end it.
      Clock* c = clock_.load();
      c->Post([done = std::move(p.done), submit = p.submit, c]() mutable {
        Completion cc;
        cc.status = FlashStatus::kAborted;
        cc.submit_ns = submit;
        cc.complete_ns = c->Now();
        done(cc);
      });
      return;
    }
    pending_.emplace(tag, std::move(p));
    if (!wire::Send(fd_, msg)) Lose("the card server is gone");
  }

  // On the engine: every command outstanding ends kAborted, and so will every new one.
  void Lose(const std::string& why) {
    if (!lost_.exchange(true)) Logger("shared-card")->error("pipe {}: {}; its commands end aborted", index_, why);
    auto all = std::move(pending_);
    pending_.clear();
    for (auto& [tag, p] : all) {
      Completion cc;
      cc.status = FlashStatus::kAborted;
      cc.submit_ns = p.submit;
      cc.complete_ns = clock_.load()->Now();
      p.done(cc);
    }
  }

  std::optional<wire::OwnerMsg> Ask(const wire::ValueMsg& m) const {
    if (lost_) return std::nullopt;
    std::unique_lock<std::mutex> l(ask_mu_);
    ask_tag_ = m.h.tag;
    answer_.reset();
    if (!wire::Send(fd_, wire::Pack(m))) return std::nullopt;
    if (!ask_cv_.wait_for(l, kAnswerTimeout, [this] { return answer_.has_value() || lost_; })) {
      Logger("shared-card")->error("pipe {}: the card did not answer an ownership request in {} s", index_,
                                   std::chrono::duration_cast<std::chrono::seconds>(kAnswerTimeout).count());
      return std::nullopt;
    }
    return answer_;
  }

  nand::PipeOwner OwnerFrom(const wire::OwnerMsg& o) const {
    nand::PipeOwner w;
    w.host = o.host;
    w.generation = o.generation;
    const TimeNs now = clock_.load()->Now();
    w.lease_until = o.lease_left_ns == INT64_MAX ? kTimeNever : now + static_cast<TimeNs>(o.lease_left_ns);
    return w;
  }

  // Runs `task` on the pipe's engine (the reader is not on it).
  void ToEngine(Task task) {
    Clock* c = clock_.load();
    auto& rc = static_cast<RealClock&>(*c);
    while (!rc.Submit(std::move(task))) std::this_thread::yield();
  }

  void ReadLoop() {
    std::vector<uint8_t> msg;
    while (wire::Receive(fd_, &msg)) {
      wire::Header h;
      if (!wire::Unpack(msg, &h)) break;
      const Type t = static_cast<Type>(h.type);
      if (t == Type::kOwnerIs) {
        wire::OwnerMsg o;
        if (!wire::Unpack(msg, &o)) break;
        std::lock_guard<std::mutex> l(ask_mu_);
        if (h.tag == ask_tag_) answer_ = o;
        ask_cv_.notify_all();
        continue;
      }
      if (t != Type::kAccepted && t != Type::kDone) break;
      wire::CompletionMsg cm;
      if (!wire::Unpack(msg, &cm) || msg.size() != sizeof(cm) + cm.payload) break;
      if (closing_) break;
      ToEngine([this, t, cm, msg = std::move(msg)]() mutable { Complete(t, cm, msg); });
      msg = {};
    }
    {
      std::lock_guard<std::mutex> l(ask_mu_);
      lost_ = true;
      ask_cv_.notify_all();
    }
    // The connection is gone (the card server stopped or died, or spoke nonsense).
    if (!closing_) ToEngine([this] { Lose("the connection to the card server closed"); });
  }

  // On the engine.
  void Complete(Type t, const wire::CompletionMsg& cm, const std::vector<uint8_t>& msg) {
    auto it = pending_.find(cm.h.tag);
    if (it == pending_.end()) return;  // the port was lost meanwhile
    Pending& p = it->second;
    Completion cc;
    cc.status = static_cast<FlashStatus>(cm.status);
    cc.corrected_bits = cm.corrected_bits;
    cc.submit_ns = p.submit;
    cc.complete_ns = clock_.load()->Now();
    if (t == Type::kAccepted) {
      if (p.accepted) {
        auto a = std::move(p.accepted);
        p.accepted = nullptr;
        a(cc);
      }
      return;
    }
    if (cm.payload != 0) {
      const uint8_t* src = msg.data() + sizeof(cm);
      const uint32_t n = cm.payload;
      const uint32_t d = std::min(n, p.dlen);
      if (p.data && d != 0) std::memcpy(p.data, src, d);
      if (p.meta && p.mlen != 0 && n >= d + p.mlen) std::memcpy(p.meta, src + d, p.mlen);
    }
    auto done = std::move(p.done);
    pending_.erase(it);
    done(cc);
  }

  const int fd_;
  const wire::WelcomePipe w_;
  std::atomic<Clock*> clock_;
  const uint32_t index_;
  std::thread reader_;
  std::atomic<bool> lost_{false}, closing_{false};
  mutable std::atomic<uint64_t> next_tag_{0};
  std::unordered_map<uint64_t, Pending> pending_;  // engine
  // One ownership request at a time waits for its answer (engine, or a status reader).
  mutable std::mutex ask_mu_;
  mutable std::condition_variable ask_cv_;
  mutable uint64_t ask_tag_ = 0;
  mutable std::optional<wire::OwnerMsg> answer_;
};

class SharedBackend final : public CardBackend {
 public:
  SharedBackend(std::string dir, int control_fd, nlohmann::json d)
      : dir_(std::move(dir)), control_fd_(control_fd), desc_(std::move(d)) {
    geometry_ = desc_.at("geometry").get<nand::Geometry>();
    timing_ = desc_.at("timing").get<model::Timing>();
    power_ = desc_.at("power").get<model::Power>();
    reliability_ = desc_.at("reliability").get<model::Reliability>();
    for (const auto& id : desc_.at("identity")) {
      ids_.push_back({id.at("serial"), id.at("model"), id.at("profile"), id.at("firmware_version"), id.at("hardware")});
    }
    for (const auto& m : desc_.at("pipe_modes")) modes_.push_back(m.get<uint8_t>());
    if (ids_.size() != geometry_.controllers || modes_.size() != geometry_.controllers) {
      throw std::runtime_error("the card's description does not match its geometry");
    }
    readings_.resize(geometry_.controllers);
    life_.resize(geometry_.controllers);
    io_.resize(geometry_.controllers);
    Refresh();
    sensor_ = std::thread([this] { SensorLoop(); });
  }
  ~SharedBackend() override {
    StopSensors();
    pipes_.clear();
    ::close(control_fd_);
  }
  void Stop() override {
    StopSensors();
    for (auto& p : pipes_) p->Shutdown();
  }

  std::string kind() const override { return "shared"; }
  std::string spec() const override { return "shared:" + dir_; }
  const nand::Geometry& geometry() const override { return geometry_; }
  const model::Timing& timing() const override { return timing_; }
  const model::Power& power_model() const override { return power_; }
  const model::Reliability& reliability() const override { return reliability_; }
  std::string ecc_mode() const override { return desc_.at("ecc_mode").get<std::string>(); }
  bool zero_time() const override { return desc_.at("zero_time").get<bool>(); }

  Status Start(const std::vector<Clock*>& pipe_clocks, PipeRunner&) override {
    if (pipe_clocks.size() != pipe_count()) return Status::Internal("a clock per pipe expected");
    for (uint32_t p = 0; p < pipe_count(); ++p) {
      if (pipe_clocks[p]->is_virtual()) {
        return Status::InvalidArgument("a shared card runs in real time: open it with engine threads");
      }
      auto g = Greet(SharedSocketPath(dir_), wire::Link::kPipe, p);
      wire::WelcomePipe w;
      if (g.ok() && (!wire::Unpack(g->second, &w) || g->second.size() != sizeof(w))) {
        ::close(g->first);
        g = Status::IOError("the card server's welcome is malformed");
      }
      if (!g.ok()) {
        pipes_.clear();  // while the clocks run
        return g.status();
      }
      pipes_.push_back(std::make_unique<RemotePipe>(g->first, w, *pipe_clocks[p], p));
    }
    return Status::Ok();
  }
  nand::FlashPipe& pipe(uint32_t index) override { return *pipes_.at(index); }
  Status RebindPipe(uint32_t index, Clock& clock) override {
    pipes_.at(index)->Rebind(clock);
    return Status::Ok();
  }
  uint8_t pipe_mode(uint32_t c) const override { return modes_.at(c); }
  Status SetPipeMode(uint32_t c, uint8_t mode) override {
    VSL_ASSIGN_OR_RETURN(auto r, Ask({{"cmd", "set_pipe_mode"}, {"controller", c}, {"mode", mode}}));
    (void)r;
    modes_.at(c) = mode;
    return Status::Ok();
  }
  nand::PlpState plp_state() const override {
    auto r = Ask({{"cmd", "plp_state"}});
    return r.ok() ? static_cast<nand::PlpState>(r->get<int>()) : nand::PlpState::kFailed;
  }
  ControllerIdentity identity(uint32_t c) const override { return ids_.at(c); }

  // Sensors and lifetime: the card's engines ask for them (the thermal monitor every
  // few ms on a pipe's engine), so they come from a cache a sensor thread keeps fresh
  // (every kSensorPeriod while asked for) and the updates go out from that thread: a
  // pipe's engine never waits on the control link.
  model::PowerReading ReadPower(uint32_t c) const override {
    std::lock_guard<std::mutex> l(cache_mu_);
    Want();
    return readings_.at(c);
  }
  model::Environment environment() const override {
    std::lock_guard<std::mutex> l(cache_mu_);
    Want();
    return env_;
  }
  Status SetEnvironment(const model::Environment& env) override {
    VSL_RETURN_IF_ERROR(Ask({{"cmd", "set_environment"}, {"environment", env}}).status());
    std::lock_guard<std::mutex> l(cache_mu_);
    env_ = env;
    return Status::Ok();
  }
  void SetLowPower(uint32_t c, bool on) override {
    Post({{"cmd", "set_low_power"}, {"controller", c}, {"on", on}});
  }
  model::Lifetime lifetime(uint32_t c) const override {
    std::lock_guard<std::mutex> l(cache_mu_);
    Want();
    return life_.at(c);
  }
  void AccountHostIo(uint32_t c, uint64_t r, uint64_t w) override {
    if (r == 0 && w == 0) return;
    std::lock_guard<std::mutex> l(cache_mu_);
    io_.at(c).first += r;
    io_.at(c).second += w;
    cache_cv_.notify_all();
  }
  void CountThermalShutdown(uint32_t c) override { Post({{"cmd", "count_thermal_shutdown"}, {"controller", c}}); }
  void SaveLifetime() override { Post({{"cmd", "save_lifetime"}}); }
  PowerCycles power_cycles(uint32_t c) const override {
    auto r = Ask({{"cmd", "power_cycles"}, {"controller", c}});
    if (!r.ok()) return {};
    return {r->at("power_on_count").get<uint64_t>(), r->at("unsafe_power_offs").get<uint64_t>()};
  }
  model::DieCounters PipeCounters(uint32_t p) const override {
    return Get<model::DieCounters>({{"cmd", "pipe_counters"}, {"pipe", p}});
  }
  model::ControllerHealth Health(uint32_t c, const std::vector<model::DieCounters>& per_pipe) const override {
    return Get<model::ControllerHealth>({{"cmd", "health"}, {"controller", c}, {"per_pipe", per_pipe}});
  }
  Status InjectDieFailure(uint32_t p, uint32_t die) override {
    return Ask({{"cmd", "inject_die_failure"}, {"pipe", p}, {"die", die}}).status();
  }

 private:
  // One control request and its answer; IOError once the card is gone.
  Result<nlohmann::json> Ask(const nlohmann::json& req) const {
    std::lock_guard<std::mutex> l(control_mu_);
    if (control_lost_) return Status::IOError("the card server is gone");
    const uint64_t tag = ++control_tag_;
    std::vector<uint8_t> msg;
    wire::Header h;
    if (!wire::Send(control_fd_, wire::Text(Type::kControl, tag, req.dump())) || !wire::Receive(control_fd_, &msg) ||
        !wire::Unpack(msg, &h) || h.tag != tag) {
      control_lost_ = true;
      Logger("shared-card")->error("card {}: the control link to the card server closed", dir_);
      return Status::IOError("the card server is gone");
    }
    try {
      const nlohmann::json r = nlohmann::json::parse(wire::TextOf(msg));
      if (!r.at("ok").get<bool>()) return Status::FailedPrecondition(r.value("error", std::string("refused")));
      return r.value("result", nlohmann::json());
    } catch (const std::exception& e) {
      return Status::Corruption(fmt::format("the card server's answer is malformed: {}", e.what()));
    }
  }
  static constexpr auto kSensorPeriod = std::chrono::milliseconds(20);
  // cache_mu_ held: the sensor thread keeps the cache fresh while it is read.
  void Want() const { wanted_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(2); }
  // Queues a request whose answer nobody waits for.
  void Post(nlohmann::json req) {
    std::lock_guard<std::mutex> l(cache_mu_);
    posts_.push_back(std::move(req));
    cache_cv_.notify_all();
  }
  // One refresh of every cached reading (the sensor thread, and once at start).
  void Refresh() {
    std::vector<model::PowerReading> p(geometry_.controllers);
    std::vector<model::Lifetime> life(geometry_.controllers);
    for (uint32_t c = 0; c < geometry_.controllers; ++c) {
      p[c] = Get<model::PowerReading>({{"cmd", "read_power"}, {"controller", c}});
      life[c] = Get<model::Lifetime>({{"cmd", "lifetime"}, {"controller", c}});
    }
    const auto env = Get<model::Environment>({{"cmd", "environment"}});
    std::lock_guard<std::mutex> l(cache_mu_);
    readings_ = std::move(p);
    life_ = std::move(life);
    env_ = env;
  }
  void SensorLoop() {
    std::unique_lock<std::mutex> l(cache_mu_);
    while (!sensor_stop_) {
      cache_cv_.wait_for(l, kSensorPeriod);
      if (sensor_stop_) break;
      std::vector<nlohmann::json> posts;
      posts.swap(posts_);
      std::vector<std::pair<uint64_t, uint64_t>> io(io_.size());
      io.swap(io_);
      const bool refresh = std::chrono::steady_clock::now() < wanted_until_;
      l.unlock();
      for (uint32_t c = 0; c < io.size(); ++c) {
        if (io[c].first != 0 || io[c].second != 0) {
          (void)Ask({{"cmd", "account_host_io"}, {"controller", c}, {"read", io[c].first}, {"write", io[c].second}});
        }
      }
      for (const auto& r : posts) (void)Ask(r);
      if (refresh) Refresh();
      l.lock();
    }
  }
  void StopSensors() {
    {
      std::lock_guard<std::mutex> l(cache_mu_);
      if (sensor_stop_) return;
      sensor_stop_ = true;
    }
    cache_cv_.notify_all();
    if (sensor_.joinable()) sensor_.join();
    // What is still queued goes out now (the lifetime counters must not be lost).
    for (uint32_t c = 0; c < io_.size(); ++c) {
      if (io_[c].first != 0 || io_[c].second != 0) {
        (void)Ask({{"cmd", "account_host_io"}, {"controller", c}, {"read", io_[c].first}, {"write", io_[c].second}});
      }
    }
    for (const auto& r : posts_) (void)Ask(r);
    posts_.clear();
  }

  template <typename T>
  T Get(const nlohmann::json& req) const {
    auto r = Ask(req);
    if (!r.ok()) return T{};
    try {
      return r->get<T>();
    } catch (const std::exception&) {
      return T{};
    }
  }

  std::string dir_;
  int control_fd_;
  nlohmann::json desc_;
  nand::Geometry geometry_;
  model::Timing timing_;
  model::Power power_;
  model::Reliability reliability_;
  std::vector<ControllerIdentity> ids_;
  std::vector<uint8_t> modes_;
  std::vector<std::unique_ptr<RemotePipe>> pipes_;
  mutable std::mutex control_mu_;
  mutable uint64_t control_tag_ = 0;
  mutable bool control_lost_ = false;
  mutable std::mutex cache_mu_;  // what follows
  mutable std::condition_variable cache_cv_;
  mutable std::chrono::steady_clock::time_point wanted_until_{};
  std::vector<model::PowerReading> readings_;
  std::vector<model::Lifetime> life_;
  model::Environment env_;
  std::vector<std::pair<uint64_t, uint64_t>> io_;  // host I/O not yet sent, per controller
  std::vector<nlohmann::json> posts_;
  bool sensor_stop_ = false;
  std::thread sensor_;
};

}  // namespace

Result<std::unique_ptr<CardBackend>> MakeSharedBackend(const std::string& dir) {
  VSL_ASSIGN_OR_RETURN(auto g, Greet(SharedSocketPath(dir), wire::Link::kControl, 0));
  try {
    return std::unique_ptr<CardBackend>(new SharedBackend(dir, g.first, nlohmann::json::parse(wire::TextOf(g.second))));
  } catch (const std::exception& e) {
    ::close(g.first);
    return Status::Corruption(fmt::format("the card server's description of {} is malformed: {}", dir, e.what()));
  }
}

}  // namespace vsl::card
