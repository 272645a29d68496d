#include "vsl/card/card.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "vsl/card/joined_pipe.h"
#include "vsl/card/sim_backend.h"
#include "vsl/core/free_list.h"
#include "vsl/core/log.h"

namespace vsl::card {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;

std::string_view PipeModeName(PipeMode m) {
  return m == PipeMode::kSingle ? "single" : "dual";
}

Result<PipeMode> ParsePipeMode(std::string_view s) {
  if (s == "dual") return PipeMode::kDual;
  if (s == "single") return PipeMode::kSingle;
  return Status::InvalidArgument(fmt::format("pipe mode '{}' is not 'dual' or 'single'", s));
}

std::string_view LunStateName(LunState s) {
  switch (s) {
    case LunState::kOffline: return "offline";
    case LunState::kAttaching: return "attaching";
    case LunState::kOnline: return "online";
    case LunState::kDetaching: return "detaching";
    case LunState::kFormatting: return "formatting";
    case LunState::kResetting: return "resetting";
    case LunState::kUnformatted: return "unformatted";
    case LunState::kFailed: return "failed";
    case LunState::kThermalShutdown: return "thermal-shutdown";
    case LunState::kElsewhere: return "elsewhere";
    case LunState::kFenced: return "fenced";
  }
  return "?";
}

// The pipe as a LUN's FTL sees it: counts the commands outstanding (so a LUN knows when
// nothing refers to its FTL any more) and, once cut (a crash of the LUN's host side),
// refuses new commands with kAborted while those already issued complete normally.
class CountingPipe final : public nand::FlashPipe {
 public:
  CountingPipe(nand::FlashPipe& inner, Clock& clock, Lun::MediaCounters& media)
      : inner_(inner), clock_(clock), media_(media) {}
  const nand::PipeTopology& topology() const override { return inner_.topology(); }
  nand::PlpState plp_state() const override { return inner_.plp_state(); }
  void Read(const nand::ReadRequest& req, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Read(req, Count(std::move(done)));
  }
  void Program(const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Program(req, std::move(accepted), Count(std::move(done)));
  }
  void Erase(uint32_t die, uint32_t block, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Erase(die, block, Count(std::move(done)));
  }
  void Reset(uint32_t die, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Reset(die, Count(std::move(done)));
  }
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.ReadId(die, address, out, len, Count(std::move(done)));
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.ReadParameterPage(die, out, len, Count(std::move(done)));
  }
  uint32_t stage_slots() const override { return inner_.stage_slots(); }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted,
             FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Stage(slot, req, std::move(accepted), Count(std::move(done)));
  }
  void ClearStage(uint32_t slot) override {
    if (!cut_) inner_.ClearStage(slot);
  }
  uint32_t copy_accumulators() const override { return inner_.copy_accumulators(); }
  void ClearAccumulator(uint32_t acc) override {
    if (!cut_) inner_.ClearAccumulator(acc);
  }
  void Copy(const nand::CopyRequest& req, FlashCallback accepted, FlashCallback done) override {
    if (cut_) return Refuse(std::move(done));
    inner_.Copy(req, std::move(accepted), Count(std::move(done)));
  }

  // From now on commands are refused. Stage images stay in their slots until something
  // supersedes them, so they are emptied: the FTL that parked them is gone (the next one
  // re-protects part-written rows when it attaches).
  void Cut() {
    cut_ = true;
    for (uint32_t s = 0; s < inner_.stage_slots(); ++s) inner_.ClearStage(s);
  }
  uint64_t outstanding() const { return outstanding_; }
  // Called (posted, on the engine) the first time the card fences one of its commands.
  void OnFenced(Function<void()> f) { on_fenced_ = std::move(f); }

 private:
  // A command's completion as the FTL gave it, held while the command is out: the
  // wrapper handed down captures only the record, so it fits a Function's inline storage
  // and counting a command allocates nothing once the free list has grown to the number
  // of commands in flight. Records live as long as the pipe (callbacks already hold
  // `this`, so none runs after it).
  struct Pending {
    FlashCallback done;
  };
  FlashCallback Count(FlashCallback done) {
    ++outstanding_;
    Pending* p = pending_.Take();
    p->done = std::move(done);
    return [this, p](const Completion& c) {
      --outstanding_;
      if (c.status == FlashStatus::kFenced && on_fenced_ && !fenced_seen_) {
        fenced_seen_ = true;
        clock_.Post([this] { on_fenced_(); });
      }
      if (c.corrected_bits != 0) {
        media_.corrected_bits += c.corrected_bits;
        ++media_.corrected_ops;
      }
      if (c.status == FlashStatus::kUncorrectable) ++media_.uncorrectable;
      if (c.status == FlashStatus::kDieTimeout) ++media_.die_timeouts;
      // The record is free before the callback runs: what the callback submits may reuse it.
      FlashCallback d = std::move(p->done);
      pending_.Give(p);
      d(c);
    };
  }
  void Refuse(FlashCallback done) {
    ++outstanding_;
    clock_.Post([this, done = std::move(done)]() mutable {
      --outstanding_;
      Completion c;
      c.status = FlashStatus::kAborted;
      done(c);
    });
  }
  nand::FlashPipe& inner_;
  Clock& clock_;
  Lun::MediaCounters& media_;
  bool cut_ = false;
  bool fenced_seen_ = false;
  Function<void()> on_fenced_;
  uint64_t outstanding_ = 0;
  RecordPool<Pending> pending_;
};

