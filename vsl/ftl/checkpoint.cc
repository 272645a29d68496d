// Checkpoint and mount records: the payload (LEB table and forward map) built and loaded.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/ftl/attach_util.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {
using namespace detail;

// ---- metadata records ----

std::vector<uint8_t> Ftl::BuildMetaPayload(uint32_t kind, uint64_t record_seq) const {
  std::vector<uint8_t> out;
  f::MetaHeader h{};
  h.magic = f::kMetaMagic;
  h.kind = kind;
  h.version_major = f::kVersionMajor;
  h.epoch = epoch_;
  h.sector_bytes = sector_bytes_;
  h.user_sectors = map_.sectors();
  h.seq = record_seq;
  h.next_seq = next_seq_;
  h.lebs = lebs_.size();
  h.dies = geo_.dies_per_pipe();
  h.flags = (sparse_ ? f::kFlagSparse | f::kFlagMapChunks : 0) |
            (impl_->stripe.parity() ? f::kFlagFlashBack : 0) | (slot_lebs_ > 1 ? f::kFlagMetaSlots : 0);
  h.reserve_ppm = reserve_ppm_;
  const bool with_map = kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint) ||
                        kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint);
  h.map_entries = !with_map ? 0 : sparse_ ? map_.allocated_chunks() : map_.sectors();
  Append(out, h);
  if (slot_lebs_ > 1) Append(out, f::MetaSlots{slot_lebs_, 0});
  const std::size_t table_start = out.size();
  for (uint32_t i = 0; i < lebs_.size(); ++i) {
    const Leb& l = lebs_.leb(i);
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
  if (with_map && sparse_) {
    // Sparse: only allocated chunks, each as its first LBA then its entries.
    out.reserve(out.size() + map_.allocated_chunks() * (8 + ForwardMap::kChunkEntries * sizeof(Psa)));
    map_.ForEachChunk([&](uint64_t first) {
      Append(out, first);
      for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i) {
        Append(out, first + i < map_.sectors() ? map_.Get(first + i) : kUnmapped);
      }
    });
  } else if (with_map) {
    out.reserve(out.size() + map_.sectors() * sizeof(Psa));
    for (uint64_t l = 0; l < map_.sectors(); ++l) Append(out, map_.Get(l));
  }
  return out;
}

Status Ftl::LoadMetaPayload(const std::vector<uint8_t>& in, bool with_map) {
  std::size_t off = 0;
  f::MetaHeader h;
  if (!Take(in, off, &h)) return Status::Corruption("metadata record too short");
  if ((h.flags & f::kFlagMetaSlots) != 0) {
    f::MetaSlots ms;
    if (!Take(in, off, &ms)) return Status::Corruption("metadata record too short");
  }
  for (uint32_t i = 0; i < h.lebs; ++i) {
    f::MetaLeb m;
    if (!Take(in, off, &m) || off + h.dies > in.size()) {
      return Status::Corruption("metadata record: LEB table truncated");
    }
    Leb& l = lebs_.leb(i);
    std::copy(in.begin() + static_cast<std::ptrdiff_t>(off),
              in.begin() + static_cast<std::ptrdiff_t>(off + h.dies), l.good.begin());
    off += h.dies;
    l.erase_count = m.erase_count;
    l.trim_pages.clear();
    for (uint32_t t = 0; t < m.trim_pages; ++t) {
      uint32_t v;
      if (!Take(in, off, &v)) return Status::Corruption("metadata record: trim list truncated");
      l.trim_pages.push_back(v);
    }
    if (i < meta_lebs_) continue;
    l.capacity = impl_->stripe.LebCapacity(l);
    if (with_map) {
      l.open_seq = m.open_seq;
      l.close_seq = m.open_seq;
      const auto st = static_cast<LebState>(m.state);
      // An LEB open or being groomed at shutdown is simply closed now.
      const bool holds = st == LebState::kOpen || st == LebState::kClosed || st == LebState::kVictim;
      l.needs_erase = true;
      if (!holds) {
        l.stale_seq = m.open_seq;
        l.open_seq = 0;
      }
      lebs_.SetState(l, holds ? LebState::kClosed : LebState::kFree);
      l.unprotected = false;
      if (holds && (m.flags & f::kMetaLebUnprotected) != 0) impl_->Reprotect(l);
    }
  }
  if (with_map) {
    const uint64_t max_psa = uint64_t{lebs_.size()} * geo_.dies_per_pipe() * geo_.pages_per_block * spp_;
    auto load = [&](uint64_t lba, Psa p) {
      if (lba == Impl::TraceLba()) fmt::print(stderr, "trace checkpoint maps it to psa {}\n", p);
      if (p == kUnmapped) return Status::Ok();
      if (lba >= map_.sectors() || p >= max_psa ||
          p / (geo_.dies_per_pipe() * geo_.pages_per_block * spp_) < meta_lebs_) {
        return Status::Corruption(fmt::format("checkpoint maps sector {} outside the data area", lba));
      }
      impl_->Remap(lba, p);
      return Status::Ok();
    };
    if ((h.flags & f::kFlagMapChunks) != 0) {
      constexpr uint64_t kRecord = 8 + ForwardMap::kChunkEntries * sizeof(Psa);
      if (h.map_entries > (in.size() - off) / kRecord) {
        return Status::Corruption("checkpoint map truncated");
      }
      for (uint64_t c = 0; c < h.map_entries; ++c) {
        uint64_t first;
        std::memcpy(&first, in.data() + off, 8);
        off += 8;
        if (first % ForwardMap::kChunkEntries != 0 || first >= map_.sectors()) {
          return Status::Corruption(fmt::format("checkpoint map chunk at sector {} is not one", first));
        }
        for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i, off += sizeof(Psa)) {
          Psa p;
          std::memcpy(&p, in.data() + off, sizeof(Psa));
          if (Status s = load(first + i, p); !s.ok()) return s;
        }
      }
      return Status::Ok();
    }
    if (h.map_entries != map_.sectors() || off + h.map_entries * sizeof(Psa) > in.size()) {
      return Status::Corruption("checkpoint map truncated");
    }
    for (uint64_t lba = 0; lba < h.map_entries; ++lba) {
      Psa p;
      std::memcpy(&p, in.data() + off + lba * sizeof(Psa), sizeof(Psa));
      if (Status s = load(lba, p); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

}  // namespace vsl::ftl
