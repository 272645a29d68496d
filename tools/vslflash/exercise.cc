#include "tools/vslflash/exercise.h"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/core/random.h"

namespace vsl::tools {
namespace {

using nand::Completion;
using nand::FlashStatus;

class Tracker {
 public:
  Tracker(std::string phase, uint64_t total, const ProgressFn& fn)
      : phase_(std::move(phase)), total_(total), fn_(fn) {
    if (fn_) fn_(phase_, 0.0);
  }
  void Done() {
    ++done_;
    if (!fn_ || total_ == 0) return;
    const uint64_t step = std::max<uint64_t>(1, total_ / 50);
    if (done_ % step == 0 || done_ == total_) fn_(phase_, static_cast<double>(done_) / total_);
  }
  bool finished() const { return done_ >= total_; }

 private:
  std::string phase_;
  uint64_t total_, done_ = 0;
  const ProgressFn& fn_;
};

}  // namespace

Result<ExerciseReport> RunExercise(simcard::SimCard& card, Clock& clock,
                                   const std::function<bool(std::function<bool()>)>& drive,
                                   const ExerciseOptions& opts, const ProgressFn& progress) {
  ExerciseReport rep;
  const TimeNs start = clock.Now();
  const uint32_t pipes = card.pipe_count();

  // 1. Discovery, as at attach.
  for (uint32_t p = 0; p < pipes; ++p) {
    std::optional<Result<nand::DiscoveredPipe>> r;
    nand::DiscoverPipe(card.pipe(p), [&](Result<nand::DiscoveredPipe> x) { r = std::move(x); });
    if (!drive([&] { return r.has_value(); })) return Status::Internal("discovery never finished");
    if (!r->ok()) return r->status().WithContext(fmt::format("pipe {}", p));
    rep.pipes.push_back(r->value());
  }
  const nand::Geometry& g = rep.pipes[0].geometry;
  const uint32_t dies = g.dies_per_pipe();
  const uint32_t meta_bytes = g.meta_bytes_per_page();

  // 2. Factory bad-block scan: byte 0 of the first page's spare.
  std::vector<std::vector<uint8_t>> bad(pipes * dies, std::vector<uint8_t>(g.blocks_per_lun, 0));
  auto silent = [&](uint32_t p, uint32_t die) {
    const auto& s = rep.pipes[p].silent_dies;
    return std::find(s.begin(), s.end(), die) != s.end();
  };
  if (opts.scan_bad_blocks) {
    uint64_t total = 0;
    for (uint32_t p = 0; p < pipes; ++p) {
      for (uint32_t d = 0; d < dies; ++d) total += silent(p, d) ? 0 : g.blocks_per_lun;
    }
    Tracker t("scan", total, progress);
    auto metas = std::make_unique<uint8_t[]>(total * meta_bytes);
    uint64_t i = 0;
    for (uint32_t p = 0; p < pipes; ++p) {
      for (uint32_t d = 0; d < dies; ++d) {
        if (silent(p, d)) continue;
        for (uint32_t b = 0; b < g.blocks_per_lun; ++b, ++i) {
          uint8_t* m = metas.get() + i * meta_bytes;
          card.pipe(p).Read({{d, b, 0}, 0, 1, nullptr, m}, [&, p, d, b, m](const Completion& c) {
            if (!c.ok() || m[0] != 0xFF) bad[p * dies + d][b] = 1;
            t.Done();
          });
        }
      }
    }
    if (!drive([&] { return t.finished(); })) return Status::Internal("scan never finished");
    for (uint32_t p = 0; p < pipes; ++p) {
      for (uint32_t d = 0; d < dies; ++d) {
        for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
          rep.bad_blocks_found += bad[p * dies + d][b];
          rep.bad_blocks_truth += card.block_info(p, d, b).factory_bad;
        }
      }
    }
  }

