#include "vsl/simcard/sim_card.h"

#include "vsl/simcard/plp_journal.h"
#include "vsl/core/check.h"
#include "vsl/simcard/ecc.h"
#include "vsl/simcard/firmware.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/core/random.h"
#include "vsl/simcard/sim_pipe.h"
#include "vsl/simcard/thermal.h"

namespace vsl::simcard {
namespace fs = std::filesystem;

namespace {
std::string ImagePath(const std::string& dir, uint32_t c) {
  return (fs::path(dir) / fmt::format("ctrl{}.img", c)).string();
}
}  // namespace

SimCard::SimCard(Clock& clock, const SimCardOptions& opts) : clock_(clock), opts_(opts) {}

Status SimCard::Create(const std::string& dir, const Profile& profile_in,
                       const CreateOptions& opts) {
  Profile profile = profile_in;
  if (opts.blocks_per_lun != 0) profile.geometry.blocks_per_lun = opts.blocks_per_lun;
  VSL_RETURN_IF_ERROR(profile.geometry.Validate());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create card directory {}: {}", dir, ec.message()));
  for (uint32_t c = 0; c < profile.geometry.controllers; ++c) {
    if (fs::exists(ImagePath(dir, c))) {
      return Status::AlreadyExists(
          fmt::format("card directory {} already holds {}", dir, ImagePath(dir, c)));
    }
  }
  Rng rng(opts.seed);
  const uint64_t card_id = rng.Next();
  const std::string serial =
      opts.serial.empty() ? fmt::format("OV{:010d}", rng.Below(10'000'000'000ULL)) : opts.serial;
  for (uint32_t c = 0; c < profile.geometry.controllers; ++c) {
    auto img = ControllerImage::Create(ImagePath(dir, c), profile, c, card_id,
                                       fmt::format("{}-{}", serial, c), opts.seed);
    if (!img.ok()) return img.status();
  }
  Logger("simcard")->info("created card dir={} profile={} serial={} geometry=[{}]", dir,
                          profile.name, serial, profile.geometry.ToString());
  return Status::Ok();
}

struct SimCard::Thermal {
  HeatSource src;  // static power
  std::atomic<bool> low_power{false};
};

}  // namespace vsl::simcard

namespace vsl::model {

const char* EccModeName(EccMode m) {
  return m == EccMode::kBitExact ? "bit-exact" : "statistical";
}

Result<EccMode> ParseEccMode(const std::string& s) {
  if (s == "statistical") return EccMode::kStatistical;
  if (s == "bit-exact") return EccMode::kBitExact;
  return Status::InvalidArgument(fmt::format("ECC mode '{}': expected 'statistical' or 'bit-exact'", s));
}

}  // namespace vsl::model

namespace vsl::simcard {

Result<std::unique_ptr<SimCard>> SimCard::Open(const std::string& dir, Clock& clock,
                                               const SimCardOptions& opts) {
  if (!fs::is_directory(dir)) {
    return Status::NotFound(fmt::format("card directory {} does not exist", dir));
  }
  auto card = std::unique_ptr<SimCard>(new SimCard(clock, opts));
  card->dir_ = dir;
  // One owner at a time (as one driver owns a PCIe device): vsld, an SDK application in
  // in-process mode, vslflash. The lock goes with the process, so a killed owner frees it.
  card->lock_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (card->lock_fd_ < 0) return Status::FromErrno(errno, fmt::format("open {}", dir));
  if (::flock(card->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    return err == EWOULDBLOCK
               ? Status::Busy(fmt::format("card {} is in use by another process (vsld or an SDK "
                                          "application); attach to vsld instead", dir))
               : Status::FromErrno(err, fmt::format("lock {}", dir));
  }
  VSL_ASSIGN_OR_RETURN(auto first, ControllerImage::Open(ImagePath(dir, 0)));
  const ImageIdentity id0 = first->identity();
  card->geometry_ = first->geometry();
  if (id0.controller_index != 0) {
    return Status::Corruption(fmt::format("{} claims to be controller {}", ImagePath(dir, 0),
                                          id0.controller_index));
  }
  VSL_ASSIGN_OR_RETURN(card->profile_, FindProfile(id0.profile));
  card->profile_.geometry = card->geometry_;  // the image's shape wins (blocks override)
  if (opts.plp) card->profile_.plp = *opts.plp;
  if (opts.reliability) card->profile_.reliability = *opts.reliability;
  if (opts.power) card->profile_.power = *opts.power;
  if (opts.copy_accumulators) card->profile_.copy_accumulators = *opts.copy_accumulators;
  if (opts.ecc == EccMode::kBitExact) VSL_RETURN_IF_ERROR(CheckBitExactGeometry(card->geometry_));
  card->images_.push_back(std::move(first));
  for (uint32_t c = 1; c < card->geometry_.controllers; ++c) {
    VSL_ASSIGN_OR_RETURN(auto img, ControllerImage::Open(ImagePath(dir, c)));
    const ImageIdentity& id = img->identity();
    if (id.card_id != id0.card_id || id.controller_index != c ||
        !(img->geometry() == card->geometry_) || id.profile != id0.profile) {
      return Status::Corruption(fmt::format(
          "{} does not belong with {} (card id, controller index, geometry or profile differ)",
          ImagePath(dir, c), ImagePath(dir, 0)));
    }
    card->images_.push_back(std::move(img));
  }
  card->timing_ = opts.null_timing ? Timing::Null() : card->profile_.timing;
  const uint32_t pipes = card->geometry_.controllers * card->geometry_.pipes_per_controller;
  if (!opts.pipe_clocks.empty() && opts.pipe_clocks.size() != pipes) {
    return Status::InvalidArgument(fmt::format("{} pipe clocks for a card of {} pipes",
                                               opts.pipe_clocks.size(), pipes));
  }
  card->links_ = std::make_unique<Link[]>(card->geometry_.controllers);
  for (uint32_t c = 0; c < card->geometry_.controllers; ++c) card->links_[c].free_at = clock.Now();
  std::vector<bool> unclean;
  for (auto& img : card->images_) {
    auto& st = img->state();
    unclean.push_back(st.attached != 0);
    if (st.attached != 0) ++st.unsafe_power_offs;
    ++st.power_on_count;
    st.attached = 1;
    VSL_RETURN_IF_ERROR(img->SyncState());
  }
  // The protected buffer each controller held when its host last went away is finished
  // first (a real card does that on its own power).
  const auto& g = card->geometry_;
  const uint32_t slot_bytes = g.page_data_bytes + g.page_spare_bytes;
  const auto& plp = card->profile_.plp;
  // The buffer twice over (a program is recorded when it lands and released when it
  // completes), the stage slots, and queued erases (their records hold no data, so the
  // sparse file does not grow for them).
  const uint32_t records = static_cast<uint32_t>(2 * plp.buffer_bytes_per_pipe / slot_bytes) + plp.stage_slots + 1024 +
                           16 * g.dies_per_pipe();
  for (uint32_t c = 0; c < g.controllers; ++c) {
    for (uint32_t p = 0; p < g.pipes_per_controller; ++p) {
      const uint32_t index = c * g.pipes_per_controller + p;
      VSL_ASSIGN_OR_RETURN(auto j, PlpJournal::Open(fmt::format("{}/plp-{}.bin", dir, index), records, slot_bytes));
      if (unclean[c]) card->FinishJournal(c, p, *j);
      j->Clear();
      card->journals_.push_back(std::move(j));
    }
  }
  Rng rng(opts.seed);
  for (uint32_t c = 0; c < card->geometry_.controllers; ++c) {
    for (uint32_t p = 0; p < card->geometry_.pipes_per_controller; ++p) {
      const uint32_t index = c * card->geometry_.pipes_per_controller + p;
      Clock& pc = opts.pipe_clocks.empty() ? clock : *opts.pipe_clocks[index];
      card->pipes_.push_back(std::make_unique<SimPipe>(*card, pc, c, p, rng.Fork(c * 2 + p).Next()));
      if (plp.present) card->pipes_.back()->SetJournal(card->journals_[index].get());
    }
  }
  for (uint32_t c = 0; c < card->geometry_.controllers; ++c) {
    const uint32_t lead = c * card->geometry_.pipes_per_controller;
    card->ctrl_clocks_.push_back(opts.pipe_clocks.empty() ? &clock : opts.pipe_clocks[lead]);
  }
  card->life_ = std::make_unique<LifeBase[]>(card->geometry_.controllers);
  for (uint32_t c = 0; c < card->geometry_.controllers; ++c) {
    card->life_[c].at_open = card->images_[c]->lifetime();
    card->life_[c].opened_at = card->ControllerNow(c);
  }
  card->env_ = opts.environment;
  card->thermal_r_ = card->profile_.power.ThermalResistance(opts.environment.airflow_lfm);
  card->thermal_ = std::make_unique<Thermal[]>(card->geometry_.controllers);
  for (uint32_t c = 0; c < card->geometry_.controllers; ++c) {
    card->thermal_[c].src.SetPower(card->ControllerNow(c), card->StaticWatts(c), card->thermal_r_,
                                   card->profile_.power.heat_capacity_j_per_c);
  }
  return card;
}

TimeNs SimCard::ControllerNow(uint32_t c) const {
  // The clock the controller's first pipe was opened on, never the pipes' current ones
  // (a pipe may be rebound while a sensor is read on another thread).
  return ctrl_clocks_[c]->Now();
}

double SimCard::StaticWatts(uint32_t c) const {
  if (!powered_) return 0;
  return thermal_[c].low_power ? profile_.power.standby_w : profile_.power.static_w;
}

Lifetime SimCard::lifetime(uint32_t c) const {
  const LifeBase& b = life_[c];
  const format::LifetimeRecord& r = b.at_open;
  Lifetime l;
  l.host_read_bytes = r.host_read_bytes + b.host_read;
  l.host_write_bytes = r.host_write_bytes + b.host_write;
  l.nand_read_bytes = r.nand_read_bytes;
  l.nand_program_bytes = r.nand_program_bytes;
  l.erases = r.erases;
  l.uncorrectable_reads = r.uncorrectable_reads;
  l.program_fails = r.program_fails;
  l.erase_fails = r.erase_fails;
  for (uint32_t p = 0; p < geometry_.pipes_per_controller; ++p) {
    const auto& x = pipes_[c * geometry_.pipes_per_controller + p]->life();
    l.nand_read_bytes += x.nand_read_bytes;
    l.nand_program_bytes += x.nand_program_bytes;
    l.erases += x.erases;
    l.uncorrectable_reads += x.uncorrectable_reads;
    l.program_fails += x.program_fails;
    l.erase_fails += x.erase_fails;
  }
  const TimeNs now = ControllerNow(c);
  l.powered_ns = static_cast<DurNs>(r.powered_ns) + (now > b.opened_at ? now - b.opened_at : 0);
  l.max_temperature_c = std::max(static_cast<double>(r.max_temp_mc), static_cast<double>(b.max_temp_mc.load())) / 1000.0;
  if (r.max_temp_mc == 0 && b.max_temp_mc.load() == INT64_MIN) l.max_temperature_c = 0;
  l.thermal_shutdowns = r.thermal_shutdowns + b.thermal_shutdowns;
  return l;
}

void SimCard::AccountHostIo(uint32_t c, uint64_t read_bytes, uint64_t write_bytes) {
  life_[c].host_read += read_bytes;
  life_[c].host_write += write_bytes;
}

void SimCard::CountThermalShutdown(uint32_t c) { life_[c].thermal_shutdowns += 1; }

void SimCard::SaveLifetime() {
  std::lock_guard<std::mutex> l(life_mu_);
  for (uint32_t c = 0; c < geometry_.controllers; ++c) {
    const Lifetime now = lifetime(c);
    format::LifetimeRecord& r = images_[c]->lifetime();
    r.magic = format::kLifetimeMagic;
    r.host_read_bytes = now.host_read_bytes;
    r.host_write_bytes = now.host_write_bytes;
    r.nand_read_bytes = now.nand_read_bytes;
    r.nand_program_bytes = now.nand_program_bytes;
    r.erases = now.erases;
    r.uncorrectable_reads = now.uncorrectable_reads;
    r.program_fails = now.program_fails;
    r.erase_fails = now.erase_fails;
    r.powered_ns = static_cast<uint64_t>(now.powered_ns);
    r.max_temp_mc = static_cast<int64_t>(now.max_temperature_c * 1000.0);
    r.thermal_shutdowns = now.thermal_shutdowns;
    images_[c]->SealLifetime();
  }
}

PowerReading SimCard::ReadPower(uint32_t c) const {
  std::lock_guard<std::mutex> l(env_mu_);
  const double r = thermal_r_.load();
  const double cap = profile_.power.heat_capacity_j_per_c;
  PowerReading out;
  out.at = ControllerNow(c);
  const auto st = thermal_[c].src.Read(out.at, r, cap);
  double rise = st.rise_c;
  out.energy_j = st.energy_j;
  for (uint32_t p = 0; p < geometry_.pipes_per_controller; ++p) {
    SimPipe& sp = *pipes_[c * geometry_.pipes_per_controller + p];
    const auto pr = sp.heat().Read(out.at, r, cap);
    rise += pr.rise_c;
    out.nand_energy_j += pr.energy_j;
  }
  out.energy_j += out.nand_energy_j;
  out.temperature_c = env_.ambient_c + rise;
  out.low_power = thermal_[c].low_power;
  const auto mc = static_cast<int64_t>(out.temperature_c * 1000.0);
  auto& mx = life_[c].max_temp_mc;
  for (int64_t cur = mx.load(); mc > cur && !mx.compare_exchange_weak(cur, mc);) {
  }
  return out;
}

Environment SimCard::environment() const {
  std::lock_guard<std::mutex> l(env_mu_);
  return env_;
}

void SimCard::SetEnvironment(const Environment& env) {
  std::lock_guard<std::mutex> l(env_mu_);
  // Every source is brought to now under the old resistance before it changes.
  const double r = thermal_r_.load();
  const double cap = profile_.power.heat_capacity_j_per_c;
  for (uint32_t c = 0; c < geometry_.controllers; ++c) thermal_[c].src.Advance(ControllerNow(c), r, cap);
  for (uint32_t i = 0; i < pipes_.size(); ++i) {
    pipes_[i]->heat().Advance(ControllerNow(i / geometry_.pipes_per_controller), r, cap);
  }
  env_ = env;
  thermal_r_ = profile_.power.ThermalResistance(env.airflow_lfm);
}

void SimCard::SetLowPower(uint32_t c, bool on) {
  std::lock_guard<std::mutex> l(env_mu_);
  thermal_[c].low_power = on;
  thermal_[c].src.SetPower(ControllerNow(c), StaticWatts(c), thermal_r_.load(),
                           profile_.power.heat_capacity_j_per_c);
}

void SimCard::SetStaticPowerAll() {
  std::lock_guard<std::mutex> l(env_mu_);
  for (uint32_t c = 0; c < geometry_.controllers; ++c) {
    thermal_[c].src.SetPower(ControllerNow(c), StaticWatts(c), thermal_r_.load(),
                             profile_.power.heat_capacity_j_per_c);
  }
}

// Applies, in the order a power cut's flush would, what pipe `p` of controller `c` had
// accepted when its process died: erases and programs in queue order, then each staged
// parity image after the die's last program and the last erase of its own block. Work
// applied before the kill (the record outlives it by a moment) is recognised: a page
// already marked programmed is skipped; an operation the kill cut between its steps
// (ApplyProgram moves the block's next page before it writes the slot; ApplyErase counts
// the erase before it clears the pages) is finished.
void SimCard::FinishJournal(uint32_t c, uint32_t p, PlpJournal& j) {
  ControllerImage& img = *images_[c];
  const auto& g = geometry_;
  auto recs = j.Pending();
  if (recs.empty()) return;
  std::sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  uint32_t programs = 0, erases = 0, skipped = 0;
  const uint32_t slot_bytes = g.page_data_bytes + g.page_spare_bytes;
  std::vector<uint8_t> slot;
  for (uint32_t die = 0; die < g.dies_per_pipe(); ++die) {
    const uint32_t idie = p * g.dies_per_pipe() + die;
    std::vector<const PlpJournal::Record*> todo;
    for (const auto& r : recs) {
      if (r.die == die && r.kind != PlpJournal::Kind::kStage) todo.push_back(&r);
    }
    for (const auto& r : recs) {
      if (r.die != die || r.kind != PlpJournal::Kind::kStage) continue;
      std::size_t at = 0;
      for (std::size_t i = 0; i < todo.size(); ++i) {
        if (todo[i]->kind == PlpJournal::Kind::kProgram || todo[i]->block == r.block) at = i + 1;
      }
      todo.insert(todo.begin() + static_cast<std::ptrdiff_t>(at), &r);
    }
    if (img.die(idie).flags & format::kDieFailed) {
      skipped += static_cast<uint32_t>(todo.size());
      continue;
    }
    for (const PlpJournal::Record* r : todo) {
      if (r->block >= g.blocks_per_lun || r->page >= g.pages_per_block) {
        ++skipped;
        continue;
      }
      auto& rec = img.block(idie, r->block);
      if (rec.flags & (format::kBlockFactoryBad | format::kBlockGrownBad)) {
        ++skipped;
        continue;
      }
      if (r->kind == PlpJournal::Kind::kErase) {
        // Still recorded: not applied, or applied (wholly or in part: the kill can fall
        // between its steps) with nothing programmed in the block since (the die runs
        // in order and the record goes as soon as the erase completes). Its effects are
        // (re)done; the erase count moves only if it had not yet.
        if (rec.erase_count < r->erase_count_after) rec.erase_count = r->erase_count_after;
        rec.reads_since_erase = 0;
        rec.next_page = 0;
        rec.flags &= static_cast<uint8_t>(~format::kBlockParity);
        img.EraseBlockPages(idie, r->block);
        ++erases;
        continue;
      }
      const format::PageState st = img.page_state(idie, r->block, r->page);
      if (st == format::PageState::kProgrammed) continue;  // programmed before the kill
      // A program the kill interrupted between its steps (the block's next page already
      // moved past it, the page not yet marked) is applied again; any other gap is not
      // a place this page can go.
      const bool interrupted = r->page + 1 == rec.next_page && st == format::PageState::kErased;
      // The record holds the slot as accepted, with parity if the process that accepted
      // it ran bit-exact; this one encodes again (the same bytes) or marks it without.
      const bool parity = opts_.ecc == EccMode::kBitExact;
      slot.assign(r->data, r->data + slot_bytes);
      if (parity) EncodeSlot(geometry_, slot.data());
      if ((r->page != rec.next_page && !interrupted) || !img.WriteSlot(idie, r->block, r->page, slot.data()).ok()) {
        ++skipped;
        continue;
      }
      img.set_page_state(idie, r->block, r->page, format::PageState::kProgrammed);
      NoteProgrammed(rec, r->page, parity);
      rec.next_page = static_cast<uint16_t>(r->page + 1);
      ++programs;
    }
  }
  Logger("simcard")->info(
      "controller {} pipe {}: finished {} program(s) and {} erase(s) the controller had accepted when its host "
      "went away{}",
      c, p, programs, erases, skipped ? fmt::format(" ({} could not be applied)", skipped) : "");
}

SimCard::~SimCard() {
  // (With a clock per pipe those clocks' engines may be gone by now: the owner saves the
  // counters before it stops them, as Card does.)
  if (!abandoned_ && life_ && single_clock() && pipes_.size() == geometry_.controllers * geometry_.pipes_per_controller) {
    SaveLifetime();
  }
  pipes_.clear();
  struct LockCloser {
    int fd;
    ~LockCloser() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{lock_fd_};
  if (abandoned_) return;  // TEST_Abandon: as a killed process leaves it
  for (auto& j : journals_) j->Clear();  // a clean close: what was outstanding is dropped
  for (auto& img : images_) {
    if (powered_) img->state().attached = 0;
    (void)img->Sync();
  }
}

nand::FlashPipe& SimCard::pipe(uint32_t index) { return *pipes_.at(index); }
std::unique_ptr<nand::FlashPipe> SimCard::NewPort(uint32_t index) { return pipes_.at(index)->NewPort(); }
const PipeStats& SimCard::stats(uint32_t pipe) const { return pipes_.at(pipe)->stats(); }

nand::PlpState SimCard::plp_state() const {
  return static_cast<nand::PlpState>(images_[0]->state().plp_state);
}

uint8_t SimCard::pipe_mode(uint32_t controller) const {
  return images_.at(controller)->state().pipe_mode;
}

Status SimCard::SetPipeMode(uint32_t controller, uint8_t mode) {
  if (controller >= images_.size()) {
    return Status::InvalidArgument(fmt::format("no controller {}", controller));
  }
  if (mode > 1) return Status::InvalidArgument(fmt::format("no pipe mode {}", mode));
  images_[controller]->state().pipe_mode = mode;
  return images_[controller]->SyncState();
}

std::string SimCard::firmware_version(uint32_t controller) const {
  const auto& st = images_.at(controller)->state();
  const std::string loaded(st.firmware_version, strnlen(st.firmware_version, sizeof(st.firmware_version)));
  return loaded.empty() ? images_[controller]->identity().firmware_version : loaded;
}

Status SimCard::UpdateFirmware(uint32_t controller, const std::vector<uint8_t>& image) {
  if (controller >= images_.size()) return Status::InvalidArgument(fmt::format("no controller {}", controller));
  ControllerImage& img = *images_[controller];
  VSL_ASSIGN_OR_RETURN(FirmwareInfo info, CheckFirmware(image, img.identity().model));
  const std::string path = fmt::format("{}/ctrl{}.fw", dir_, controller);
  const std::string tmp = path + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("create {}", tmp));
  std::size_t off = 0;
  while (off < image.size()) {
    const ssize_t w = ::write(fd, image.data() + off, image.size() - off);
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::FromErrno(e, fmt::format("write {}", tmp));
    }
    off += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IOError(fmt::format("sync {}", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(e, fmt::format("rename {}", tmp));
  }
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  auto& st = img.state();
  std::memset(st.firmware_version, 0, sizeof(st.firmware_version));
  std::memcpy(st.firmware_version, info.version.data(), info.version.size());
  VSL_RETURN_IF_ERROR(img.SyncState());
  Logger("simcard")->warn("controller {}: firmware {} loaded ({} bytes)", controller, info.version,
                          info.payload_bytes);
  return Status::Ok();
}

Status SimCard::RebindPipe(uint32_t index, Clock& clock) {
  if (index >= pipes_.size()) return Status::InvalidArgument(fmt::format("no pipe {}", index));
  if (pipes_[index]->busy()) {
    return Status::FailedPrecondition(fmt::format("pipe {} has commands outstanding", index));
  }
  pipes_[index]->Rebind(clock);
  if (!opts_.pipe_clocks.empty()) opts_.pipe_clocks[index] = &clock;
  return Status::Ok();
}

Result<SimCard::Probed> SimCard::Probe(const std::string& dir) {
  VSL_ASSIGN_OR_RETURN(auto first, ControllerImage::Open(ImagePath(dir, 0)));
  Probed p{first->geometry(), {first->state().pipe_mode}};
  for (uint32_t c = 1; c < p.geometry.controllers; ++c) {
    VSL_ASSIGN_OR_RETURN(auto img, ControllerImage::Open(ImagePath(dir, c)));
    p.pipe_modes.push_back(img->state().pipe_mode);
  }
  return p;
}

TimeNs SimCard::TakeLink(uint32_t controller, TimeNs now, uint64_t bytes) {
  Link& l = links_[controller];
  std::lock_guard<std::mutex> lock(l.mu);
  l.free_at = std::max(now, l.free_at) + TransferNs(bytes, timing_.link_bytes_per_sec);
  return l.free_at;
}

void SimCard::SetPlpState(nand::PlpState state) {
  VSL_CHECK(single_clock(), "SetPlpState needs the card on one clock");
  for (auto& img : images_) {
    img->state().plp_state = static_cast<uint8_t>(state);
    (void)img->SyncState();
  }
}

void SimCard::PowerCut() {
  VSL_CHECK(single_clock(), "PowerCut needs the card on one clock");
  if (!powered_) return;
  const DurNs budget =
      plp_state() == nand::PlpState::kHealthy ? profile_.plp.holdup_ns : 0;
  Logger("simcard")->info("power cut at t={}ns holdup_budget={}ns", clock_.Now(), budget);
  for (auto& p : pipes_) p->PowerCut(budget);
  SaveLifetime();
  powered_ = false;
  SetStaticPowerAll();
  for (auto& img : images_) (void)img->Sync();
}

void SimCard::PowerOn() {
  VSL_CHECK(single_clock(), "PowerOn needs the card on one clock");
  if (powered_) return;
  powered_ = true;
  SetStaticPowerAll();
  for (auto& img : images_) {
    auto& st = img->state();
    ++st.unsafe_power_offs;
    ++st.power_on_count;
    (void)img->SyncState();
  }
  for (uint32_t c = 0; c < geometry_.controllers; ++c) links_[c].free_at = clock_.Now();
  for (auto& p : pipes_) p->PowerOn();
}

void SimCard::InjectDieFailure(uint32_t pipe, uint32_t die) {
  Logger("simcard")->info("inject die failure pipe={} die={}", pipe, die);
  pipes_.at(pipe)->InjectDieFailure(die);
}
void SimCard::InjectProgramFail(uint32_t pipe, nand::Ppa ppa) {
  pipes_.at(pipe)->InjectProgramFail(ppa);
}
void SimCard::InjectUncorrectable(uint32_t pipe, nand::Ppa ppa) {
  pipes_.at(pipe)->InjectUncorrectable(ppa);
}
void SimCard::InjectEraseFail(uint32_t pipe, uint32_t die, uint32_t block) {
  pipes_.at(pipe)->InjectEraseFail(die, block);
}
void SimCard::CorruptParameterPage(uint32_t pipe, uint32_t die, uint32_t copy_mask) {
  const uint32_t c = pipe / geometry_.pipes_per_controller;
  images_[c]->die(pipes_.at(pipe)->image_die(die)).param_page_bad_mask = copy_mask;
}
void SimCard::TEST_SetEraseCount(uint32_t pipe, uint32_t die, uint32_t block, uint32_t pe) {
  const uint32_t c = pipe / geometry_.pipes_per_controller;
  images_[c]->block(pipes_.at(pipe)->image_die(die), block).erase_count = pe;
}

BlockInfo SimCard::block_info(uint32_t pipe, uint32_t die, uint32_t block) const {
  const uint32_t c = pipe / geometry_.pipes_per_controller;
  const auto& rec = images_[c]->block(pipes_.at(pipe)->image_die(die), block);
  return BlockInfo{rec.erase_count, rec.reads_since_erase, rec.next_page,
                   (rec.flags & format::kBlockFactoryBad) != 0,
                   (rec.flags & format::kBlockGrownBad) != 0};
}

bool SimCard::die_failed(uint32_t pipe, uint32_t die) const {
  const uint32_t c = pipe / geometry_.pipes_per_controller;
  return (images_[c]->die(pipes_.at(pipe)->image_die(die)).flags & format::kDieFailed) != 0;
}

DieCounters SimCard::PipeCounters(uint32_t pipe) const {
  const auto& g = geometry_;
  std::vector<uint32_t> dies;
  for (uint32_t die = 0; die < g.dies_per_pipe(); ++die) dies.push_back(pipes_.at(pipe)->image_die(die));
  return CountDies(*images_.at(pipe / g.pipes_per_controller), dies);
}

ControllerHealth SimCard::Health(uint32_t controller, const std::vector<DieCounters>& per_pipe) const {
  const auto& g = geometry_;
  std::vector<DieCounters> counters = per_pipe;
  if (counters.empty()) {
    for (uint32_t q = 0; q < g.pipes_per_controller; ++q) counters.push_back(PipeCounters(controller * g.pipes_per_controller + q));
  }
  ControllerHealth h = ImageHealth(*images_.at(controller), counters, profile_.reliability.endurance_cycles);
  h.controller = controller;
  h.firmware_version = firmware_version(controller);
  return h;
}

}  // namespace vsl::simcard