// ---- Lun ----

Lun::Lun(Card& card, uint32_t index, uint32_t controller, std::vector<uint32_t> pipes, Engine& engine)
    : card_(card), index_(index), controller_(controller), pipes_(std::move(pipes)), engine_(&engine) {
  if (pipes_.size() == 2) {
    joined_ = std::make_unique<JoinedPipe>(*card_.governed_[pipes_[0]], *card_.governed_[pipes_[1]]);
  }
  NewPipe();
}

// On the LUN's engine thread (Card deletes LUNs there): its timers go with it, so none
// runs on a deleted LUN.
Lun::~Lun() {
  if (lease_timer_ != 0) engine_->Cancel(lease_timer_);
  if (quiet_timer_ != 0) engine_->Cancel(quiet_timer_);
}

void Lun::NewPipe() {
  nand::FlashPipe& inner = joined_ ? static_cast<nand::FlashPipe&>(*joined_) : *card_.governed_[pipes_[0]];
  counted_ = std::make_unique<CountingPipe>(inner, engine_->clock(), media_);
  if (shared()) {
    counted_->OnFenced([this] {
      if (!holds_) return;
      const nand::PipeOwner o = owner();
      Fenced(fmt::format("host {} took {} over (generation {}): the card fenced this host's commands", o.host, name(),
                         o.generation));
    });
  }
}

// ---- sharing (CardOptions::Sharing) ----

bool Lun::shared() const { return card_.opts_.sharing.host_id != 0; }

nand::PipeOwner Lun::owner() const { return card_.backend_->pipe(pipes_[0]).owner(); }

Status Lun::ClaimPipes(bool force) {
  const auto& sh = card_.opts_.sharing;
  std::vector<uint32_t> got;
  for (uint32_t p : pipes_) {
    const nand::ClaimReply r = card_.backend_->pipe(p).Claim(sh.host_id, force, sh.lease_ns);
    if (!r.granted) {
      for (uint32_t q : got) card_.backend_->pipe(q).Release();
      const TimeNs now = engine_->Now();
      if (r.owner.host == 0 && r.owner.generation == 0 && r.owner.lease_until == 0) {
        return Status::IOError(fmt::format("{}: the card did not answer the claim", name()));
      }
      const double left = r.owner.lease_until == kTimeNever ? -1
                          : r.owner.lease_until > now       ? (r.owner.lease_until - now) / 1e9
                                                            : 0;
      return Status::Busy(fmt::format(
          "{} is held by host {} (generation {}, lease {}): take it over with `vslctl takeover --lun {} --force`", name(),
          r.owner.host, r.owner.generation, left < 0 ? std::string("never runs out") : fmt::format("{:.1f} s left", left),
          index_));
    }
    got.push_back(p);
    Logger("card")->info("{}: pipe {} claimed by host {} (generation {})", name(), p, sh.host_id, r.owner.generation);
  }
  holds_ = true;
  card_.RefreshBudgetShare();
  if (lease_timer_ != 0) engine_->Cancel(lease_timer_);
  lease_timer_ = engine_->After(sh.lease_ns / 4, [this] { RenewLease(); });
  return Status::Ok();
}

void Lun::ReleasePipes() {
  if (lease_timer_ != 0) engine_->Cancel(lease_timer_);
  lease_timer_ = 0;
  if (!holds_) return;
  holds_ = false;
  card_.RefreshBudgetShare();
  for (uint32_t p : pipes_) card_.backend_->pipe(p).Release();
  Logger("card")->info("{}: released", name());
}

