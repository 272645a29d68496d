#include "vsl/card/card.h"

#include <algorithm>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "vsl/card/joined_pipe.h"
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
  }
  return "?";
}

// The pipe as a LUN's FTL sees it: counts the commands outstanding (so a LUN knows when
// nothing refers to its FTL any more) and, once cut (a crash of the LUN's host side),
// refuses new commands with kAborted while those already issued complete normally.
class CountingPipe final : public nand::FlashPipe {
 public:
  CountingPipe(nand::FlashPipe& inner, Clock& clock) : inner_(inner), clock_(clock) {}
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

  // From now on commands are refused. Stage images stay in their slots until something
  // supersedes them, so they are emptied: the FTL that parked them is gone (the next one
  // re-protects part-written rows when it attaches).
  void Cut() {
    cut_ = true;
    for (uint32_t s = 0; s < inner_.stage_slots(); ++s) inner_.ClearStage(s);
  }
  uint64_t outstanding() const { return outstanding_; }

 private:
  FlashCallback Count(FlashCallback done) {
    ++outstanding_;
    return [this, done = std::move(done)](const Completion& c) mutable {
      --outstanding_;
      done(c);
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
  bool cut_ = false;
  uint64_t outstanding_ = 0;
};

// ---- Lun ----

Lun::Lun(Card& card, uint32_t index, uint32_t controller, std::vector<uint32_t> pipes, Engine& engine)
    : card_(card), index_(index), controller_(controller), pipes_(std::move(pipes)), engine_(&engine) {
  if (pipes_.size() == 2) {
    joined_ = std::make_unique<JoinedPipe>(card_.sim().pipe(pipes_[0]), card_.sim().pipe(pipes_[1]));
  }
  NewPipe();
}

Lun::~Lun() = default;

void Lun::NewPipe() {
  nand::FlashPipe& inner = joined_ ? static_cast<nand::FlashPipe&>(*joined_) : card_.sim().pipe(pipes_[0]);
  counted_ = std::make_unique<CountingPipe>(inner, engine_->clock());
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
  SetState(LunState::kAttaching);
  Logger("card")->info("{}: attaching", name());
  ftl::Ftl::Open(*counted_, engine_->clock(), card_.opts_.ftl,
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
  engine_->After(10 * kUs, [this, then = std::move(then)]() mutable { WhenQuiet(std::move(then)); });
}

void Lun::Detach(Done done) {
  if (!ftl_) {
    if (state() == LunState::kOnline) SetState(LunState::kOffline);
    return done(Status::Ok());
  }
  SetState(LunState::kDetaching);
  ftl_->Shutdown([this, done = std::move(done)](Status s) mutable {
    WhenQuiet([this, s, done = std::move(done)]() mutable {
      ftl_.reset();
      if (!s.ok()) Logger("card")->error("{}: detach: {}", name(), s.ToString());
      SetState(LunState::kOffline, s.ok() ? std::string() : s.ToString());
      Logger("card")->info("{}: offline", name());
      done(s);
    });
  });
}

void Lun::Format(const ftl::FormatOptions& fo, Done done) {
  if (ftl_) {
    return done(Status::FailedPrecondition(fmt::format("{} is attached: detach it before formatting", name())));
  }
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
    ftl_.reset();
    NewPipe();
    Attach(std::move(done));
  });
}

void Lun::SureErase(Function<void(Status, EraseReport)> done) {
  if (ftl_) {
    return done(Status::FailedPrecondition(fmt::format("{} is attached: detach it first", name())), {});
  }
  SetState(LunState::kFormatting);
  nand::FlashPipe& pipe = *counted_;
  const uint32_t dies = pipe.topology().dies();
  const nand::Geometry& g = card_.sim().geometry();
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

Status Lun::Call(Function<void(Done)> op) {
  if (card_.threaded()) {
    std::promise<Status> p;
    auto f = p.get_future();
    while (!engine_->Submit([&op, &p] { op([&p](Status s) { p.set_value(s); }); })) {
      std::this_thread::yield();
    }
    return f.get();
  }
  std::optional<Status> r;
  op([&r](Status s) { r = s; });
  if (card_.vclock_ != nullptr) card_.vclock_->RunUntilTrue([&r] { return r.has_value(); });
  return r.value_or(Status::Internal("the operation did not complete"));
}

// ---- Card ----

Result<std::unique_ptr<Card>> Card::Open(const std::string& dir, const CardOptions& opts) {
  auto card = std::unique_ptr<Card>(new Card());
  card->dir_ = dir;
  card->opts_ = opts;
  VSL_ASSIGN_OR_RETURN(simcard::SimCard::Probed probed, simcard::SimCard::Probe(dir));
  const std::vector<uint8_t>& modes = probed.pipe_modes;
  simcard::SimCardOptions so = opts.sim;
  so.pipe_clocks.clear();
  Clock* card_clock = opts.clock;
  if (opts.clock != nullptr) {
    if (opts.clock->is_virtual()) card->vclock_ = static_cast<VirtualClock*>(opts.clock);
    card->shared_engine_ = std::make_unique<Engine>("card", *opts.clock);
  } else {
    // An engine thread per pipe.
    const auto& g = probed.geometry;
    const uint32_t pipes = g.controllers * g.pipes_per_controller;
    for (uint32_t p = 0; p < pipes; ++p) {
      card->engine_threads_.push_back(std::make_unique<EngineThread>(fmt::format("pipe{}", p)));
      so.pipe_clocks.push_back(&card->engine_threads_.back()->engine().clock());
    }
    card_clock = so.pipe_clocks[0];
  }
  VSL_ASSIGN_OR_RETURN(card->sim_, simcard::SimCard::Open(dir, *card_clock, so));
  card->luns_.resize(card->sim_->pipe_count());
  for (uint32_t c = 0; c < card->controllers(); ++c) {
    if (modes.at(c) == static_cast<uint8_t>(PipeMode::kSingle) &&
        card->sim_->geometry().pipes_per_controller != 2) {
      return Status::Corruption(fmt::format("controller {} is in single-pipe mode but has {} pipe(s)", c,
                                            card->sim_->geometry().pipes_per_controller));
    }
    VSL_RETURN_IF_ERROR(card->LayOut(c));
  }
  return card;
}

Card::~Card() {
  (void)DetachAll();
  luns_.clear();
  if (vclock_ != nullptr) vclock_->RunUntilIdle();
  // Engine threads stop first (their clocks hold the card's pending events), then the card.
  engine_threads_.clear();
  sim_.reset();
  shared_engine_.reset();
}

Engine& Card::PipeEngine(uint32_t pipe) {
  return shared_engine_ ? *shared_engine_ : engine_threads_.at(pipe)->engine();
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
  return static_cast<PipeMode>(sim_->pipe_mode(controller));
}

Status Card::LayOut(uint32_t c) {
  const uint32_t ppc = sim_->geometry().pipes_per_controller;
  const uint32_t first = c * ppc;
  for (uint32_t p = first; p < first + ppc; ++p) luns_[p].reset();
  if (pipe_mode(c) == PipeMode::kSingle) {
    // Both pipes on the first pipe's engine: one LUN, one thread.
    VSL_RETURN_IF_ERROR(sim_->RebindPipe(first + 1, PipeEngine(first).clock()));
    luns_[first].reset(new Lun(*this, first, c, {first, first + 1}, PipeEngine(first)));
  } else {
    for (uint32_t p = first; p < first + ppc; ++p) {
      VSL_RETURN_IF_ERROR(sim_->RebindPipe(p, PipeEngine(p).clock()));
      luns_[p].reset(new Lun(*this, p, c, {p}, PipeEngine(p)));
    }
  }
  return Status::Ok();
}

std::vector<Lun*> Card::luns() {
  std::vector<Lun*> out;
  for (auto& l : luns_) {
    if (l) out.push_back(l.get());
  }
  return out;
}

Lun* Card::lun(uint32_t index) { return index < luns_.size() ? luns_[index].get() : nullptr; }

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

Status Card::AttachAll() {
  return ForAll(*this, luns(), [](Lun& l, Lun::Done d) { l.Attach(std::move(d)); }, StatusCode::kNotFound);
}

Status Card::DetachAll() {
  return ForAll(*this, luns(), [](Lun& l, Lun::Done d) { l.Detach(std::move(d)); }, StatusCode::kOk);
}

Status Card::FormatController(uint32_t c, PipeMode mode, const ftl::FormatOptions& fo) {
  if (c >= controllers()) return Status::InvalidArgument(fmt::format("the card has no controller {}", c));
  VSL_RETURN_IF_ERROR(ftl::CheckFormatOptions(fo));  // before anything changes
  if (mode == PipeMode::kSingle && sim_->geometry().pipes_per_controller != 2) {
    return Status::InvalidArgument(fmt::format(
        "single-pipe mode joins two pipes; controller {} has {}", c, sim_->geometry().pipes_per_controller));
  }
  std::vector<Lun*> mine;
  for (Lun* l : luns()) {
    if (l->controller() == c) mine.push_back(l);
  }
  VSL_RETURN_IF_ERROR(ForAll(*this, mine, [](Lun& l, Lun::Done d) { l.Detach(std::move(d)); }, StatusCode::kOk));
  if (pipe_mode(c) != mode) {
    VSL_RETURN_IF_ERROR(sim_->SetPipeMode(c, static_cast<uint8_t>(mode)));
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
