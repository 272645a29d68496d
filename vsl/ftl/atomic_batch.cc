// One atomic batch's bookkeeping (atomic_batch.h).
#include "vsl/ftl/atomic_batch.h"

#include <algorithm>

namespace vsl::ftl {

std::optional<AtomicBatch::Sector> AtomicBatch::Next(uint32_t sector_bytes) {
  while (op_ < ops_.size() && (ops_[op_].kind != AtomicOp::kWrite || in_op_ >= ops_[op_].count)) {
    ++op_;
    in_op_ = 0;
  }
  if (op_ == ops_.size()) return std::nullopt;
  const AtomicOp& o = ops_[op_];
  return Sector{o.lba + in_op_, o.data + in_op_ * sector_bytes};
}

void AtomicBatch::Placed(uint64_t lba, Psa psa) {
  placed_.emplace_back(lba, psa);
  ++in_op_;
}

bool AtomicBatch::Pin(uint32_t leb) {
  if (std::find(pinned_.begin(), pinned_.end(), leb) != pinned_.end()) return false;
  pinned_.push_back(leb);
  return true;
}

std::vector<uint32_t> AtomicBatch::TakePins() {
  std::vector<uint32_t> pins;
  pins.swap(pinned_);
  return pins;
}

uint32_t AtomicBatch::CommitRecordCount() const {
  auto records = static_cast<uint32_t>(members_.size());
  for (const AtomicOp& o : ops_) records += o.kind == AtomicOp::kTrim;
  return records;
}

std::vector<format::TrimRecord> AtomicBatch::CommitRecords(uint64_t cseq) const {
  std::vector<format::TrimRecord> recs;
  recs.reserve(CommitRecordCount());
  for (const AtomicOp& o : ops_) {
    if (o.kind == AtomicOp::kTrim) recs.push_back({o.lba, o.count, cseq});
  }
  for (const auto& [mseq, mpsa] : members_) recs.push_back({mseq, format::kCommitFlag | mpsa, cseq});
  return recs;
}

void AtomicBatch::NewAttempt() {
  members_.clear();
  placed_.clear();
  op_ = 0;
  in_op_ = 0;
  failed_ = false;
}

bool AtomicBatch::Finish() {
  if (finished_) return false;
  finished_ = true;
  return true;
}

}  // namespace vsl::ftl
