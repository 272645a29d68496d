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
      std::optional<MetaRead> recs[kMetaLebs];
      uint32_t spp = 0;
      uint32_t best_leb = 0;
      int remaining = 0;
      std::vector<uint32_t> silent;
      std::unique_ptr<nand::ReadRetryPipe> retry;  // the metadata reads retry like the FTL's
    };
    auto st = std::make_shared<State>();
    st->silent = silent;
    st->retry = std::make_unique<nand::ReadRetryPipe>(pipe, opts.read_retries);
    st->remaining = static_cast<int>(kMetaLebs);
    auto decide = [&pipe, &clock, opts, shared_done, t0, st, g]() {
      if (--st->remaining != 0) return;
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
      auto ftl = std::unique_ptr<Ftl>(new Ftl(pipe, clock, opts, g, h.user_sectors, h.sector_bytes));
      ftl->epoch_ = h.epoch;
      ftl->sparse_ = (h.flags & f::kFlagSparse) != 0;
      ftl->impl_->stripe.set_parity((h.flags & f::kFlagFlashBack) != 0);
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
            if (b < kMetaLebs || l.state == LebState::kFree) {
              out = !l.good[d];
              free_lebs += b >= kMetaLebs;
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
        if (d < g.dies_per_pipe()) ftl->impl_->dies.MarkFailed(d);
        for (uint32_t b = 0; b < kMetaLebs; ++b) ftl->lebs_.leb(b).good[d] = 0;
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
    for (uint32_t leb = 0; leb < kMetaLebs; ++leb) {
      ReadMetaLeb(*st->retry, g, leb, silent, [st, decide, leb](std::optional<MetaRead> m, uint32_t spp) mutable {
        st->recs[leb] = m;
        if (m && (!st->best || m->seq > st->best->seq)) {
          st->best = std::move(m);
          st->best_leb = leb;
          st->spp = spp;
        }
        decide();
      });
    }
  });
}

}  // namespace vsl::ftl
