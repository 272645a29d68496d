#include "vsl/backend/ctrl_backend.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/hw/regmap.h"
#include "vsl/simcard/image_format.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::backend {

namespace fs = std::filesystem;
namespace cr = hw::regs::ctrl;
namespace fmtk = simcard::format;

// Controller c's port as its pipes use it. On a virtual clock the device runs in step
// with the host (Advance to the host's time, deterministic). On a real clock a simulator
// cannot keep up with wall time, so each poll lets the device run a fixed slice of its
// own time instead: the co-simulated card runs as fast as the simulator can while
// commands are in flight, and its time is its own.
class ControllerBackend::PacedPort final : public hw::RegMemPort {
 public:
  PacedPort(BoardHost& h, uint32_t c, bool lockstep) : h_(h), p_(h.port(c)), lockstep_(lockstep) {}
  bool Read32(uint32_t offset, uint32_t* value) override { return p_.Read32(offset, value); }
  bool Write32(uint32_t offset, uint32_t value) override { return p_.Write32(offset, value); }
  uint64_t mem_base() const override { return p_.mem_base(); }
  uint64_t mem_size() const override { return p_.mem_size(); }
  void WriteMem(uint64_t addr, const void* src, std::size_t len) override { p_.WriteMem(addr, src, len); }
  void ReadMem(uint64_t addr, void* dst, std::size_t len) override { p_.ReadMem(addr, dst, len); }
  void Advance(int64_t now_ns) override { p_.Advance(lockstep_ ? now_ns : h_.device_ns() + kSliceNs); }
  bool InterruptPending() override { return p_.InterruptPending(); }

 private:
  static constexpr int64_t kSliceNs = 20'000;
  BoardHost& h_;
  hw::RegMemPort& p_;
  const bool lockstep_;
};

namespace {
constexpr DurNs kPollNs = 50 * kMs;  // sensor refresh on a real clock

model::Lifetime FromRecord(const fmtk::LifetimeRecord& rec) {
  model::Lifetime lf;
  if (rec.magic != fmtk::kLifetimeMagic) return lf;  // absent or damaged: from zero
  lf.host_read_bytes = rec.host_read_bytes;
  lf.host_write_bytes = rec.host_write_bytes;
  lf.nand_read_bytes = rec.nand_read_bytes;
  lf.nand_program_bytes = rec.nand_program_bytes;
  lf.erases = rec.erases;
  lf.uncorrectable_reads = rec.uncorrectable_reads;
  lf.program_fails = rec.program_fails;
  lf.erase_fails = rec.erase_fails;
  lf.powered_ns = static_cast<DurNs>(rec.powered_ns);
  lf.max_temperature_c = static_cast<double>(rec.max_temp_mc) / 1000.0;
  lf.thermal_shutdowns = rec.thermal_shutdowns;
  return lf;
}

void ToRecord(const model::Lifetime& lf, fmtk::LifetimeRecord* rec) {
  rec->magic = fmtk::kLifetimeMagic;
  rec->host_read_bytes = lf.host_read_bytes;
  rec->host_write_bytes = lf.host_write_bytes;
  rec->nand_read_bytes = lf.nand_read_bytes;
  rec->nand_program_bytes = lf.nand_program_bytes;
  rec->erases = lf.erases;
  rec->uncorrectable_reads = lf.uncorrectable_reads;
  rec->program_fails = lf.program_fails;
  rec->erase_fails = lf.erase_fails;
  rec->powered_ns = static_cast<uint64_t>(lf.powered_ns);
  rec->max_temp_mc = static_cast<int64_t>(lf.max_temperature_c * 1000.0);
  rec->thermal_shutdowns = lf.thermal_shutdowns;
}

std::string ReadMarker(const std::string& dir) {
  std::ifstream in(dir + "/BACKEND");
  std::string k;
  if (in) in >> k;
  return k;
}
}  // namespace