void Lun::RenewLease() {
  lease_timer_ = 0;
  if (!holds_) return;
  const auto& sh = card_.opts_.sharing;
  for (uint32_t p : pipes_) {
    if (!card_.backend_->pipe(p).Renew(sh.lease_ns)) {
      const nand::PipeOwner o = card_.backend_->pipe(p).owner();
      return Fenced(fmt::format("host {} took {} over (generation {}): this host's lease was not renewed",
                                o.host, name(), o.generation));
    }
  }
  lease_timer_ = engine_->After(sh.lease_ns / 4, [this] { RenewLease(); });
}

void Lun::Fenced(std::string why) {
  holds_ = false;
  card_.RefreshBudgetShare();
  if (lease_timer_ != 0) engine_->Cancel(lease_timer_);
  lease_timer_ = 0;
  if (fencing_) return;
  Logger("card")->error("{}: fenced: {}; it is no longer served here", name(), why);
  if (!ftl_) return SetState(LunState::kFenced, why);
  fencing_ = true;
  SetState(LunState::kFenced, why);
  counted_->Cut();
  ftl_->Abandon();
  WhenQuiet([this, why = std::move(why)]() mutable {
    PushHostIo();
    ftl_.reset();
    NewPipe();
    fencing_ = false;
    SetState(LunState::kFenced, std::move(why));
  });
}

void Lun::WithClaim(Done done, Function<void(Done)> then) {
  if (shared() && !holds_) {
    if (fencing_) return done(Status::Busy(fmt::format("{} is being fenced", name())));
    const Status s = ClaimPipes(false);
    if (!s.ok()) {
      SetState(s.code() == StatusCode::kBusy ? LunState::kElsewhere : LunState::kFailed, s.ToString());
      return done(s);
    }
  }
  then(std::move(done));
}

void Lun::Takeover(bool force, Done done) {
  if (!shared()) return done(Status::FailedPrecondition("the card is not shared (vsld --host-id)"));
  if (ftl_ && holds_) return done(Status::Ok());
  if (fencing_) return done(Status::Busy(fmt::format("{} is being fenced", name())));
  const nand::PipeOwner before = owner();
  const Status s = ClaimPipes(force);
  if (!s.ok()) {
    SetState(LunState::kElsewhere, s.ToString());
    return done(s);
  }
  Logger("card")->warn("{}: taken over from host {} (generation {}){}", name(), before.host, before.generation,
                       force ? " by force" : "");
  Attach(std::move(done));
}

void Lun::Release(Done done) {
  Detach([this, done = std::move(done)](Status s) mutable {
    ReleasePipes();
    if (shared() && s.ok()) SetState(LunState::kElsewhere, "released: any host may take it over");
    done(s);
  });
}

std::string Lun::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Lun::SetState(LunState s, std::string error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
  }
  state_.store(s);
}

void Lun::Attach(Done done) {
  if (ftl_) return done(Status::Ok());
  if (shared() && !holds_) return WithClaim(std::move(done), [this](Done d) { Attach(std::move(d)); });
  SetState(LunState::kAttaching);
  Logger("card")->info("{}: attaching", name());
  ftl::FtlOptions fo = card_.opts_.ftl;
  fo.copy_relocation = fo.copy_relocation && card_.opts_.CopyRelocationNow();
  ftl::Ftl::Open(*counted_, engine_->clock(), fo,
                 [this, done = std::move(done)](Result<std::unique_ptr<ftl::Ftl>> r) mutable {
                   if (!r.ok()) {
                     const Status s = r.status();
                     if (s.code() == StatusCode::kNotFound) {
                       SetState(LunState::kUnformatted, "never formatted (vslctl format)");
                     } else {
                       SetState(LunState::kFailed, s.ToString());
                       Logger("card")->error("{}: attach failed: {}", name(), s.ToString());
                     }
                     return done(s);
                   }
                   ftl_ = std::move(r).value();
                   const auto& ai = ftl_->attach_info();
                   Logger("card")->info("{}: online ({}; {} sectors of {} B, {:.1f} ms)", name(),
                                        ai.from_checkpoint ? "from checkpoint"
                                                           : fmt::format("scan of {} LEBs", ai.lebs_scanned),
                                        ftl_->sectors(), ftl_->sector_bytes(), ai.attach_ns / 1e6);
                   SetState(LunState::kOnline);
                   done(Status::Ok());
                 });
}

void Lun::WhenQuiet(Function<void()> then) {
  if ((!ftl_ || ftl_->Quiescent()) && counted_->outstanding() == 0) return then();
  quiet_timer_ = engine_->After(10 * kUs, [this, then = std::move(then)]() mutable {
    quiet_timer_ = 0;
    WhenQuiet(std::move(then));
  });
}

