#include "vsl/ftl/leb.h"

#include <algorithm>

namespace vsl::ftl {

LebTable::LebTable(uint32_t lebs, uint32_t dies, uint32_t slots_per_leb, uint32_t max_capacity)
    : lebs_(lebs), max_capacity_(max_capacity), bucket_width_(std::max<uint32_t>(1, (max_capacity + 63) / 64)) {
  buckets_.resize(max_capacity / bucket_width_ + 2);
  bucket_min_close_.assign(buckets_.size(), UINT64_MAX);
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
    Leave(l);
    --closed_count_;
  }
}

void LebTable::Join(Leb& l, uint32_t bucket) {
  l.bucket = bucket;
  buckets_[bucket].push_back(l);
  bucket_min_close_[bucket] = std::min(bucket_min_close_[bucket], l.close_seq);
}

void LebTable::Leave(Leb& l) {
  List& b = buckets_[l.bucket];
  b.erase(List::s_iterator_to(l));
  if (b.empty()) bucket_min_close_[l.bucket] = UINT64_MAX;
}

void LebTable::Link(Leb& l) {
  if (l.state == LebState::kFree) {
    free_.push_back(l);
    l.counted_unusable = l.good_dies() < min_good_;
    unusable_free_ += l.counted_unusable;
  } else if (l.state == LebState::kClosed) {
    Join(l, BucketOf(l.valid));
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
  Leave(l);
  Join(l, BucketOf(l.valid));
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
  //
  // A bucket whose bound cannot beat the best so far is skipped: its LEBs hold at least
  // lo = bucket * width valid sectors of at most max_capacity_, so u >= lo / max_capacity_,
  // and none closed before bucket_min_close_, so age <= now - that + 1. The score falls
  // with u and rises with age, and every IEEE operation below rounds monotonically, so the
  // bound computed the same way is >= every score in the bucket as computed: a candidate
  // replaces the best only when strictly greater, so skipping changes nothing chosen, and
  // `ok` is asked about the same LEBs. Lowest buckets come first, where winners usually are.
  const auto score_of = [now_seq](double u, uint64_t close_seq) {
    const double age = static_cast<double>(now_seq - std::min(now_seq, close_seq)) + 1;
    return (1 - u) * age / (1 + u);
  };
  Leb* best = nullptr;
  double best_score = -1;
  for (uint32_t bi = 0; bi < buckets_.size(); ++bi) {
    if (buckets_[bi].empty()) continue;
    const double u_lo = static_cast<double>(uint64_t{bi} * bucket_width_) / max_capacity_;
    if (best != nullptr && score_of(u_lo, bucket_min_close_[bi]) <= best_score) continue;
    // A visit makes the bucket's bound exact again (LEBs that left had only loosened it).
    uint64_t least = UINT64_MAX;
    for (Leb& l : buckets_[bi]) {
      least = std::min(least, l.close_seq);
      if (l.inflight != 0 || l.capacity == 0 || l.gc_skip || l.atomic_pins != 0) continue;
      const double score = score_of(static_cast<double>(l.valid) / l.capacity, l.close_seq);
      // `ok` (which may be costly) only for a candidate that would win without it: the
      // same choice as filtering first, for a fraction of the calls.
      if (score > best_score && (!ok || ok(l))) {
        best_score = score;
        best = &l;
      }
    }
    bucket_min_close_[bi] = least;
  }
  return best;
}

}  // namespace vsl::ftl
