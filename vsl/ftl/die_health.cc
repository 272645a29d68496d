#include "vsl/ftl/die_health.h"

#include <algorithm>

#include "vsl/core/log.h"

namespace vsl::ftl {

DieHealth::DieHealth(uint32_t dies, uint32_t error_limit, DurNs window)
    : failed_(dies, 0), silent_(dies, 0), limit_(error_limit), window_(window), errors_(dies) {}

std::vector<uint32_t> DieHealth::failed_dies() const {
  std::vector<uint32_t> out;
  for (uint32_t d = 0; d < failed_.size(); ++d) {
    if (failed_[d]) out.push_back(d);
  }
  return out;
}

uint32_t DieHealth::alive() const {
  uint32_t n = 0;
  for (uint8_t f : failed_) n += f == 0;
  return n;
}

bool DieHealth::NoteError(uint32_t d, uint32_t block, TimeNs now, std::size_t* count) {
  if (d >= failed_.size() || failed_[d] || limit_ == 0) return false;
  auto& q = errors_[d];
  while (!q.empty() && now - q.front().first > window_) q.pop_front();
  for (const auto& e : q) {
    if (e.second == block) return false;
  }
  q.emplace_back(now, block);
  if (count != nullptr) *count = q.size();
  return q.size() >= limit_;
}

void DieHealth::NoteLost(uint64_t lba) {
  if (lost_.size() < kMaxLost && std::find(lost_.begin(), lost_.end(), lba) == lost_.end()) {
    lost_.push_back(lba);
  }
}

void DieHealth::Event(std::string e) {
  Logger("ftl")->warn("{}", e);
  events_.push_back(std::move(e));
  if (events_.size() > kMaxEvents) events_.erase(events_.begin());
}

}  // namespace vsl::ftl