void Lun::Detach(Done done) {
  if (!ftl_) {
    if (state() == LunState::kOnline) SetState(LunState::kOffline);
    if (!fencing_) ReleasePipes();
    return done(Status::Ok());
  }
  SetState(LunState::kDetaching);
  ftl_->Shutdown([this, done = std::move(done)](Status s) mutable {
    WhenQuiet([this, s, done = std::move(done)]() mutable {
      PushHostIo();
      ftl_.reset();
      // The checkpoint is on flash: any host may attach from it.
      if (s.ok()) ReleasePipes();
      if (!s.ok()) Logger("card")->error("{}: detach: {}", name(), s.ToString());
      SetState(LunState::kOffline, s.ok() ? std::string() : s.ToString());
      Logger("card")->info("{}: offline", name());
      done(s);
    });
  });
}

void Lun::ThermalStop(Done done) {
  if (!ftl_ || state() != LunState::kOnline) return done(Status::Ok());
  Detach([this, done = std::move(done)](Status s) mutable {
    thermal_stopped_ = true;
    SetState(LunState::kThermalShutdown,
             "thermal shutdown: the card overheated; flushed and checkpointed, back online once it is cool");
    done(s);
  });
}

void Lun::PushHostIo() {
  if (!ftl_) return;
  if (ftl_.get() != io_ftl_) {  // a new attach: its counters start from zero
    io_ftl_ = ftl_.get();
    io_read_ = io_write_ = 0;
  }
  const auto& st = ftl_->stats();
  const uint64_t r = st.host_read_sectors * ftl_->sector_bytes();
  const uint64_t w = st.host_write_sectors * ftl_->sector_bytes();
  card_.backend_->AccountHostIo(controller_, r - io_read_, w - io_write_);
  io_read_ = r;
  io_write_ = w;
}

void Lun::Periodic() {
  PushHostIo();
  const bool reduced = ftl_ && ftl_->health_mode() == ftl::HealthMode::kReducedWrite;
  const double share = reduced ? card_.governor_->policy().reduced_write_share : 1.0;
  for (uint32_t p : pipes_) card_.governed_[p]->SetWriteShare(share);
}

void Lun::Format(const ftl::FormatOptions& fo, Done done) {
  if (ftl_) {
    return done(Status::FailedPrecondition(fmt::format("{} is attached: detach it before formatting", name())));
  }
  if (shared() && !holds_) return WithClaim(std::move(done), [this, fo](Done d) { Format(fo, std::move(d)); });
  SetState(LunState::kFormatting);
  ftl::Ftl::Format(*counted_, engine_->clock(), fo, [this, done = std::move(done)](Status s) mutable {
    WhenQuiet([this, s, done = std::move(done)]() mutable {
      SetState(s.ok() ? LunState::kOffline : LunState::kFailed, s.ok() ? std::string() : s.ToString());
      done(s);
    });
  });
}

void Lun::Reset(Done done) {
  SetState(LunState::kResetting);
  Logger("card")->warn("{}: reset: its engine state is dropped and recovered from flash", name());
  counted_->Cut();
  if (ftl_) ftl_->Abandon();
  // The FTL learns of the cut from its refused commands and stops; once nothing refers to
  // it, it is dropped and the LUN attaches on a fresh view of its pipe.
  WhenQuiet([this, done = std::move(done)]() mutable {
    PushHostIo();
    ftl_.reset();
    NewPipe();
    Attach(std::move(done));
  });
}