  // 3. Erase / program / read-verify one block per die, all dies at once. The block
  // rotates with the card's power-on count so repeated runs spread their wear.
  const uint32_t pages = std::min(opts.pages_per_die, g.pages_per_block);
  const uint64_t rotation = card.Health(0).power_on_count;
  struct DieWork {
    uint32_t pipe, die, block;
    std::vector<uint8_t> data, meta, readback, read_meta;
  };
  std::vector<std::unique_ptr<DieWork>> work;
  for (uint32_t p = 0; p < pipes; ++p) {
    for (uint32_t d = 0; d < dies; ++d) {
      if (silent(p, d)) {
        ++rep.dies_skipped;
        continue;
      }
      // Block 0 holds nothing of ours, but keep it for the FTL: start from block 1.
      uint32_t chosen = UINT32_MAX;
      for (uint32_t k = 0; k < g.blocks_per_lun - 1; ++k) {
        const uint32_t b = 1 + static_cast<uint32_t>((rotation + k) % (g.blocks_per_lun - 1));
        if (!bad[p * dies + d][b] && !card.block_info(p, d, b).grown_bad) {
          chosen = b;
          break;
        }
      }
      if (chosen == UINT32_MAX) {
        ++rep.dies_skipped;
        continue;
      }
      auto w = std::make_unique<DieWork>();
      w->pipe = p;
      w->die = d;
      w->block = chosen;
      w->data.resize(uint64_t{pages} * g.page_data_bytes);
      w->meta.resize(uint64_t{pages} * meta_bytes);
      Rng rng = Rng(opts.seed).Fork((uint64_t{p} << 32) | d);
      rng.Fill(w->data.data(), w->data.size());
      rng.Fill(w->meta.data(), w->meta.size());
      for (uint32_t pg = 0; pg < pages; ++pg) w->meta[uint64_t{pg} * meta_bytes] = 0xFF;
      w->readback.resize(w->data.size());
      w->read_meta.resize(w->meta.size());
      work.push_back(std::move(w));
    }
  }
  rep.dies_exercised = work.size();
  Tracker t("write+verify", work.size() * (2 + 2 * uint64_t{pages}), progress);
  for (auto& wp : work) {
    DieWork* w = wp.get();
    nand::FlashPipe& pipe = card.pipe(w->pipe);
    pipe.Erase(w->die, w->block, [&, w](const Completion& c) {
      rep.erase.Add(c.complete_ns - c.submit_ns);
      if (!c.ok()) ++rep.erase_failures;
      t.Done();
    });
    for (uint32_t pg = 0; pg < pages; ++pg) {
      nand::ProgramRequest req{{w->die, w->block, pg}, w->data.data() + uint64_t{pg} * g.page_data_bytes,
                               w->meta.data() + uint64_t{pg} * meta_bytes};
      pipe.Program(req, [&](const Completion& c) { rep.accept.Add(c.complete_ns - c.submit_ns); },
                   [&](const Completion& c) {
                     rep.program.Add(c.complete_ns - c.submit_ns);
                     if (c.ok()) {
                       ++rep.pages_programmed;
                       rep.bytes_programmed += g.page_data_bytes;
                     } else {
                       ++rep.program_failures;
                     }
                     t.Done();
                   });
    }
    for (uint32_t pg = 0; pg < pages; ++pg) {
      nand::ReadRequest req{{w->die, w->block, pg}, 0, 0,
                            w->readback.data() + uint64_t{pg} * g.page_data_bytes,
                            w->read_meta.data() + uint64_t{pg} * meta_bytes};
      pipe.Read(req, [&, w, pg](const Completion& c) {
        rep.read.Add(c.complete_ns - c.submit_ns);
        rep.corrected_bits += c.corrected_bits;
        rep.bytes_read += g.page_data_bytes;
        if (!c.ok()) {
          ++rep.read_failures;
        } else {
          const uint64_t off = uint64_t{pg} * g.page_data_bytes, moff = uint64_t{pg} * meta_bytes;
          const bool same =
              std::equal(w->data.begin() + off, w->data.begin() + off + g.page_data_bytes,
                         w->readback.begin() + off) &&
              std::equal(w->meta.begin() + moff, w->meta.begin() + moff + meta_bytes,
                         w->read_meta.begin() + moff);
          ++rep.pages_verified;
          rep.mismatches += !same;
        }
        t.Done();
      });
    }
    // One more erase so the exercise leaves no stale pattern behind for the next run.
    pipe.Erase(w->die, w->block, [&](const Completion& c) {
      rep.erase.Add(c.complete_ns - c.submit_ns);
      if (!c.ok()) ++rep.erase_failures;
      t.Done();
    });
  }
  if (!drive([&] { return t.finished(); })) return Status::Internal("workload never finished");
  rep.elapsed_ns = clock.Now() - start;
  return rep;
}

}  // namespace vsl::tools
