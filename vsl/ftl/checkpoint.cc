// Checkpoint and mount records: the payload (LEB table and forward map) built and loaded.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/ftl/attach_util.h"
#include "vsl/ftl/checkpoint.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {
using namespace detail;

bool RecordHasMap(f::MetaKind kind) {
  return kind == f::MetaKind::kCheckpoint || kind == f::MetaKind::kDirtyCheckpoint;
}

std::vector<uint8_t> EncodeMetaRecord(const RecordConfig& c, const LebTable& lebs, const ForwardMap& map) {
  std::vector<uint8_t> out;
  f::MetaHeader h{};
  h.magic = f::kMetaMagic;
  h.kind = static_cast<uint32_t>(c.kind);
  h.version_major = f::kVersionMajor;
  h.epoch = c.epoch;
  h.sector_bytes = c.sector_bytes;
  h.user_sectors = map.sectors();
  h.seq = c.seq;
  h.next_seq = c.next_seq;
  h.lebs = lebs.size();
  h.dies = c.dies;
  h.flags = (c.sparse ? f::kFlagSparse | f::kFlagMapChunks : 0) | (c.flashback ? f::kFlagFlashBack : 0) |
            (c.slot_lebs > 1 ? f::kFlagMetaSlots : 0) | (c.summary_crcs ? f::kFlagSummaryCrcs : 0);
  h.reserve_ppm = c.reserve_ppm;
  const bool with_map = RecordHasMap(c.kind);
  h.map_entries = !with_map ? 0 : c.sparse ? map.allocated_chunks() : map.sectors();
  Append(out, h);
  if (c.slot_lebs > 1) Append(out, f::MetaSlots{c.slot_lebs, 0});
  const std::size_t table_start = out.size();
  for (uint32_t i = 0; i < lebs.size(); ++i) {
    const Leb& l = lebs.leb(i);
    f::MetaLeb m{};
    m.state = static_cast<uint8_t>(l.state);
    m.flags = l.unprotected && with_map ? f::kMetaLebUnprotected : 0;
    m.erase_count = l.erase_count;
    // For a free LEB this field carries its stale_seq (data not yet erased).
    m.open_seq = !with_map ? 0 : (l.state == LebState::kFree ? l.stale_seq : l.open_seq);
    m.trim_pages = with_map ? static_cast<uint32_t>(l.trim_pages.size()) : 0;
    Append(out, m);
    out.insert(out.end(), l.good.begin(), l.good.end());
    if (with_map) {
      for (uint32_t t : l.trim_pages) Append(out, t);
    }
  }
  reinterpret_cast<f::MetaHeader*>(out.data())->leb_table_bytes = out.size() - table_start;
  if (with_map && c.sparse) {
    // Sparse: only allocated chunks, each as its first LBA then its entries.
    out.reserve(out.size() + map.allocated_chunks() * (8 + ForwardMap::kChunkEntries * sizeof(Psa)));
    map.ForEachChunk([&](uint64_t first) {
      Append(out, first);
      for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i) {
        Append(out, first + i < map.sectors() ? map.Get(first + i) : kUnmapped);
      }
    });
  } else if (with_map) {
    const std::size_t at = out.size();
    out.resize(at + map.sectors() * sizeof(Psa));
    for (uint64_t l = 0; l < map.sectors(); ++l) {
      const Psa p = map.Get(l);
      std::memcpy(out.data() + at + l * sizeof(Psa), &p, sizeof(Psa));
    }
  }
  return out;
}