void Lun::SureErase(Function<void(Status, EraseReport)> done) {
  if (ftl_) {
    return done(Status::FailedPrecondition(fmt::format("{} is attached: detach it first", name())), {});
  }
  if (shared() && !holds_) {
    const Status s = ClaimPipes(false);
    if (!s.ok()) return done(s, {});
  }
  SetState(LunState::kFormatting);
  nand::FlashPipe& pipe = *counted_;
  const uint32_t dies = pipe.topology().dies();
  const nand::Geometry& g = card_.backend_->geometry();
  struct St {
    EraseReport report;
    uint64_t left = 1;
    std::vector<uint8_t> data, meta;
    Function<void(Status, EraseReport)> done;
  };
  auto st = std::make_shared<St>();
  st->done = std::move(done);
  auto finish = [this, st]() {
    if (--st->left != 0) return;
    SetState(LunState::kUnformatted, "sure-erased");
    Logger("card")->warn("{}: sure-erased: {} blocks erased and verified blank, {} bad, {} not blank", name(),
                         st->report.erased, st->report.bad, st->report.not_blank);
    auto d = std::move(st->done);
    d(st->report.not_blank == 0 ? Status::Ok()
                                : Status::IOError(fmt::format("{} block(s) did not read back blank",
                                                              st->report.not_blank)),
      st->report);
  };
  // Per die, erase then verify each block (a die runs its commands in order).
  for (uint32_t d = 0; d < dies; ++d) {
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      ++st->left;
      ++st->report.blocks;
      pipe.Erase(d, b, [this, st, finish, d, b, &pipe, &g](const Completion& c) mutable {
        if (!c.ok()) {
          ++st->report.bad;
          return finish();
        }
        ++st->report.erased;
        auto buf = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
        buf->first.resize(g.page_data_bytes);
        buf->second.resize(g.meta_bytes_per_page());
        pipe.Read({{d, b, 0}, 0, 0, buf->first.data(), buf->second.data()},
                  [st, finish, buf](const Completion& rc) mutable {
                    auto blank = [](const std::vector<uint8_t>& v) {
                      return std::all_of(v.begin(), v.end(), [](uint8_t x) { return x == 0xFF; });
                    };
                    if (!rc.ok() || !blank(buf->first) || !blank(buf->second)) ++st->report.not_blank;
                    finish();
                  });
      });
    }
  }
  finish();
}

Status Lun::Call(Function<void(Done)> op) { return card_.CallOnEngine(*engine_, std::move(op)); }

Status Card::CallOnPipe(uint32_t pipe, Function<void(Function<void(Status)>)> op) {
  return CallOnEngine(PipeEngine(pipe), std::move(op));
}

Status Card::CallOnEngine(Engine& engine, Function<void(Function<void(Status)>)> op) {
  if (threaded()) {
    std::promise<Status> p;
    auto f = p.get_future();
    while (!engine.Submit([&op, &p] { op([&p](Status s) { p.set_value(s); }); })) {
      std::this_thread::yield();
    }
    return f.get();
  }
  std::optional<Status> r;
  op([&r](Status s) { r = s; });
  if (vclock_ != nullptr) vclock_->RunUntilTrue([&r] { return r.has_value(); });
  return r.value_or(Status::Internal("the operation did not complete"));
}

// ---- Card ----

Result<std::unique_ptr<Card>> Card::Open(const std::string& dir, const CardOptions& opts) {
  VSL_ASSIGN_OR_RETURN(CardSpec spec, ParseCardSpec(dir));
  if (spec.kind != "sim") {
    return Status::InvalidArgument(fmt::format(
        "card '{}' is on the {} backend: open it through vsl/backend/open.h (vsld, vslctl and the SDK do)", dir,
        spec.kind));
  }
  VSL_ASSIGN_OR_RETURN(std::unique_ptr<CardBackend> b, MakeSimBackend(spec.path, opts.sim));
  auto card = Open(std::move(b), opts);
  if (card.ok()) (*card)->dir_ = dir;
  return card;
}

