#include "vsl/ftl/leb.h"

#include <algorithm>

namespace vsl::ftl {

LebTable::LebTable(uint32_t lebs, uint32_t dies, uint32_t slots_per_leb, uint32_t max_capacity)
    : lebs_(lebs), bucket_width_(std::max<uint32_t>(1, (max_capacity + 63) / 64)) {
  buckets_.resize(max_capacity / bucket_width_ + 2);
  for (uint32_t i = 0; i < lebs; ++i) {
    lebs_[i].index = i;
    lebs_[i].good.assign(dies, 1);
    lebs_[i].valid_bits.assign((slots_per_leb + 63) / 64, 0);
  }
}

LebTable::~LebTable() {
  free_.clear();
  for (auto& b : buckets_) b.clear();
}

void LebTable::Unlink(Leb& l) {
  if (!l.is_linked()) return;
  if (l.state == LebState::kFree) {
    free_.erase(List::s_iterator_to(l));
    unusable_free_ -= l.counted_unusable;
    l.counted_unusable = false;
  } else if (l.state == LebState::kClosed) {
    buckets_[l.bucket].erase(List::s_iterator_to(l));
    --closed_count_;
  }
}

void LebTable::Link(Leb& l) {
  if (l.state == LebState::kFree) {
    free_.push_back(l);
    l.counted_unusable = l.good_dies() < min_good_;
    unusable_free_ += l.counted_unusable;
  } else if (l.state == LebState::kClosed) {
    l.bucket = BucketOf(l.valid);
    buckets_[l.bucket].push_back(l);
    ++closed_count_;
  }
}

void LebTable::SetState(Leb& l, LebState s) {
  Unlink(l);
  l.state = s;
  Link(l);
}

void LebTable::OnValidChanged(Leb& l) {
  if (l.state != LebState::kClosed || BucketOf(l.valid) == l.bucket) return;
  buckets_[l.bucket].erase(List::s_iterator_to(l));
  l.bucket = BucketOf(l.valid);
  buckets_[l.bucket].push_back(l);
}

Leb* LebTable::PickFree() {
  Leb* best = nullptr;
  for (Leb& l : free_) {
    if (l.counted_unusable) continue;
    if (best == nullptr || l.erase_count < best->erase_count) best = &l;
  }
  return best;
}

void LebTable::Recount() {
  unusable_free_ = 0;
  for (Leb& l : free_) {
    l.counted_unusable = l.good_dies() < min_good_;
    unusable_free_ += l.counted_unusable;
  }
}

Leb* LebTable::PickVictim(VictimPolicy policy, uint64_t now_seq, const std::function<bool(const Leb&)>& ok) {
  if (policy == VictimPolicy::kGreedy) {
    for (auto& b : buckets_) {
      Leb* best = nullptr;
      for (Leb& l : b) {
        // `ok` (which may be costly) only for a candidate that would win without it.
        if (l.inflight == 0 && !l.gc_skip && l.atomic_pins == 0 &&
            (best == nullptr || l.valid < best->valid) && (!ok || ok(l))) {
          best = &l;
        }
      }
      if (best) return best;
    }
    return nullptr;
  }
  // Cost-benefit (Rosenblum & Ousterhout): benefit/cost = (1 - u) * age / (1 + u), where
  // u is the valid fraction and age the sequence distance since the LEB filled.
  Leb* best = nullptr;
  double best_score = -1;
  for (auto& b : buckets_) {
    for (Leb& l : b) {
      if (l.inflight != 0 || l.capacity == 0 || l.gc_skip || l.atomic_pins != 0) continue;
      const double u = static_cast<double>(l.valid) / l.capacity;
      const double age = static_cast<double>(now_seq - std::min(now_seq, l.close_seq)) + 1;
      const double score = (1 - u) * age / (1 + u);
      // `ok` (which may be costly) only for a candidate that would win without it: the
      // same choice as filtering first, for a fraction of the calls.
      if (score > best_score && (!ok || ok(l))) {
        best_score = score;
        best = &l;
      }
    }
  }
  return best;
}

}  // namespace vsl::ftl
