// In-process backend: the card's engines run in this process; requests go to the LUN's
// engine (its FTL is touched only there) and complete from it.
#include <cerrno>
#include <cstddef>
#include <filesystem>

#include "sdk/src/device.h"
#include "sdk/src/lun_exec.h"
#include "vsl/card/card.h"
#if VSL_SDK_BACKENDS
#include "vsl/backend/open.h"
#endif

namespace vsl::sdk {
namespace {


int ToErrno(const Status& s) { return s.ToErrno(); }

class LocalBackend : public Backend {
 public:
  LocalBackend(std::unique_ptr<card::Card> c, card::Lun* lun, VirtualClock* vclock)
      : card_(std::move(c)), lun_(lun), vclock_(vclock) {}

  Status Init() { return LunCaps(*lun_, &caps_); }
  void SetVolatile(bool v) {
    if (v) caps_.flags |= VSL_CAP_VOLATILE_CACHE;
  }

  const vsl_caps& caps() const override { return caps_; }

  void Run(Op* op, Function<void()> done) override {
    // On this thread when the engine is idle: a QD1 caller pays no hand-off.
    op->done = std::move(done);
    lun_->engine().RunHere([this, op] { ExecuteOnLun(*lun_, op); });
  }

  // A waiter that spins drives the idle engine itself: the stages of its request that are
  // left (timers due now on a zero-time card, a modelled completion when due) run here
  // instead of waiting for the engine's thread to be scheduled.
  void Poll() override { lun_->engine().PollHere(); }

  void WaitUntil(const std::function<bool()>& ready, const std::function<void()>& block) override {
    if (vclock_ == nullptr) return Backend::WaitUntil(ready, block);
    vclock_->RunUntilTrue([&ready] { return ready(); });
  }

  int Close() override {
    Status s = card_->DetachAll();
    card_.reset();
    return s.ok() ? 0 : ToErrno(s);
  }

 private:
  std::unique_ptr<card::Card> card_;
  card::Lun* lun_;
  VirtualClock* vclock_;
  vsl_caps caps_{};
};

}  // namespace

int OpenInProcess(const std::string& card_dir, uint32_t lun, const InProcessOptions& o, vsl_dev** out) {
  if (out == nullptr) return SetLastError(-EINVAL, "no place for the handle");
  *out = nullptr;
  // `card_dir` is a card spec: a directory (or sim:DIR), rtl:DIR, kernel:DIR, xrt:N.
  auto spec = card::ParseCardSpec(card_dir);
  if (!spec.ok()) return SetLastError(-EINVAL, spec.status().ToString());
  if (spec->kind != "xrt" && !std::filesystem::is_directory(spec->path)) {
    return SetLastError(-ENOENT, "no card directory " + spec->path);
  }
  if (o.zero_time && spec->kind != "sim") {
    return SetLastError(-EINVAL, "zero-time (VSL_TIMING_NONE) applies to simulated cards only, not to " + card_dir);
  }
  card::CardOptions co;
  co.clock = o.clock;
  co.sim.seed = o.seed;
  co.sim.null_timing = o.zero_time;
#if VSL_SDK_BACKENDS
  auto c = backend::OpenCard(card_dir, co);
#else
  if (spec->kind != "sim") {
    return SetLastError(-EOPNOTSUPP, "libvsl.so opens simulated cards in process; open " + card_dir +
                                         " through vsld (vsl_open_attached) or link the static SDK");
  }
  auto c = card::Card::Open(card_dir, co);
#endif
  if (!c.ok()) {
    return SetLastError(c.status().code() == StatusCode::kBusy ? -EBUSY : ToErrno(c.status()),
                        c.status().ToString());
  }
  std::unique_ptr<card::Card> card = std::move(c).value();
  card::Lun* l = card->lun(lun);
  if (l == nullptr) return SetLastError(-ENOENT, "the card has no LUN " + std::to_string(lun));
  Status s = l->Call([l](ftl::Ftl::Done d) { l->Attach(std::move(d)); });
  if (!s.ok()) return SetLastError(s.code() == StatusCode::kNotFound ? -ENODEV : ToErrno(s), s.ToString());
  const bool plp_ok = card->backend().plp_state() == nand::PlpState::kHealthy;
  card::Card* raw = card.get();
  auto be = std::make_unique<LocalBackend>(std::move(card), l, o.clock);
  if (Status st = be->Init(); !st.ok()) return SetLastError(ToErrno(st), st.ToString());
  be->SetVolatile(!plp_ok);
  if (o.card_out != nullptr) *o.card_out = raw;
  *out = NewDevice(std::move(be));
  return SetLastError(0, "");
}

}  // namespace vsl::sdk

extern "C" int vsl_open_card(const char* card_dir, uint32_t lun, vsl_dev** out) {
  if (out != nullptr) *out = nullptr;
  if (card_dir == nullptr) return vsl::sdk::SetLastError(-EINVAL, "no card directory given");
  return vsl::sdk::OpenInProcess(card_dir, lun, {}, out);
}

extern "C" int vsl_open_card_opts(const char* card_dir, uint32_t lun, const vsl_open_opts* opts, vsl_dev** out) {
  if (out != nullptr) *out = nullptr;
  if (card_dir == nullptr) return vsl::sdk::SetLastError(-EINVAL, "no card directory given");
  vsl::sdk::InProcessOptions o;
  if (opts != nullptr) {
    if (opts->size < offsetof(vsl_open_opts, reserved)) {
      return vsl::sdk::SetLastError(-EINVAL, "vsl_open_opts.size is too small (set it to sizeof(vsl_open_opts))");
    }
    if (opts->timing != VSL_TIMING_MODEL && opts->timing != VSL_TIMING_NONE) {
      return vsl::sdk::SetLastError(-EINVAL, "vsl_open_opts.timing: unknown timing " + std::to_string(opts->timing));
    }
    if (opts->size >= sizeof(vsl_open_opts)) {
      for (uint64_t r : opts->reserved) {
        if (r != 0) return vsl::sdk::SetLastError(-EINVAL, "vsl_open_opts: reserved fields must be zero");
      }
    }
    o.zero_time = opts->timing == VSL_TIMING_NONE;
  }
  return vsl::sdk::OpenInProcess(card_dir, lun, o, out);
}