Result<std::unique_ptr<Card>> Card::Open(std::unique_ptr<CardBackend> backend, const CardOptions& opts) {
  auto card = std::unique_ptr<Card>(new Card());
  card->dir_ = backend->spec();
  card->opts_ = opts;
  const nand::Geometry g = backend->geometry();
  const uint32_t pipes = g.controllers * g.pipes_per_controller;
  std::vector<Clock*> clocks;
  if (opts.clock != nullptr) {
    if (opts.clock->is_virtual()) card->vclock_ = static_cast<VirtualClock*>(opts.clock);
    card->shared_engine_ = std::make_unique<Engine>("card", *opts.clock);
    clocks.assign(pipes, opts.clock);
  } else {
    // An engine thread per pipe, or one for the card when the backend needs it.
    const uint32_t threads = backend->one_engine() ? 1 : pipes;
    for (uint32_t p = 0; p < threads; ++p) {
      card->engine_threads_.push_back(
          std::make_unique<EngineThread>(threads == 1 && pipes > 1 ? std::string("card") : fmt::format("pipe{}", p)));
    }
    for (uint32_t p = 0; p < pipes; ++p) clocks.push_back(&card->PipeEngine(p).clock());
  }
  // The backend's start-up operations run on the pipes' engines, as a LUN's do.
  struct Runner final : PipeRunner {
    Card& card;
    explicit Runner(Card& c) : card(c) {}
    Status Call(uint32_t pipe, Function<void(Function<void(Status)>)> op) override {
      return card.CallOnPipe(pipe, std::move(op));
    }
  } runner(*card);
  VSL_RETURN_IF_ERROR(backend->Start(clocks, runner));
  card->backend_ = std::move(backend);
  CardBackend& be = *card->backend_;
  VSL_RETURN_IF_ERROR(CheckPowerPolicy(opts.power, be.power_model().static_w * g.controllers));
  card->governor_ = std::make_unique<PowerGovernor>(be.power_model(), g, be.timing(), opts.power, be.zero_time());
  for (uint32_t p = 0; p < pipes; ++p) {
    card->governed_.push_back(std::make_unique<GovernedPipe>(be.pipe(p), *card->governor_, card->PipeEngine(p).clock()));
  }
  card->mon_.controllers.resize(card->controllers());
  card->governor_->SetWake([c = card.get()] { c->WakeMonitor(); });
  card->luns_.resize(pipes);
  for (uint32_t c = 0; c < card->controllers(); ++c) {
    if (be.pipe_mode(c) == static_cast<uint8_t>(PipeMode::kSingle) && g.pipes_per_controller != 2) {
      return Status::Corruption(
          fmt::format("controller {} is in single-pipe mode but has {} pipe(s)", c, g.pipes_per_controller));
    }
    VSL_RETURN_IF_ERROR(card->LayOut(c));
  }
  if (const auto& sh = opts.sharing; sh.host_id != 0) {
    if (!card->threaded()) return Status::InvalidArgument("a shared card runs its LUNs on engine threads");
    if (!be.pipe(0).offers_ownership()) {
      return Status::NotSupported(fmt::format("card {} offers no pipe ownership: it cannot be shared (--host-id)",
                                              be.spec()));
    }
    if (sh.host_id > 0xFFFF) return Status::InvalidArgument(fmt::format("host id {} is over 65535", sh.host_id));
    if (sh.lease_ns < 100 * kMs) return Status::InvalidArgument("a lease shorter than 100 ms cannot be renewed in time");
    for (uint32_t l : sh.luns) {
      if (card->lun(l) == nullptr) return Status::InvalidArgument(fmt::format("the card has no LUN {}", l));
    }
    card->RefreshBudgetShare();
    if (sh.auto_takeover) card->takeover_thread_ = std::thread([c = card.get()] { c->TakeoverLoop(); });
  }
  return card;
}

Card::~Card() {
  if (takeover_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> l(takeover_mu_);
      takeover_stop_ = true;
    }
    takeover_cv_.notify_all();
    takeover_thread_.join();
  }
  (void)DetachAll();
  if (governor_) {  // Open got that far
    RunOnPipe(0, [this] {
      monitor_stopping_ = true;
      if (monitor_timer_ != 0) PipeEngine(0).Cancel(monitor_timer_);
      monitor_timer_ = 0;
    });
  }
  // A fenced LUN drops its FTL once the pipe's outstanding commands are answered (the
  // card fails them when its connection is lost): let that finish, for a while, so its
  // FTL does not go with commands still out. Then every LUN is deleted on its engine's
  // thread, between that engine's tasks, and cancels its own timers.
  for (int i = 0; threaded() && i < 10000; ++i) {
    bool fencing = false;
    for (uint32_t p = 0; p < luns_.size(); ++p) {
      if (luns_[p]) RunOnPipe(p, [&fencing, l = luns_[p].get()] { fencing = fencing || l->fencing_; });
    }
    if (!fencing) break;
    if (i == 9999) Logger("card")->error("card: a fenced LUN is still waiting for its commands; closing anyway");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::unique_ptr<Lun>> old;
  {
    std::lock_guard<std::mutex> lock(luns_mu_);
    old = std::move(luns_);
    luns_.clear();
  }
  DeleteLuns(std::move(old));
  // Each governed pipe goes on the engine it is bound to (its retry timer lives there).
  for (uint32_t p = 0; p < governed_.size(); ++p) {
    uint32_t owner = p;
    for (uint32_t q = 0; q < governed_.size(); ++q) {
      if (&PipeEngine(q).clock() == governed_[p]->clock()) {
        owner = q;
        break;
      }
    }
    RunOnPipe(owner, [this, p] { governed_[p].reset(); });
  }
  if (vclock_ != nullptr) vclock_->RunUntilIdle();
  if (backend_) backend_->Stop();  // while the pipes' clocks still run
  // Engine threads stop first (their clocks hold the card's pending events), then the card.
  engine_threads_.clear();
  backend_.reset();
  shared_engine_.reset();
}

Engine& Card::PipeEngine(uint32_t pipe) {
  if (shared_engine_) return *shared_engine_;
  return engine_threads_.size() == 1 ? engine_threads_[0]->engine() : engine_threads_.at(pipe)->engine();
}

