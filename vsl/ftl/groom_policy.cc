#include "vsl/ftl/groom_policy.h"

#include <algorithm>

#include "vsl/ftl/wear.h"

namespace vsl::ftl {

void RebuildQueue::Add(uint32_t index) {
  if (std::find(q_.begin(), q_.end(), index) == q_.end()) q_.push_back(index);
}

Leb* RebuildQueue::Next(LebTable& lebs, uint64_t room, const std::function<void()>& drained) {
  for (std::size_t k = 0; k < q_.size();) {
    Leb& l = lebs.leb(q_[k]);
    // Done once nothing live is left and no newer copy of what it held is still on its
    // way (if that copy fails, the sector goes back here and must be moved).
    const bool still = l.unprotected && (l.valid > 0 || l.pins > 0);
    if (!still || l.state == LebState::kFree) {
      if (l.valid == 0) l.unprotected = false;
      q_.erase(q_.begin() + static_cast<std::ptrdiff_t>(k));
      if (q_.empty() && drained) drained();
      continue;
    }
    if (l.state == LebState::kClosed && l.inflight == 0 && !l.gc_skip && l.atomic_pins == 0 &&
        l.valid <= room) {
      q_.erase(q_.begin() + static_cast<std::ptrdiff_t>(k));
      q_.push_back(l.index);
      return &l;
    }
    ++k;
  }
  return nullptr;
}

void GroomPacer::Start(uint32_t valid, uint32_t capacity, double cap) {
  const uint32_t freed = capacity - std::min(capacity, valid);
  ratio_ = valid == 0 ? 0.0 : static_cast<double>(freed) / valid;
  // Victims that move nothing, or free nothing, do not pace (Applies) and do not count.
  if (ratio_ > 0) {
    num_ = num_ * kDecay + freed;
    den_ = den_ * kDecay + valid;
  }
  credits_ = std::min(credits_, cap);
}

void GroomPacer::SetBacklog(double sectors) {
  backlog_avg_ = backlog_avg_ < 0 ? sectors : backlog_avg_ + (sectors - backlog_avg_) * kBacklogAlpha;
  backlog_factor_ = std::clamp((sectors + kBacklogFloor) / (backlog_avg_ + kBacklogFloor), kMinBacklogFactor,
                               kMaxBacklogFactor);
  // Below the room's target the host gets no more than its share: the room comes first.
  if (feedback_ < 1.0) backlog_factor_ = std::min(backlog_factor_, 1.0);
}

void GroomPacer::SetSlack(double lebs) {
  feedback_ = std::clamp(1.0 + (lebs < 0 ? kGainBelow : kGain) * lebs, kMinFeedback, kMaxFeedback);
}

bool GroomPolicy::Gains(const Leb& c, uint32_t sectors_per_page) const {
  uint32_t g = 0;
  for (uint32_t d = 0; d < dies_.dies(); ++d) g += c.good[d] && !dies_.failed(d);
  const bool any_failed = dies_.alive() != dies_.dies();
  // Trim pages count only with failed dies: most records need not be carried, and a pipe
  // with all its dies has stale room elsewhere.
  const uint64_t refills = c.valid + (any_failed ? uint64_t{c.trim_pages.size()} * sectors_per_page : 0);
  return refills < stripe_.LebDataSectors(g);
}

Leb* GroomPolicy::PeekSpaceVictim(const Inputs& in) const {
  return lebs_.PickVictim(in.victim_policy, in.now_seq, [&](const Leb& c) { return Gains(c, in.sectors_per_page); });
}

GroomPolicy::Choice GroomPolicy::Choose(const Inputs& in, const std::function<void()>& drained) {
  Choice ch;
  ch.victim = (in.need && rebuild_turn_) ? nullptr : rebuild_.Next(lebs_, in.room, drained);
  rebuild_turn_ = !rebuild_turn_;
  if (ch.victim != nullptr) {
    ch.kind = Kind::kRebuild;
    return ch;
  }
  if (!in.need && !in.waiting) {
    if (!wear_check_due_) return ch;
    wear_check_due_ = false;
    ch.victim = PickWearVictim(lebs_, in.first_data_leb, in.wl_max_spread);
    ch.kind = ch.victim != nullptr ? Kind::kWear : Kind::kNone;
    return ch;
  }
  // A victim's room once freed is what it offers when formed again; its live data takes
  // room again. When somebody waits for room any victim will do.
  const bool gain_check = !in.waiting;
  ch.victim = lebs_.PickVictim(in.victim_policy, in.now_seq, [&](const Leb& c) {
    return !gain_check || Gains(c, in.sectors_per_page);
  });
  ch.kind = ch.victim != nullptr ? Kind::kSpace : Kind::kNone;
  return ch;
}

}  // namespace vsl::ftl
