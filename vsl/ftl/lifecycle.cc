// The FTL's life: device loss (every waiting request answered), abandonment, checkpoints
// while serving (after a die failure, periodic) and shutdown. Owns `ckpt`.
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::DeviceLost() {
  if (device_lost) return;
  device_lost = true;
  Post([this] {
    // Pages still being filled will never be submitted.
    for (AppendPoint* ap : {&host, &gcap}) {
      PageBuf* b = ap->open;
      if (b == nullptr) continue;
      ap->open = nullptr;
      FailWaiters(b);
      pages.Release(b);
    }
    RunDeferredTrims();
    RunPending();
  });
}

void Ftl::Impl::Abandon() {
  DeviceLost();
  std::vector<PageBuf*> all;
  for (const auto& own : pages.live()) all.push_back(own.get());
  for (PageBuf* b : all) {
    if (b->durable) continue;
    Uncover(b);
    FailWaiters(b);
    if (!b->submitted) {
      for (AppendPoint* ap : {&host, &gcap}) {
        if (ap->open == b) ap->open = nullptr;
      }
      pages.Release(b);
    } else if (b->flash_done) {
      pages.Release(b);
    }
  }
}

void Ftl::Impl::CheckCheckpoint() {
  if (!CheckpointWanted() || ckpt.writing || device_lost || shutting_down) return;
  if (gc.reloc.busy()) return;  // finishing; MaybeGroom picks none while one is wanted
  if (!ckpt.quiesce) {
    // A batch never spans a checkpoint: its members and commit are in the same scan.
    if (atomic_inflight != 0) return;
    ckpt.quiesce = true;
    for (AppendPoint* ap : {&host, &gcap}) {
      SubmitOpen(*ap);
      if (ap->leb() != nullptr) CloseLeb(*ap);
    }
  }
  if (!pages.empty()) return;
  // A closed LEB's summary is written once its erases and programs are done: it must be
  // on flash before the record (a summary newer than the base would make a scan take
  // the LEB for one opened after it).
  for (uint32_t i = f.meta_lebs_; i < f.lebs_.size(); ++i) {
    const Leb& l = f.lebs_.leb(i);
    if (l.summary_due || l.inflight != 0) return;
  }
  ckpt.writing = true;
  const uint32_t answers = ckpt.asked;
  const bool for_failure = ckpt.for_failure;
  ckpt.for_failure = false;
  ckpt.lebs_since = 0;
  const uint64_t seq = f.next_seq_;
  const uint32_t target = f.meta_leb_ == 0 ? 1 : 0;
  const TimeNs t0 = f.clock_.Now();
  f.WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint),
                    [this, answers, seq, target, t0, for_failure](Status s) {
    ckpt.writing = false;
    ckpt.quiesce = false;
    ckpt.written = answers;
    if (s.ok()) {
      f.base_ckpt_seq_ = seq;
      f.base_ckpt_leb_ = target;
      if (for_failure) {
        ++f.stats_.failure_checkpoints;
        Event(fmt::format("FlashBack: checkpoint written after the die failure ({} us of held "
                          "writes); data of the stripes it broke is now found from it",
                          (f.clock_.Now() - t0) / kUs));
      } else {
        ++f.stats_.periodic_checkpoints;
      }
    } else if (!device_lost) {
      Logger("ftl")->warn("checkpoint {} failed: {}", for_failure ? "after the die failure" : "(periodic)",
                          s.ToString());
    }
    RunDeferredTrims();
    RunPending();
    MaybeGroom();
    if (shutting_down) return CheckShutdown();
    CheckCheckpoint();  // another failure meanwhile
  });
}

void Ftl::Impl::DropCheckpoint() {
  if (ckpt.writing) return;
  ckpt.written = ckpt.asked;
  if (ckpt.quiesce) {
    ckpt.quiesce = false;
    RunDeferredTrims();
    RunPending();
  }
}

void Ftl::Impl::CheckShutdown() {
  if (!shutting_down || !shutdown_done) return;
  // (A summary read ahead still in flight would complete into a gone FTL.)
  if (gc.reloc.busy() || gc.vnext.left != 0 || !pending.empty() || ckpt.writing) return;
  if (!rw.empty()) {
    if (DrainRewrites()) return CheckShutdown();
    // No room and nothing being groomed (an uncovered page reads as it is).
    FailBacklog("shutdown");
  }
  if (!shutdown_parity_done && !device_lost) {
    // Nothing more will be appended: part-written rows get their parity page now, so
    // every row is protected after a clean shutdown (a stage is only for power cuts).
    shutdown_parity_done = true;
    SubmitOpen(host);
    SubmitOpen(gcap);
    for (AppendPoint* ap : {&host, &gcap}) {
      if (ap->leb() != nullptr && ap->leb()->par) SubmitParity(*ap->leb());
    }
  }
  if (!pages.empty()) return;
  // Everything is on flash and covered by parity now: the shutdown is clean even when
  // the checkpoint does not fit and a mount record stands in for it.
  f.WriteCheckpointRecord(static_cast<uint32_t>(f::MetaKind::kCheckpoint),
                          [d = std::move(shutdown_done)](Status s, bool) mutable { d(s); });
}

}  // namespace vsl::ftl
