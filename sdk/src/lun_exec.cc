// Runs SDK requests against a LUN's FTL, on the LUN's engine: shared by the in-process
// backend and vsld's side of attached mode.
#include "sdk/src/lun_exec.h"

#include <cerrno>

namespace vsl::sdk {
namespace {

// The completion is taken out of the op before it runs: it may free or reuse the op.
void Finish(Op* op) {
  Function<void()> d = std::move(op->done);
  d();
}

}  // namespace

void ExecuteOnLun(card::Lun& lun, Op* op) {
  ftl::Ftl* f = lun.ftl();
  if (f == nullptr || lun.state() != card::LunState::kOnline) {
    op->result = -EIO;
    return Finish(op);
  }
  // Answered at once, from the map.
  switch (op->kind) {
    case Op::kExists:
      if (op->lba >= f->sectors()) {
        op->result = -EINVAL;
      } else {
        op->result = static_cast<int64_t>(f->MappedIn(op->lba, op->count));
      }
      return Finish(op);
    case Op::kRuns: {
      if (op->lba >= f->sectors()) {
        op->result = -EINVAL;
        return Finish(op);
      }
      auto runs = f->MappedRuns(op->lba, op->count, op->max_runs, &op->next);
      op->runs.clear();
      for (const auto& [l, n] : runs) op->runs.push_back({l, n});
      op->result = 0;
      return Finish(op);
    }
    case Op::kUsage:
      op->usage.logical_sectors = f->sectors();
      op->usage.mapped_sectors = f->mapped_sectors();
      op->usage.physical_sectors = f->physical_user_sectors();
      op->result = 0;
      return Finish(op);
    default:
      break;
  }
  auto finish = [op](Status s) {
    op->result = s.ok() ? 0 : s.ToErrno();
    Finish(op);
  };
  switch (op->kind) {
    case Op::kRead:
      return f->Read(op->lba, static_cast<uint32_t>(op->count), static_cast<uint8_t*>(op->buf),
                     std::move(finish));
    case Op::kWrite:
      return f->Write(op->lba, static_cast<uint32_t>(op->count), static_cast<const uint8_t*>(op->buf),
                      (op->flags & VSL_FUA) != 0, std::move(finish));
    case Op::kTrim:
      return f->Trim(op->lba, op->count, std::move(finish));
    case Op::kFlush:
      return f->Flush(std::move(finish));
    case Op::kAtomic: {
      std::vector<ftl::AtomicOp> ops;
      ops.reserve(op->vecs.size());
      for (const vsl_vec& v : op->vecs) {
        ops.push_back({v.op == VSL_VEC_TRIM ? ftl::AtomicOp::kTrim : ftl::AtomicOp::kWrite, v.lba, v.count,
                       static_cast<const uint8_t*>(v.buf)});
      }
      return f->WriteAtomic(std::move(ops), (op->flags & VSL_FUA) != 0, std::move(finish));
    }
    default:
      break;
  }
  finish(Status::InvalidArgument("unknown SDK request"));
}

Status LunCaps(card::Lun& lun, vsl_caps* caps) {
  return lun.Call([&lun, caps](ftl::Ftl::Done d) {
    ftl::Ftl* f = lun.ftl();
    if (f == nullptr) return d(Status::FailedPrecondition(lun.name() + " is not attached"));
    *caps = vsl_caps{};
    caps->sector_bytes = f->sector_bytes();
    caps->sectors = f->sectors();
    const auto lim = f->atomic_limits();
    caps->atomic_max_vectors = lim.max_ops;
    caps->atomic_max_trims = lim.max_trims;
    caps->atomic_max_sectors = lim.max_write_sectors;
    caps->max_io_sectors = kMaxIoBytes / f->sector_bytes();
    caps->queue_depth = 4096;
    caps->flags = VSL_CAP_ATOMIC_WRITE | VSL_CAP_ATOMIC_TRIM | VSL_CAP_PERSISTENT_TRIM;
    if (f->sparse()) caps->flags |= VSL_CAP_SPARSE;
    d(Status::Ok());
  });
}

}  // namespace vsl::sdk