Result<std::unique_ptr<card::CardBackend>> ControllerBackend::Make(const std::string& kind, const std::string& dir,
                                                                  const card::CardOptions& opts,
                                                                  HostFactory host_for) {
  if (!fs::is_directory(dir)) {
    return Status::NotFound(fmt::format("no card directory {} (make one with `vslctl create-card {}:{}`)", dir, kind,
                                        dir));
  }
  const std::string marker = ReadMarker(dir);
  if (marker != kind) {
    return Status::InvalidArgument(fmt::format("card {} is {}, not a {} card", dir,
                                               marker.empty() ? "a simulated card (sim:)" : "for the " + marker + " backend",
                                               kind));
  }
  auto b = std::unique_ptr<ControllerBackend>(new ControllerBackend());
  b->kind_ = kind;
  b->dir_ = dir;
  b->opts_ = opts;
  b->host_for_ = std::move(host_for);
  b->lock_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (b->lock_fd_ < 0) return Status::FromErrno(errno, fmt::format("open {}", dir));
  if (::flock(b->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Busy(fmt::format("card {} is in use by another process", dir));
  }
  VSL_ASSIGN_OR_RETURN(simcard::SimCard::Probed probed, simcard::SimCard::Probe(dir));
  for (uint32_t c = 0; c < probed.geometry.controllers; ++c) {
    VSL_ASSIGN_OR_RETURN(auto img, simcard::ControllerImage::Open(fmt::format("{}/ctrl{}.img", dir, c)));
    b->images_.push_back(std::move(img));
  }
  VSL_ASSIGN_OR_RETURN(b->profile_, simcard::FindProfile(b->images_[0]->identity().profile));
  b->profile_.geometry = probed.geometry;
  if (opts.sim.reliability) b->profile_.reliability = *opts.sim.reliability;
  const auto& g = probed.geometry;
  if (g.pipes_per_controller != 2 || g.channels_per_pipe != 1 || g.luns_per_channel != 4) {
    return Status::InvalidArgument(fmt::format(
        "card {}: a {} card has the controller's shape (2 pipes of 1 channel of 4 LUNs), not [{}]", dir, kind,
        g.ToString()));
  }
  const uint32_t nc = g.controllers;
  b->sensed_.resize(nc);
  b->host_read_.assign(nc, 0);
  b->host_write_.assign(nc, 0);
  b->thermal_shutdowns_.assign(nc, 0);
  b->pipe_life_.resize(nc * 2);
  for (auto& img : b->images_) b->base_.push_back(FromRecord(img->lifetime()));
  b->env_ = opts.sim.environment;
  b->env_dirty_ = true;
  return std::unique_ptr<card::CardBackend>(std::move(b));
}

ControllerBackend::~ControllerBackend() {
  *alive_ = false;
  pipes_.clear();
  ports_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string ControllerBackend::ecc_mode() const { return host_ ? host_->ecc() : "rtl"; }

Status ControllerBackend::Start(const std::vector<Clock*>& pipe_clocks, card::PipeRunner& run) {
  clock_ = pipe_clocks.at(0);
  started_at_ = clock_->Now();
  for (Clock* c : pipe_clocks) {
    if (c != clock_) return Status::Internal("a co-simulated card's pipes must share one engine");
  }
  std::vector<simcard::ControllerImage*> raw;
  for (auto& i : images_) raw.push_back(i.get());
  VSL_ASSIGN_OR_RETURN(host_, host_for_(raw, profile_));
  if (host_->controllers() != images_.size()) {
    return Status::Internal(fmt::format("the board has {} controller(s), the card {}", host_->controllers(),
                                        images_.size()));
  }
  for (auto& img : images_) {
    auto& st = img->state();
    if (st.attached != 0) ++st.unsafe_power_offs;
    ++st.power_on_count;
    st.attached = 1;
    VSL_RETURN_IF_ERROR(img->SyncState());
  }
  const bool lockstep = clock_->is_virtual();
  for (uint32_t c = 0; c < images_.size(); ++c) ports_.push_back(std::make_unique<PacedPort>(*host_, c, lockstep));
  // The board's own set-up, then each pipe's rings, then each pipe's dies identified (what
  // a previous host left in a pipe drained first).
  VSL_RETURN_IF_ERROR(run.Call(0, [this](Function<void(Status)> done) { done(host_->Prepare(*clock_)); }));
  const uint32_t np = pipe_count();
  for (uint32_t p = 0; p < np; ++p) {
    const uint32_t c = p / 2, q = p % 2;
    Status made = run.Call(p, [&, c, q](Function<void(Status)> done) {
      auto cp = hw::ControllerPipe::Create(*ports_[c], *clock_, q, host_->region_base(c, q), host_->region_bytes());
      if (!cp.ok()) return done(cp.status());
      pipes_.push_back(std::move(cp).value());
      pipes_.back()->Init(std::move(done));
    });
    VSL_RETURN_IF_ERROR(made.WithContext(fmt::format("controller {} pipe {}", c, q)));
  }
  // Identity from the registers; dies the card's record says are dead stay dead.
  VSL_RETURN_IF_ERROR(run.Call(0, [this](Function<void(Status)> done) {
    for (uint32_t c = 0; c < images_.size(); ++c) {
      uint32_t id = 0, ver = 0, caps = 0;
      hw::RegMemPort& p = *ports_[c];
      if (!p.Read32(cr::kId, &id) || !p.Read32(cr::kVersion, &ver) || !p.Read32(cr::kCaps, &caps)) {
        return done(Status::IOError(fmt::format("controller {}: identity registers do not answer", c)));
      }
      const auto& im = images_[c]->identity();
      card::ControllerIdentity ci;
      ci.serial = im.serial;
      ci.model = im.model;
      ci.profile = im.profile;
      ci.firmware_version = fmt::format("{}.{}", cr::kVersionMajor.get(ver), cr::kVersionMinor.get(ver));
      ci.hardware = fmt::format("vsl_ctrl (ID {:08X}, register map {}.{}, {} pipes x {} LUNs, ECC t={}) on {}", id,
                                cr::kVersionMajor.get(ver), cr::kVersionMinor.get(ver), cr::kCapsPipes.get(caps),
                                cr::kCapsLunsPerChannel.get(caps), cr::kCapsEccT.get(caps), host_->hardware());
      ids_.push_back(ci);
      for (uint32_t d = 0; d < images_[c]->dies(); ++d) {
        if (images_[c]->die(d).flags & fmtk::kDieFailed) {
          if (Status s = host_->KillDie(c * 2 + d / 4, d % 4); !s.ok()) return done(s);
        }
      }
    }
    done(Status::Ok());
  }));
  return run.Call(0, [this](Function<void(Status)> done) {
    Poll();
    done(Status::Ok());
  });
}

void ControllerBackend::Poll() {
  const TimeNs now = clock_->Now();
  model::Environment env;
  bool apply = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    env = env_;
    apply = env_dirty_;
    env_dirty_ = false;
  }
  if (apply) host_->SetEnvironment(env);
  cycles_ = host_->cycles();
  for (uint32_t c = 0; c < images_.size(); ++c) {
    double t = 0, w = 0;
    bool got = host_->BoardSensors(c, &t, &w);
    if (!got) {
      uint32_t seq = 0, temp = 0, mw = 0;
      hw::RegMemPort& p = *ports_[c];
      if (p.Read32(cr::kSensorSeq, &seq) && seq != 0 && p.Read32(cr::kSensorTemp, &temp) &&
          p.Read32(cr::kSensorPower, &mw)) {
        t = static_cast<int32_t>(temp) / 1000.0;
        w = mw / 1000.0;
        got = true;
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    Sensed& s = sensed_[c];
    if (!got) {
      t = env.ambient_c;  // nothing measures it: the air around the board
      w = 0;
    }
    if (s.at != 0 && now > s.at) s.energy_j += s.power_w * static_cast<double>(now - s.at) / 1e9;
    s.temp_c = t;
    s.power_w = w;
    s.max_temp_c = std::max(s.max_temp_c, t);
    s.at = now;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto& g = profile_.geometry;
    for (uint32_t p = 0; p < pipes_.size(); ++p) {
      const auto& st = pipes_[p]->stats();
      model::Lifetime& lf = pipe_life_[p];
      lf.nand_read_bytes = st.reads * uint64_t{g.page_data_bytes};
      lf.nand_program_bytes = st.programs * uint64_t{g.page_data_bytes};
      lf.erases = st.erases;
      lf.uncorrectable_reads = st.uncorrectable;
      lf.program_fails = st.program_fails;
      lf.erase_fails = st.erase_fails;
    }
  }
  if (!clock_->is_virtual()) {
    auto alive = alive_;
    poll_timer_ = clock_->After(kPollNs, [this, alive] {
      if (*alive) Poll();
    });
  }
}

void ControllerBackend::Stop() {
  if (clock_ != nullptr && clock_->is_virtual() && !pipes_.empty()) Poll();
  *alive_ = false;
  if (host_ == nullptr) return;
  SaveLifetime();
  for (auto& img : images_) {
    img->state().attached = 0;
    (void)img->SyncState();
    (void)img->Sync();
  }
}

Status ControllerBackend::RebindPipe(uint32_t index, Clock& clock) {
  if (index >= pipes_.size()) return Status::InvalidArgument(fmt::format("no pipe {}", index));
  if (&clock != clock_) return Status::NotSupported("a co-simulated card's pipes stay on its one engine");
  return Status::Ok();
}

uint8_t ControllerBackend::pipe_mode(uint32_t controller) const {
  return images_.at(controller)->state().pipe_mode;
}

Status ControllerBackend::SetPipeMode(uint32_t controller, uint8_t mode) {
  if (controller >= images_.size()) return Status::InvalidArgument(fmt::format("no controller {}", controller));
  images_[controller]->state().pipe_mode = mode;
  return images_[controller]->SyncState();
}

card::ControllerIdentity ControllerBackend::identity(uint32_t controller) const {
  if (controller < ids_.size()) return ids_[controller];
  const auto& im = images_.at(controller)->identity();
  return {im.serial, im.model, im.profile, "?", "not started"};
}

model::PowerReading ControllerBackend::ReadPower(uint32_t controller) const {
  // On a virtual clock every caller is on the card's one thread: read the sensors now.
  if (clock_ != nullptr && clock_->is_virtual() && !pipes_.empty() && *alive_) {
    const_cast<ControllerBackend*>(this)->Poll();
  }
  std::lock_guard<std::mutex> l(mu_);
  const Sensed& s = sensed_.at(controller);
  model::PowerReading r;
  r.temperature_c = s.temp_c;
  r.energy_j = s.energy_j;
  r.nand_energy_j = 0;  // the power monitor reads the board as a whole
  r.at = s.at;
  r.low_power = s.low_power;
  return r;
}

model::Environment ControllerBackend::environment() const {
  std::lock_guard<std::mutex> l(mu_);
  return env_;
}

Status ControllerBackend::SetEnvironment(const model::Environment& env) {
  if (kind_ == "xrt") return Status::NotSupported("a real board's surroundings are not the host's to set");
  std::lock_guard<std::mutex> l(mu_);
  env_ = env;
  env_dirty_ = true;  // the engine applies it at its next poll
  return Status::Ok();
}

void ControllerBackend::SetLowPower(uint32_t controller, bool on) {
  // The controller has no low-power state of its own: its LUNs are idle, which is what
  // the board's power monitor then shows.
  std::lock_guard<std::mutex> l(mu_);
  sensed_.at(controller).low_power = on;
}

model::Lifetime ControllerBackend::lifetime(uint32_t controller) const {
  std::lock_guard<std::mutex> l(mu_);
  model::Lifetime lf = base_.at(controller);
  model::Lifetime session;
  session.host_read_bytes = host_read_[controller];
  session.host_write_bytes = host_write_[controller];
  session.thermal_shutdowns = thermal_shutdowns_[controller];
  for (uint32_t q = 0; q < 2; ++q) session += pipe_life_[controller * 2 + q];
  if (clock_ != nullptr) session.powered_ns = clock_->Now() - started_at_;
  const DurNs before = lf.powered_ns;
  lf += session;
  lf.powered_ns = before + session.powered_ns;
  lf.max_temperature_c = std::max(lf.max_temperature_c, sensed_[controller].max_temp_c);
  return lf;
}

void ControllerBackend::AccountHostIo(uint32_t controller, uint64_t read_bytes, uint64_t write_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  host_read_.at(controller) += read_bytes;
  host_write_.at(controller) += write_bytes;
}

void ControllerBackend::CountThermalShutdown(uint32_t controller) {
  std::lock_guard<std::mutex> l(mu_);
  ++thermal_shutdowns_.at(controller);
}

void ControllerBackend::SaveLifetime() {
  for (uint32_t c = 0; c < images_.size(); ++c) {
    ToRecord(lifetime(c), &images_[c]->lifetime());
    images_[c]->SealLifetime();
    (void)images_[c]->SyncState();
  }
}

card::CardBackend::PowerCycles ControllerBackend::power_cycles(uint32_t controller) const {
  const auto& st = images_.at(controller)->state();
  return {st.power_on_count, st.unsafe_power_offs};
}

model::DieCounters ControllerBackend::PipeCounters(uint32_t pipe) const {
  const uint32_t dpp = profile_.geometry.dies_per_pipe();
  std::vector<uint32_t> dies;
  for (uint32_t d = 0; d < dpp; ++d) dies.push_back((pipe % 2) * dpp + d);
  return simcard::CountDies(*images_.at(pipe / 2), dies);  // the die models keep the block table
}

model::ControllerHealth ControllerBackend::Health(uint32_t controller,
                                                  const std::vector<model::DieCounters>& per_pipe) const {
  std::vector<model::DieCounters> counters = per_pipe;
  if (counters.empty()) {
    for (uint32_t q = 0; q < 2; ++q) counters.push_back(PipeCounters(controller * 2 + q));
  }
  model::ControllerHealth h =
      simcard::ImageHealth(*images_.at(controller), counters, profile_.reliability.endurance_cycles);
  h.controller = controller;
  h.firmware_version = identity(controller).firmware_version;
  h.plp = nand::PlpState::kAbsent;
  return h;
}

Status ControllerBackend::InjectDieFailure(uint32_t pipe, uint32_t die) {
  const auto& g = profile_.geometry;
  if (pipe >= pipe_count() || die >= g.dies_per_pipe()) {
    return Status::InvalidArgument(fmt::format("no die {} on pipe {}", die, pipe));
  }
  VSL_RETURN_IF_ERROR(host_->KillDie(pipe, die));
  // Persistent, as the dead die is: the next start kills it again.
  images_[pipe / 2]->die((pipe % 2) * g.dies_per_pipe() + die).flags |= fmtk::kDieFailed;
  Logger("card")->warn("{}: die {} of pipe {} killed through the board's fault path", spec(), die, pipe);
  return Status::Ok();
}

}  // namespace vsl::backend
