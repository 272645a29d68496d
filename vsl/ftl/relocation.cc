// The groomer's relocation bookkeeping (relocation.h).
#include "vsl/ftl/relocation.h"

#include <algorithm>
#include <cstring>

#include "vsl/ftl/page_codec.h"

namespace vsl::ftl {
namespace f = format;

void Relocation::Start(Leb* v) {
  victim_ = v;
  v->reloc_refs = 0;
  v->reloc_held = false;
  carry_.clear();
  cursor_ = 0;
  reads_ = 0;
}

void Relocation::End(Leb* v) {
  if (v == victim_) {
    victim_ = nullptr;
    return;
  }
  draining_.erase(std::remove(draining_.begin(), draining_.end(), v), draining_.end());
}

void Relocation::Drain() {
  draining_.push_back(victim_);
  victim_ = nullptr;
  carry_.clear();
}

bool Relocation::IsVictim(const Leb* v) const {
  return v != nullptr && (v == victim_ || std::find(draining_.begin(), draining_.end(), v) != draining_.end());
}

std::optional<Relocation::Read> Relocation::NextRead(uint32_t max_reads) {
  if (victim_ == nullptr) return std::nullopt;
  const uint32_t D = addr_.dies(), P = addr_.pages(), S = addr_.sectors();
  const Leb& v = *victim_;
  while (reads_ < max_reads && cursor_ < P * D) {
    const uint32_t ps = cursor_++;
    const uint32_t page = ps / D, die = ps % D;
    const bool is_trim = std::find(v.trim_pages.begin(), v.trim_pages.end(), ps) != v.trim_pages.end();
    bool any_valid = false;
    for (uint32_t s = 0; s < S && !any_valid; ++s) {
      const uint32_t slot = (die * P + page) * S + s;
      any_valid = (v.valid_bits[slot / 64] >> (slot % 64)) & 1;
    }
    if (!any_valid && !is_trim) continue;
    ++reads_;
    return Read{die, page, is_trim};
  }
  return std::nullopt;
}

bool Relocation::CarryTrims(const uint8_t* meta, const std::vector<uint8_t>& data, uint32_t spp, uint32_t epoch,
                            uint64_t oldest, const std::function<void(const f::TrimRecord&, bool)>& seen) {
  const auto* ph = reinterpret_cast<const f::PageHeader*>(meta);
  if (!f::HeaderValid(meta, spp) || ph->type != static_cast<uint8_t>(f::PageType::kTrim) || ph->epoch != epoch) {
    return false;
  }
  uint64_t n = 0;
  const f::TrimRecord* recs = TrimPageRecords(meta, data, &n);
  if (recs == nullptr) return false;
  for (uint64_t i = 0; i < n; ++i) {
    const bool keep = recs[i].seq > oldest;
    if (seen) seen(recs[i], keep);
    if (keep) carry_.push_back(recs[i]);
  }
  return true;
}

Relocation::Verdict Relocation::Release(Leb& v, uint32_t job_pins, bool device_lost) {
  if (&v == victim_ && Reading()) return Verdict::kReading;
  if (v.reloc_refs > 0) return Verdict::kRefs;
  if (v.pins > job_pins && !device_lost) return Verdict::kPins;
  if (job_pins > 0) v.reloc_held = true;
  return v.valid != 0 || v.reloc_held ? Verdict::kKeep : Verdict::kFree;
}

Relocation::Buffer Relocation::TakeBuffer(uint32_t data_bytes, uint32_t meta_bytes) {
  if (!pool_.empty()) {
    Buffer b = std::move(pool_.back());
    pool_.pop_back();
    b->first.resize(data_bytes);  // (metadata-only reads take no data area)
    b->second.resize(meta_bytes);
    return b;
  }
  auto b = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
  b->first.resize(data_bytes);
  b->second.resize(meta_bytes);
  return b;
}

void Relocation::ReturnBuffer(Buffer b) {
  if (pool_.size() < kPoolMax) pool_.push_back(std::move(b));
}

}  // namespace vsl::ftl
