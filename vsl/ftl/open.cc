// Attach: the newest metadata record, then the checkpoint, a scan, or both.
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

// ---- open ----

void Ftl::Open(nand::FlashPipe& pipe, Clock& clock, const FtlOptions& opts,
               Function<void(Result<std::unique_ptr<Ftl>>)> done) {
  using OpenDone = Function<void(Result<std::unique_ptr<Ftl>>)>;
  auto shared_done = std::make_shared<OpenDone>(std::move(done));
  const TimeNs t0 = clock.Now();
  nand::DiscoverPipe(pipe, [&pipe, &clock, opts, shared_done, t0](Result<nand::DiscoveredPipe> r) {
    if (!r.ok()) return (*shared_done)(r.status());
    const nand::Geometry g = r->geometry;
    auto silent = r->silent_dies;
    struct State {
      std::optional<MetaRead> best;
      std::optional<MetaRead> recs[2];
      uint32_t spp = 0;
      uint32_t best_leb = 0;
      uint32_t slot_lebs = 1;  // LEBs per metadata slot, as the pages found say
      int remaining = 0;
      std::vector<uint32_t> silent;
      std::unique_ptr<nand::ReadRetryPipe> retry;  // the metadata reads retry like the FTL's
    };
    auto st = std::make_shared<State>();
    st->silent = silent;
    st->retry = std::make_unique<nand::ReadRetryPipe>(pipe, opts.read_retries);
    auto decide = [&pipe, &clock, opts, shared_done, t0, st, g]() {
      if (!st->best) {
        return (*shared_done)(Status::NotFound(
            "no valid FTL metadata record: the pipe is not formatted (or its metadata is lost)"));
      }
      f::MetaHeader h;
      std::memcpy(&h, st->best->payload.data(), std::min(sizeof(h), st->best->payload.size()));
      if (st->best->payload.size() < sizeof(h) || h.magic != f::kMetaMagic ||
          h.version_major != f::kVersionMajor || h.lebs != g.blocks_per_lun ||
          h.dies != g.dies_per_pipe() || (h.sector_bytes != 512 && h.sector_bytes != 4096)) {
        return (*shared_done)(Status::Corruption("FTL metadata record does not match this pipe"));
      }
      uint32_t slot_lebs = 1;
      if ((h.flags & f::kFlagMetaSlots) != 0) {
        f::MetaSlots ms{};
        if (st->best->payload.size() >= sizeof(h) + sizeof(ms)) {
          std::memcpy(&ms, st->best->payload.data() + sizeof(h), sizeof(ms));
        }
        slot_lebs = ms.slot_lebs;
      }
      if (slot_lebs != st->slot_lebs || 2 * uint64_t{slot_lebs} + 2 > g.blocks_per_lun) {
        return (*shared_done)(Status::Corruption(fmt::format(
            "FTL metadata record says its slots are {} LEBs, its pages say {}", slot_lebs, st->slot_lebs)));
      }
      auto ftl = std::unique_ptr<Ftl>(new Ftl(pipe, clock, opts, g, h.user_sectors, h.sector_bytes, slot_lebs));
      ftl->epoch_ = h.epoch;
      ftl->sparse_ = (h.flags & f::kFlagSparse) != 0;
      ftl->impl_->stripe.set_parity((h.flags & f::kFlagFlashBack) != 0);
      ftl->impl_->stripe.set_summary_crcs((h.flags & f::kFlagSummaryCrcs) != 0);
      ftl->lebs_.set_min_good(ftl->impl_->stripe.parity() ? StripeLayout::kMinStripeDies : 0);
      ftl->reserve_ppm_ = h.reserve_ppm;
      ftl->meta_leb_ = st->best_leb;
      ftl->next_seq_ = std::max(h.next_seq, st->best->seq + 1);
      const bool checkpoint = h.kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint);
      const bool dirty = h.kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint);
      // A dirty checkpoint (written at attach) is loaded and the LEBs opened after it are
      // scanned. A bare mount record with an older checkpoint in the other metadata LEB
      // is handled the same way from that checkpoint.
      uint64_t scan_after = dirty ? st->best->seq : 0;
      const std::vector<uint8_t>* payload = &st->best->payload;
      bool with_map = checkpoint || dirty;
      const auto& other = st->recs[st->best_leb == 0 ? 1 : 0];
      if (!checkpoint && !dirty && other && other->seq < st->best->seq &&
          other->payload.size() >= sizeof(h)) {
        f::MetaHeader oh;
        std::memcpy(&oh, other->payload.data(), sizeof(oh));
        if (oh.magic == f::kMetaMagic &&
            (oh.kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint) ||
             oh.kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint)) &&
            oh.epoch == h.epoch && oh.sector_bytes == h.sector_bytes && oh.lebs == h.lebs &&
            oh.user_sectors == h.user_sectors) {
          scan_after = other->seq;
          payload = &other->payload;
          with_map = true;
        }
      }
      if (Status s = ftl->LoadMetaPayload(*payload, with_map); !s.ok()) {
        return (*shared_done)(s);
      }
      ftl->lebs_.Recount();
      // A die retired earlier (dead, or its error rate) is out of both metadata LEBs and
      // every free LEB in the record: it stays retired, and its data keeps moving off.
      if (with_map && ftl->impl_->stripe.parity()) {
        for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
          bool out = true;
          uint32_t free_lebs = 0;
          for (uint32_t b = 0; b < ftl->lebs_.size() && out; ++b) {
            const Leb& l = ftl->lebs_.leb(b);
            if (b < ftl->meta_lebs_ || l.state == LebState::kFree) {
              out = !l.good[d];
              free_lebs += b >= ftl->meta_lebs_;
            }
          }
          if (out && free_lebs >= 2 && !ftl->impl_->dies.failed(d)) {
            Logger("ftl")->warn("die {} was retired before: it stays out", d);
            ftl->impl_->dies.MarkFailed(d);
          }
        }
      }
      // Dies that did not answer at attach: the scan rebuilds their page headers from
      // parity; after attach they are declared failed (nothing more is written to them,
      // and FlashBack moves their data off).
      for (uint32_t d : st->silent) {
        Logger("ftl")->warn("die {} does not answer", d);
        if (d < g.dies_per_pipe()) {
          ftl->impl_->dies.MarkFailed(d);
          ftl->impl_->dies.MarkSilent(d);
        }
        for (uint32_t b = 0; b < ftl->meta_lebs_; ++b) ftl->lebs_.leb(b).good[d] = 0;
      }
      Ftl* raw = ftl.release();
      auto finish = [raw, shared_done, t0](Status s) {
        std::unique_ptr<Ftl> owner(raw);
        if (!s.ok()) return (*shared_done)(s);
        for (uint32_t d = 0; d < raw->impl_->dies.dies(); ++d) {
          if (raw->impl_->dies.failed(d)) raw->impl_->DeclareDieFailed(d);
        }
        // A dirty checkpoint marks the FTL in use and is the base of the next recovery:
        // a crash scans only the LEBs opened after it, and trim records older than it
        // need not be kept. If it does not fit, a mount record (full scan) is written.
        auto done_ok = [raw, shared_done, t0]() {
          // Pages the cut left without parity move first (after the checkpoint, so a
          // crash now scans the LEB they move into); the FTL is handed out once they are
          // durable and covered again.
          raw->impl_->ReprotectPages([raw, shared_done, t0]() {
            std::unique_ptr<Ftl> owner2(raw);
            raw->impl_->UpdateMode();  // health and reserve space as found
            raw->impl_->serving = true;
            raw->attach_.attach_ns = raw->clock_.Now() - t0;
            (*shared_done)(std::move(owner2));
          });
        };
        const uint64_t seq = raw->next_seq_;
        const uint32_t target = raw->meta_leb_ == 0 ? 1 : 0;
        raw->WriteCheckpointRecord(
            static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint),
            [raw, shared_done, done_ok, seq, target](Status s2, bool checkpointed) mutable {
              if (!s2.ok()) {
                std::unique_ptr<Ftl> owner2(raw);
                return (*shared_done)(s2);
              }
              if (checkpointed) {
                raw->base_ckpt_seq_ = seq;
                raw->base_ckpt_leb_ = target;
              }
              done_ok();
            });
        owner.release();
      };
      if (checkpoint) {
        raw->attach_.from_checkpoint = true;
        finish(Status::Ok());
      } else {
        raw->attach_.checkpoint_plus_scan = scan_after != 0;
        if (Impl::TraceLba() != UINT64_MAX) fmt::print(stderr, "trace attach scans after seq {}\n", scan_after);
        raw->Scan(scan_after, std::move(finish));
      }
    };
    // Both slots are read at once, first as slots of one LEB (format 1.4's layout, and
    // 1.5's on small pipes). Pages carrying a slot tag say how long the slots are; they
    // are then read again at their length. If neither LEB 0 nor LEB 1 holds any
    // metadata page (a cut after slot 0's erase, before its first page, with slots of
    // two LEBs or more), the LEBs after them are probed for a tagged page.
    auto read_slots = std::make_shared<Function<void(uint32_t)>>();
    auto probe = std::make_shared<Function<void(uint32_t)>>();
    auto finish_reads = [st, decide, read_slots, probe]() mutable {
      auto rs = std::move(*read_slots);  // break the cycles before deciding
      auto pr = std::move(*probe);
      decide();
    };
    *probe = [st, g, silent, read_slots, probe, finish_reads](uint32_t leb) mutable {
      if (leb >= g.blocks_per_lun / 4) return finish_reads();
      ReadMetaSlot(*st->retry, g, leb, 1, silent,
                   [leb, read_slots, probe, finish_reads](std::optional<MetaRead>, SlotInfo info) mutable {
                     if (info.slot_lebs >= 2) return (*read_slots)(info.slot_lebs);
                     if (info.any_meta) return finish_reads();
                     (*probe)(leb + 1);
                   });
    };
    // Reads slot `slot` of k LEBs whole; `then` after.
    auto read_one = [st, g, silent](uint32_t slot, uint32_t k, Function<void(SlotInfo)> then) {
      ReadMetaSlot(*st->retry, g, slot * k, k, silent,
                   [st, slot, then = std::move(then)](std::optional<MetaRead> m, SlotInfo info) mutable {
                     st->recs[slot] = m;
                     if (m && (!st->best || m->seq > st->best->seq)) {
                       st->best = std::move(m);
                       st->best_leb = slot;
                       st->spp = info.spp;
                     }
                     then(info);
                   });
    };
    *read_slots = [st, g, silent, read_slots, probe, finish_reads, read_one](uint32_t k) mutable {
      st->slot_lebs = k;
      st->best.reset();
      st->recs[0].reset();
      st->recs[1].reset();
      if (k > 1) {
        // Multi-LEB slots: row 0 of each tells which holds the newest record; that slot
        // is read whole, and the other only if the newest is not a checkpoint (a mount
        // record may need the older checkpoint) or is incomplete.
        auto seqs = std::make_shared<std::array<uint64_t, 2>>();
        auto left = std::make_shared<int>(2);
        for (uint32_t slot = 0; slot < 2; ++slot) {
          ReadMetaSlot(*st->retry, g, slot * k, k, silent,
                       [st, slot, k, seqs, left, finish_reads, read_one](std::optional<MetaRead>, SlotInfo info) mutable {
                         (*seqs)[slot] = info.row0_seq;
                         if (--*left != 0) return;
                         const uint32_t first = (*seqs)[1] > (*seqs)[0] ? 1 : 0;
                         read_one(first, k, [st, first, k, finish_reads, read_one](SlotInfo) mutable {
                           bool is_ckpt = false;
                           if (st->best && st->best->payload.size() >= sizeof(f::MetaHeader)) {
                             f::MetaHeader h;
                             std::memcpy(&h, st->best->payload.data(), sizeof(h));
                             is_ckpt = h.kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint) ||
                                    h.kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint);
                           }
                           if (is_ckpt) return finish_reads();
                           read_one(1 - first, k, [finish_reads](SlotInfo) mutable { finish_reads(); });
                         });
                       },
                       /*row0_only=*/true);
        }
        return;
      }
      st->remaining = 2;
      auto infos = std::make_shared<std::array<SlotInfo, 2>>();
      for (uint32_t slot = 0; slot < 2; ++slot) {
        read_one(slot, k, [st, slot, k, infos, read_slots, probe, finish_reads](SlotInfo info) mutable {
          (*infos)[slot] = info;
          if (--st->remaining != 0) return;
          const uint32_t seen = std::max((*infos)[0].slot_lebs, (*infos)[1].slot_lebs);
          if (seen > k) return (*read_slots)(seen);
          if (k == 1 && !st->best && !(*infos)[0].any_meta && !(*infos)[1].any_meta) {
            return (*probe)(2);
          }
          finish_reads();
        });
      }
    };
    (*read_slots)(1);
  });
}

}  // namespace vsl::ftl