Status DecodeMetaRecord(const std::vector<uint8_t>& in, bool with_map, uint64_t sectors,
                        const std::function<void(uint32_t, const RecordLeb&)>& on_leb,
                        const std::function<Status(uint64_t, Psa)>& on_entry, f::MetaHeader* header) {
  std::size_t off = 0;
  f::MetaHeader h;
  if (!Take(in, off, &h)) return Status::Corruption("metadata record too short");
  if (header != nullptr) *header = h;
  if ((h.flags & f::kFlagMetaSlots) != 0) {
    f::MetaSlots ms;
    if (!Take(in, off, &ms)) return Status::Corruption("metadata record too short");
  }
  RecordLeb e;
  for (uint32_t i = 0; i < h.lebs; ++i) {
    if (!Take(in, off, &e.m) || off + h.dies > in.size()) {
      return Status::Corruption("metadata record: LEB table truncated");
    }
    e.good = in.data() + off;
    off += h.dies;
    e.trim_pages.clear();
    for (uint32_t t = 0; t < e.m.trim_pages; ++t) {
      uint32_t v;
      if (!Take(in, off, &v)) return Status::Corruption("metadata record: trim list truncated");
      e.trim_pages.push_back(v);
    }
    on_leb(i, e);
  }
  if (!with_map) return Status::Ok();
  if ((h.flags & f::kFlagMapChunks) != 0) {
    constexpr uint64_t kRecord = 8 + ForwardMap::kChunkEntries * sizeof(Psa);
    if (h.map_entries > (in.size() - off) / kRecord) return Status::Corruption("checkpoint map truncated");
    for (uint64_t c = 0; c < h.map_entries; ++c) {
      uint64_t first;
      std::memcpy(&first, in.data() + off, 8);
      off += 8;
      if (first % ForwardMap::kChunkEntries != 0 || first >= sectors) {
        return Status::Corruption(fmt::format("checkpoint map chunk at sector {} is not one", first));
      }
      for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i, off += sizeof(Psa)) {
        Psa p;
        std::memcpy(&p, in.data() + off, sizeof(Psa));
        if (p == kUnmapped) continue;
        if (Status s = on_entry(first + i, p); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  if (h.map_entries != sectors || off + h.map_entries * sizeof(Psa) > in.size()) {
    return Status::Corruption("checkpoint map truncated");
  }
  for (uint64_t lba = 0; lba < h.map_entries; ++lba) {
    Psa p;
    std::memcpy(&p, in.data() + off + lba * sizeof(Psa), sizeof(Psa));
    if (p == kUnmapped) continue;
    if (Status s = on_entry(lba, p); !s.ok()) return s;
  }
  return Status::Ok();
}

std::vector<uint8_t> Ftl::BuildMetaPayload(uint32_t kind, uint64_t record_seq) const {
  RecordConfig c;
  c.kind = static_cast<f::MetaKind>(kind);
  c.seq = record_seq;
  c.next_seq = next_seq_;
  c.epoch = epoch_;
  c.sector_bytes = sector_bytes_;
  c.dies = geo_.dies_per_pipe();
  c.reserve_ppm = reserve_ppm_;
  c.slot_lebs = slot_lebs_;
  c.sparse = sparse_;
  c.flashback = impl_->stripe.parity();
  c.summary_crcs = impl_->stripe.summary_crcs();
  return EncodeMetaRecord(c, lebs_, map_);
}

Status Ftl::LoadMetaPayload(const std::vector<uint8_t>& in, bool with_map) {
  const uint32_t dies = geo_.dies_per_pipe();
  auto on_leb = [&](uint32_t i, const RecordLeb& e) {
    Leb& l = lebs_.leb(i);
    std::copy(e.good, e.good + dies, l.good.begin());
    l.erase_count = e.m.erase_count;
    l.trim_pages = e.trim_pages;
    if (i < meta_lebs_) return;
    l.capacity = impl_->stripe.LebCapacity(l);
    if (!with_map) return;
    l.open_seq = e.m.open_seq;
    l.close_seq = e.m.open_seq;
    const auto st = static_cast<LebState>(e.m.state);
    // An LEB open or being groomed at shutdown is simply closed now.
    const bool holds = st == LebState::kOpen || st == LebState::kClosed || st == LebState::kVictim;
    l.needs_erase = true;
    if (!holds) {
      l.stale_seq = e.m.open_seq;
      l.open_seq = 0;
    }
    lebs_.SetState(l, holds ? LebState::kClosed : LebState::kFree);
    l.unprotected = false;
    if (holds && (e.m.flags & f::kMetaLebUnprotected) != 0) impl_->Reprotect(l);
  };
  const PsaLayout& a = impl_->addr;
  const uint64_t end = a.End(lebs_.size());
  auto on_entry = [&](uint64_t lba, Psa p) {
    if (lba == Impl::TraceLba()) fmt::print(stderr, "trace checkpoint maps it to psa {}\n", p);
    if (lba >= map_.sectors() || p >= end || a.LebOf(p) < meta_lebs_) {
      return Status::Corruption(fmt::format("checkpoint maps sector {} outside the data area", lba));
    }
    impl_->Remap(lba, p);
    return Status::Ok();
  };
  f::MetaHeader h;
  if (in.size() >= sizeof(h)) std::memcpy(&h, in.data(), sizeof(h));
  if (in.size() >= sizeof(h) && (h.lebs != lebs_.size() || h.dies != dies)) {
    return Status::Corruption("metadata record: LEB table of another shape");
  }
  return DecodeMetaRecord(in, with_map, map_.sectors(), on_leb, on_entry);
}

}  // namespace vsl::ftl