void Card::RunOnPipe(uint32_t pipe, Function<void()> f) {
  if (!threaded()) return f();
  std::promise<void> done;
  auto fut = done.get_future();
  while (!PipeEngine(pipe).Submit([&f, &done] {
    f();
    done.set_value();
  })) {
    std::this_thread::yield();
  }
  fut.wait();
}

PipeMode Card::pipe_mode(uint32_t controller) const {
  return static_cast<PipeMode>(backend_->pipe_mode(controller));
}

void Card::DeleteLuns(std::vector<std::unique_ptr<Lun>> old) {
  for (auto& l : old) {
    if (!l) continue;
    const uint32_t p = l->index();
    if (PipeEngine(p).OnEngineThread()) {
      l.reset();
    } else {
      RunOnPipe(p, [&l] { l.reset(); });
    }
  }
}

Status Card::LayOut(uint32_t c) {
  const uint32_t ppc = backend_->geometry().pipes_per_controller;
  const uint32_t first = c * ppc;
  // The old LUNs leave luns_ under the lock (no one finds them there after), and each is
  // deleted on its engine's thread: a task already sent to it (MonitorTick's Periodic)
  // runs wholly before, or after and finds it gone (IsCurrent).
  std::vector<std::unique_ptr<Lun>> old;
  {
    std::lock_guard<std::mutex> lock(luns_mu_);
    for (uint32_t p = first; p < first + ppc; ++p) {
      if (luns_[p]) old.push_back(std::move(luns_[p]));
    }
  }
  DeleteLuns(std::move(old));
  std::lock_guard<std::mutex> lock(luns_mu_);
  if (pipe_mode(c) == PipeMode::kSingle) {
    // Both pipes on the first pipe's engine: one LUN, one thread.
    VSL_RETURN_IF_ERROR(backend_->RebindPipe(first + 1, PipeEngine(first).clock()));
    governed_[first + 1]->Rebind(PipeEngine(first).clock());
    luns_[first].reset(new Lun(*this, first, c, {first, first + 1}, PipeEngine(first)));
  } else {
    for (uint32_t p = first; p < first + ppc; ++p) {
      VSL_RETURN_IF_ERROR(backend_->RebindPipe(p, PipeEngine(p).clock()));
      governed_[p]->Rebind(PipeEngine(p).clock());
      luns_[p].reset(new Lun(*this, p, c, {p}, PipeEngine(p)));
    }
  }
  return Status::Ok();
}

std::vector<Lun*> Card::luns() {
  std::vector<Lun*> out;
  std::lock_guard<std::mutex> lock(luns_mu_);
  for (auto& l : luns_) {
    if (l) out.push_back(l.get());
  }
  return out;
}

Lun* Card::lun(uint32_t index) {
  std::lock_guard<std::mutex> lock(luns_mu_);
  return index < luns_.size() ? luns_[index].get() : nullptr;
}

bool Card::IsCurrent(const Lun* l) {
  std::lock_guard<std::mutex> lock(luns_mu_);
  for (const auto& x : luns_) {
    if (x.get() == l) return true;
  }
  return false;
}

