// Format: geometry, factory bad blocks, the first metadata record; capacity rules.
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

uint64_t Ftl::PhysicalUserSectors() const {
  uint64_t phys = 0;
  for (uint32_t i = meta_lebs_; i < lebs_.size(); ++i) {
    phys += impl_->stripe.LebCapacity(lebs_.leb(i));
  }
  // The groomer's reserve is counted in LEBs as they are formed now: without failed dies.
  const uint64_t per_leb = impl_->stripe.LebDataSectors(impl_->AliveDies());
  const uint64_t reserved = uint64_t{ReservedLebs()} * per_leb;
  if (phys <= reserved) return 0;
  return static_cast<uint64_t>(static_cast<double>(phys - reserved) /
                               (1.0 + reserve_ppm_ / 1e6));
}


// ---- format ----

namespace detail {
uint32_t MetaSlotLebs(const nand::Geometry& g, uint32_t spp, const LebTable& lebs, uint64_t user_sectors,
                      bool sparse, uint64_t physical_user_sectors) {
  const uint32_t D = g.dies_per_pipe(), P = g.pages_per_block;
  // The largest checkpoint: header, LEB table with room for kTrimPagesPerLeb trim pages
  // per LEB on average, and the map: dense, a PSA per sector; sparse, by chunk, allowing
  // for chunks a sixty-fourth full on average (a sparser map falls back to a mount record).
  constexpr uint64_t kTrimPagesPerLeb = 8;
  uint64_t bytes = sizeof(f::MetaHeader) + sizeof(f::MetaSlots) +
                   uint64_t{lebs.size()} * (sizeof(f::MetaLeb) + D + 4 * kTrimPagesPerLeb);
  if (sparse) {
    const uint64_t chunks = std::min<uint64_t>((user_sectors + ForwardMap::kChunkEntries - 1) / ForwardMap::kChunkEntries,
                                               physical_user_sectors / 64 + 1);
    bytes += chunks * (8 + ForwardMap::kChunkEntries * sizeof(Psa));
  } else {
    bytes += user_sectors * sizeof(Psa);
  }
  const uint64_t pages = (bytes + g.page_data_bytes - 1) / g.page_data_bytes;
  // One LEB per slot while both first LEBs hold two copies (format 1.4's layout).
  if (uint64_t{lebs.leb(0).good_dies()} * P / 2 >= pages && uint64_t{lebs.leb(1).good_dies()} * P / 2 >= pages) {
    return 1;
  }
  if (spp < 2 && f::MetaBytes(spp) + sizeof(f::MetaSlotTag) > g.meta_bytes_per_page()) {
    Logger("ftl")->warn("no room for metadata slot tags in the page metadata: slots of one LEB, "
                        "checkpoints of this map do not fit (attach scans)");
    return 1;
  }
  // Sized for one die fewer than the pipe has (a failed die leaves the slots) and one LEB
  // more (bad blocks, copies kept within a LEB); at most a quarter of the pipe.
  const uint64_t per_leb = uint64_t{std::max<uint32_t>(D, 3) - 1} * P;
  const uint64_t k = (2 * pages + per_leb - 1) / per_leb + 1;
  return static_cast<uint32_t>(std::min<uint64_t>(k, std::max<uint32_t>(1, lebs.size() / 8)));
}
}  // namespace detail

Status CheckFormatOptions(const FormatOptions& opts) {
  if (opts.sector_bytes != 512 && opts.sector_bytes != 4096) {
    return Status::InvalidArgument("sector size must be 512 or 4096 bytes");
  }
  // A spare figure out of range was silently clamped before (a negative one to zero, a
  // huge one to a device of almost nothing): refused instead.
  const double sp = opts.spare_percent;
  if (opts.reserve == ReserveMode::kCustom && !(sp >= 0 && sp <= kMaxSparePercent)) {
    return Status::InvalidArgument(fmt::format("custom spare of {}% is outside 0..{}%", sp, kMaxSparePercent));
  }
  if (opts.reserve == ReserveMode::kUnderProvision && !(sp >= 0 && sp < 7)) {
    return Status::InvalidArgument(fmt::format("under-provisioning leaves 0 to under 7% spare, not {}%", sp));
  }
  return Status::Ok();
}