namespace {
// Runs `op` on every LUN of `luns` at once and waits for all; returns the first error
// not in `tolerated`.
Status ForAll(Card& card, const std::vector<Lun*>& luns,
              const std::function<void(Lun&, Lun::Done)>& op, StatusCode tolerated) {
  struct Shared {
    std::mutex mu;
    uint32_t left = 0;
    Status first;
    std::promise<void> all;
  };
  auto sh = std::make_shared<Shared>();
  sh->left = static_cast<uint32_t>(luns.size());
  if (luns.empty()) return Status::Ok();
  auto fut = sh->all.get_future();
  auto finish = [sh, tolerated](Status s) {
    std::lock_guard<std::mutex> lock(sh->mu);
    if (!s.ok() && s.code() != tolerated && sh->first.ok()) sh->first = s;
    if (--sh->left == 0) sh->all.set_value();
  };
  for (Lun* l : luns) {
    Lun* lp = l;
    if (card.threaded()) {
      while (!lp->engine().Submit([lp, op, finish] { op(*lp, finish); })) std::this_thread::yield();
    } else {
      op(*lp, finish);
    }
  }
  if (card.threaded()) {
    fut.wait();
  } else if (card.virtual_clock() != nullptr) {
    card.virtual_clock()->RunUntilTrue(
        [&fut] { return fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  }
  std::lock_guard<std::mutex> lock(sh->mu);
  return sh->first;
}
}  // namespace

void Card::RefreshBudgetShare() {
  if (opts_.sharing.host_id == 0 || !governor_) return;
  uint32_t held = 0;
  std::lock_guard<std::mutex> lock(luns_mu_);
  for (const auto& l : luns_) {
    if (l && l->holds_) held += static_cast<uint32_t>(l->pipes().size());
  }
  governor_->SetBudgetShare(static_cast<double>(held) / backend_->pipe_count());
}

bool Card::Serves(uint32_t index) const {
  const auto& v = opts_.sharing.luns;
  return opts_.sharing.host_id == 0 || v.empty() || std::find(v.begin(), v.end(), index) != v.end();
}

Status Card::AttachAll() {
  std::vector<Lun*> mine;
  for (Lun* l : luns()) {
    if (Serves(l->index())) {
      mine.push_back(l);
    } else if (l->state() == LunState::kOffline) {
      l->SetState(LunState::kElsewhere, fmt::format("not served by this host (host {})", opts_.sharing.host_id));
    }
  }
  // A LUN another host holds stays with it (kElsewhere, not an error of this host's).
  Status first;
  const Status s = ForAll(*this, mine, [](Lun& l, Lun::Done d) {
    l.Attach([&l, d = std::move(d)](Status st) mutable {
      if (st.code() == StatusCode::kBusy && l.state() == LunState::kElsewhere) st = Status::Ok();
      d(st);
    });
  }, StatusCode::kNotFound);
  return s;
}

void Card::TakeoverLoop() {
  const DurNs period = std::max<DurNs>(opts_.sharing.lease_ns / 4, 10 * kMs);
  std::unique_lock<std::mutex> l(takeover_mu_);
  while (!takeover_cv_.wait_for(l, std::chrono::nanoseconds(period), [this] { return takeover_stop_; })) {
    l.unlock();
    for (Lun* lun : luns()) {
      const LunState st = lun->state();
      if (st != LunState::kElsewhere && st != LunState::kFenced && st != LunState::kOffline) continue;
      nand::PipeOwner o;
      TimeNs now = 0;
      RunOnPipe(lun->pipes()[0], [&] {
        o = lun->owner();
        now = PipeEngine(lun->pipes()[0]).Now();
      });
      // A holder that stopped renewing: dead, paused or cut off from the card. (A LUN
      // released on purpose, host 0, is not taken: its host handed it over cleanly.)
      if (o.host == 0 || o.host == opts_.sharing.host_id || o.lease_until > now) continue;
      Logger("card")->warn("{}: host {}'s lease ran out: taking it over", lun->name(), o.host);
      const Status s = lun->Call([lun](Lun::Done d) { lun->Takeover(false, std::move(d)); });
      if (!s.ok()) Logger("card")->error("{}: automatic takeover: {}", lun->name(), s.ToString());
    }
    l.lock();
  }
}

Status Card::DetachAll() {
  return ForAll(*this, luns(), [](Lun& l, Lun::Done d) { l.Detach(std::move(d)); }, StatusCode::kOk);
}

Status Card::FormatController(uint32_t c, PipeMode mode, const ftl::FormatOptions& fo) {
  if (c >= controllers()) return Status::InvalidArgument(fmt::format("the card has no controller {}", c));
  VSL_RETURN_IF_ERROR(ftl::CheckFormatOptions(fo));  // before anything changes
  if (mode == PipeMode::kSingle && backend_->geometry().pipes_per_controller != 2) {
    return Status::InvalidArgument(fmt::format(
        "single-pipe mode joins two pipes; controller {} has {}", c, backend_->geometry().pipes_per_controller));
  }
  std::vector<Lun*> mine;
  for (Lun* l : luns()) {
    if (l->controller() == c) mine.push_back(l);
  }
  VSL_RETURN_IF_ERROR(ForAll(*this, mine, [](Lun& l, Lun::Done d) { l.Detach(std::move(d)); }, StatusCode::kOk));
  if (pipe_mode(c) != mode) {
    VSL_RETURN_IF_ERROR(backend_->SetPipeMode(c, static_cast<uint8_t>(mode)));
    Logger("card")->info("controller {}: {}-pipe mode", c, PipeModeName(mode));
  }
  VSL_RETURN_IF_ERROR(LayOut(c));
  mine.clear();
  for (Lun* l : luns()) {
    if (l->controller() == c) mine.push_back(l);
  }
  return ForAll(*this, mine, [fo](Lun& l, Lun::Done d) { l.Format(fo, std::move(d)); }, StatusCode::kOk);
}

}  // namespace vsl::card