void Ftl::Format(nand::FlashPipe& pipe, Clock& clock, const FormatOptions& opts, Done done) {
  auto shared_done = std::make_shared<Done>(std::move(done));
  nand::DiscoverPipe(pipe, [&pipe, &clock, opts, shared_done](Result<nand::DiscoveredPipe> r) {
    auto fail = [&](Status s) { (*shared_done)(s); };
    if (!r.ok()) return fail(r.status());
    const nand::Geometry g = r->geometry;
    if (Status s = CheckFormatOptions(opts); !s.ok()) return fail(s);
    if (opts.sector_bytes > g.page_data_bytes || g.page_data_bytes % opts.sector_bytes != 0) {
      return fail(Status::NotSupported("sector size does not divide the page"));
    }
    const uint32_t spp = g.page_data_bytes / opts.sector_bytes;
    if (f::MetaBytes(spp) > g.meta_bytes_per_page() || spp > 255) {
      return fail(Status::NotSupported(fmt::format(
          "{} sectors per page need {} bytes of page metadata; the device has {}", spp,
          f::MetaBytes(spp), g.meta_bytes_per_page())));
    }
    if (g.blocks_per_lun < 2 + ReservedLebs() + 2) {
      return fail(Status::NotSupported("too few blocks per die for the FTL"));
    }
    const double rho = SpareFraction(opts);
    if (opts.reserve == ReserveMode::kUnderProvision || rho < 0.07) {
      Logger("ftl")->warn("under-provisioned format: spare {:.1f}% of user capacity; expect "
                          "lower write speed and endurance", rho * 100);
    }
    // A provisional FTL to hold the geometry and bad-block table while formatting.
    auto ftl = std::unique_ptr<Ftl>(new Ftl(pipe, clock, FtlOptions{}, g, 1, opts.sector_bytes));
    ftl->reserve_ppm_ = static_cast<uint32_t>(rho * 1e6);
    ftl->impl_->stripe.set_summary_crcs(opts.summary_crcs);
    if (opts.flashback) {
      const uint32_t dies_up = g.dies_per_pipe() - static_cast<uint32_t>(r->silent_dies.size());
      if (dies_up >= 3 && f::ParityMetaBytes(spp) <= g.meta_bytes_per_page() &&
          g.dies_per_pipe() <= 64) {
        ftl->impl_->stripe.set_parity(true);
        ftl->lebs_.set_min_good(StripeLayout::kMinStripeDies);
      } else {
        Logger("ftl")->warn("FlashBack is off for this format: it needs 3 or more dies and {} "
                            "bytes of page metadata ({} dies, {} bytes)",
                            f::ParityMetaBytes(spp), dies_up, g.meta_bytes_per_page());
      }
    }
    ftl->epoch_ = opts.epoch != 0 ? opts.epoch
                                  : static_cast<uint32_t>(Rng(clock.Now() ^ 0x5EED).Next() | 1);
    for (uint32_t d : r->silent_dies) {
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) ftl->lebs_.leb(b).good[d] = 0;
    }
    // Factory bad-block scan: byte 0 of the first page's metadata.
    struct Scan {
      uint32_t remaining = 1;
      std::vector<std::vector<uint8_t>> meta;
    };
    auto scan = std::make_shared<Scan>();
    scan->meta.resize(uint64_t{g.blocks_per_lun} * g.dies_per_pipe());
    Ftl* raw = ftl.release();
    auto after_scan = [raw, scan, opts, shared_done, g]() {
      if (--scan->remaining != 0) return;
      std::unique_ptr<Ftl> prov(raw);
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
        for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
          const auto& m = scan->meta[uint64_t{b} * g.dies_per_pipe() + d];
          if (m.empty() || m[0] != 0xFF) prov->lebs_.leb(b).good[d] = 0;
        }
      }
      for (uint32_t i = 0; i < prov->meta_lebs_; ++i) {
        if (prov->lebs_.leb(i).good_dies() == 0) {
          return (*shared_done)(Status::IOError("both metadata blocks are bad on every die"));
        }
      }
      uint64_t user = opts.sparse ? opts.sparse_sectors : prov->PhysicalUserSectors();
      if (user == 0) return (*shared_done)(Status::NoSpace("no room for user data"));
      // Metadata slots big enough for a checkpoint of the full map (two copies of every
      // page), so a clean attach of any card reads its checkpoint and scans nothing. The
      // slots' LEBs come out of the capacity (a dense map shrinks with it, so the slots
      // still fit).
      const uint32_t k = MetaSlotLebs(g, prov->spp_, prov->lebs_, user, opts.sparse, prov->PhysicalUserSectors());
      if (k > 1) {
        prov->slot_lebs_ = k;
        prov->meta_lebs_ = 2 * k;
        if (!opts.sparse) user = prov->PhysicalUserSectors();
        if (user == 0) return (*shared_done)(Status::NoSpace("no room for user data"));
        Logger("ftl")->info("metadata slots of {} LEBs for a checkpoint of {} sectors", k, user);
      }
      // Rebuild with the real capacity, keeping the bad-block table.
      auto real = std::unique_ptr<Ftl>(new Ftl(prov->retry_->inner(), prov->clock_, FtlOptions{}, g, user,
                                               opts.sector_bytes, k));
      real->reserve_ppm_ = prov->reserve_ppm_;
      real->epoch_ = prov->epoch_;
      real->sparse_ = opts.sparse;
      real->impl_->stripe.set_parity(prov->impl_->stripe.parity());
      real->impl_->stripe.set_summary_crcs(prov->impl_->stripe.summary_crcs());
      real->lebs_.set_min_good(real->impl_->stripe.parity() ? StripeLayout::kMinStripeDies : 0);
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) real->lebs_.leb(b).good = prov->lebs_.leb(b).good;
      real->lebs_.Recount();
      Ftl* rp = real.release();
      // Both metadata LEBs get the new record, so nothing of an older format can be newer.
      rp->WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kMount), [rp, shared_done](Status s) {
        if (!s.ok()) {
          std::unique_ptr<Ftl> owner(rp);
          return (*shared_done)(s);
        }
        rp->WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kMount), [rp, shared_done](Status s2) {
          std::unique_ptr<Ftl> owner(rp);
          Logger("ftl")->info("formatted: {} sectors of {} B, status {}", rp->sectors(),
                              rp->sector_bytes(), s2.ToString());
          (*shared_done)(s2);
        });
      });
    };
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
        if (!raw->lebs_.leb(b).good[d]) continue;
        auto& m = scan->meta[uint64_t{b} * g.dies_per_pipe() + d];
        m.resize(g.meta_bytes_per_page());
        ++scan->remaining;
        pipe.Read({{d, b, 0}, g.codewords_per_page() - 1, 1, nullptr, m.data()},
                  [scan, after_scan, &m](const Completion& c) mutable {
                    if (!c.ok()) m.clear();
                    after_scan();
                  });
      }
    }
    after_scan();
  });
}


}  // namespace vsl::ftl
