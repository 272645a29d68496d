// A workload on every LUN of a card in virtual time, with the card's power monitor
// sampled every millisecond: what the power tests and bench/power_bench.cc measure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/testutil/sim_of.h"
#include "vsl/card/card.h"
#include "vsl/core/random.h"

namespace vsl::testing {

struct Load {
  uint32_t write_qd = 8;        // per LUN
  uint32_t write_kib = 64;
  uint32_t read_qd = 0;         // per LUN (reads of mapped data written before the run)
  uint32_t read_kib = 4;
  std::vector<uint32_t> luns;   // empty: every online LUN
  double write_from = 0;        // writes go to [write_from * sectors, sectors)
};

struct LoadResult {
  double seconds = 0;
  // errors: requests that failed (a LUN taken offline by a thermal shutdown refuses what
  // it has not acknowledged; that stream then stops).
  uint64_t write_bytes = 0, read_bytes = 0, writes = 0, reads = 0, errors = 0;
  double read_latency_sum_us = 0;
  std::vector<double> energy_j;   // card energy at each 1 ms sample
  std::vector<double> temp_c;     // hottest controller at each 1 ms sample
  double MaxWindowW(uint32_t window_ms) const {
    double m = 0;
    for (std::size_t i = window_ms; i < energy_j.size(); ++i) {
      m = std::max(m, (energy_j[i] - energy_j[i - window_ms]) / (window_ms / 1000.0));
    }
    return m;
  }
  double AvgW() const {
    return energy_j.size() < 2 ? 0 : (energy_j.back() - energy_j.front()) / ((energy_j.size() - 1) / 1000.0);
  }
  double WriteMBps() const { return seconds > 0 ? write_bytes / seconds / 1e6 : 0; }
  double ReadIops() const { return seconds > 0 ? reads / seconds : 0; }
  double ReadLatencyUs() const { return reads ? read_latency_sum_us / reads : 0; }
  double MaxTempC() const { return temp_c.empty() ? 0 : *std::max_element(temp_c.begin(), temp_c.end()); }
};

// Runs `load` for `duration` of virtual time on `card` (opened on `clock`); the 1 ms
// sampler starts with it. I/O still in flight at the end is waited for but not counted.
inline LoadResult RunLoad(card::Card& card, VirtualClock& clock, const Load& load, DurNs duration,
                          uint64_t seed = 1) {
  struct Stream {
    card::Lun* lun = nullptr;
    Rng rng{1};
    std::vector<uint8_t> wbuf, rbuf;
    uint64_t sectors = 0;
    uint32_t sb = 4096;
  };
  LoadResult r;
  const TimeNs start = clock.Now(), end = start + duration;
  std::vector<std::unique_ptr<Stream>> streams;
  uint32_t outstanding = 0;
  for (card::Lun* l : card.luns()) {
    if (l->ftl() == nullptr) continue;
    if (!load.luns.empty() && std::find(load.luns.begin(), load.luns.end(), l->index()) == load.luns.end()) continue;
    auto s = std::make_unique<Stream>();
    s->lun = l;
    s->rng = Rng(seed * 7919 + l->index());
    s->sectors = l->ftl()->sectors();
    s->sb = l->ftl()->sector_bytes();
    s->wbuf.resize(load.write_kib * 1024);
    s->rng.Fill(s->wbuf.data(), s->wbuf.size());
    s->rbuf.resize(std::max<uint32_t>(load.read_kib, 4) * 1024 * std::max<uint32_t>(load.read_qd, 1));
    streams.push_back(std::move(s));
  }
  std::function<void(Stream*)> write_one = [&](Stream* s) {
    if (clock.Now() >= end || s->lun->ftl() == nullptr || s->lun->state() != card::LunState::kOnline) return;
    const uint32_t n = load.write_kib * 1024 / s->sb;
    const uint64_t lo = static_cast<uint64_t>(load.write_from * static_cast<double>(s->sectors)) / n;
    const uint64_t lba = (lo + s->rng.Below(s->sectors / n - lo)) * n;
    ++outstanding;
    s->lun->ftl()->Write(lba, n, s->wbuf.data(), false, [&, s, n](Status st) {
      --outstanding;
      if (clock.Now() <= end) {
        if (st.ok()) {
          r.write_bytes += uint64_t{n} * s->sb;
          ++r.writes;
        } else {
          ++r.errors;
        }
      }
      if (st.ok()) write_one(s);  // a refused write (LUN going offline) ends the stream
    });
  };
  std::function<void(Stream*, uint32_t)> read_one = [&](Stream* s, uint32_t slot) {
    if (clock.Now() >= end || s->lun->ftl() == nullptr || s->lun->state() != card::LunState::kOnline) return;
    const uint32_t n = load.read_kib * 1024 / s->sb;
    // Reads over the first quarter, written before the run.
    const uint64_t lba = s->rng.Below(s->sectors / 4 / n) * n;
    const TimeNs t0 = clock.Now();
    ++outstanding;
    s->lun->ftl()->Read(lba, n, s->rbuf.data() + uint64_t{slot} * load.read_kib * 1024, [&, s, n, slot, t0](Status st) {
      --outstanding;
      if (clock.Now() <= end) {
        if (st.ok()) {
          r.read_bytes += uint64_t{n} * s->sb;
          ++r.reads;
          r.read_latency_sum_us += (clock.Now() - t0) / 1e3;
        } else {
          ++r.errors;
        }
      }
      if (st.ok()) read_one(s, slot);
    });
  };
  auto sample = [&] {
    double e = 0, t = -1e9;
    for (uint32_t c = 0; c < card.controllers(); ++c) {
      const auto rd = vsl::testing::SimOf(card).ReadPower(c);
      e += rd.energy_j;
      t = std::max(t, rd.temperature_c);
    }
    r.energy_j.push_back(e);
    r.temp_c.push_back(t);
  };
  std::function<void()> tick = [&] {
    sample();
    if (clock.Now() + kMs <= end) clock.At(clock.Now() + kMs, [&] { tick(); });
  };
  tick();
  for (auto& s : streams) {
    for (uint32_t i = 0; i < load.write_qd; ++i) write_one(s.get());
    for (uint32_t i = 0; i < load.read_qd; ++i) read_one(s.get(), i);
  }
  clock.RunUntil(end);
  r.seconds = static_cast<double>(duration) / 1e9;
  clock.RunUntilTrue([&] { return outstanding == 0; });
  return r;
}

// A new card of the duo-slc shape and timing with `blocks` blocks per die in `dir`.
inline Status MakeDuoSlc(const std::string& dir, uint32_t blocks) {
  auto p = simcard::FindProfile("duo-slc");
  if (!p.ok()) return p.status();
  simcard::CreateOptions co;
  co.blocks_per_lun = blocks;
  return simcard::SimCard::Create(dir, *p, co);
}

// Opens the card in `dir` on `clock` with `o` (clock set here), formats every controller
// in dual-pipe mode (unless `format` is false) and attaches its LUNs.
inline Result<std::unique_ptr<card::Card>> OpenAttached(const std::string& dir, VirtualClock& clock,
                                                        card::CardOptions o, bool format = true) {
  o.clock = &clock;
  VSL_ASSIGN_OR_RETURN(auto c, card::Card::Open(dir, o));
  for (uint32_t k = 0; format && k < c->controllers(); ++k) {
    VSL_RETURN_IF_ERROR(c->FormatController(k, card::PipeMode::kDual, {}));
  }
  VSL_RETURN_IF_ERROR(c->AttachAll());
  return c;
}

// Fills the first quarter of every online LUN (what RunLoad's reads read).
inline void FillQuarter(card::Card& card, VirtualClock& clock) {
  std::vector<uint8_t> buf(256 * 1024, 0x5A);
  uint32_t outstanding = 0;
  for (card::Lun* l : card.luns()) {
    ftl::Ftl* f = l->ftl();
    if (f == nullptr) continue;
    const uint32_t n = static_cast<uint32_t>(buf.size() / f->sector_bytes());
    for (uint64_t lba = 0; lba + n <= f->sectors() / 4; lba += n) {
      ++outstanding;
      f->Write(lba, n, buf.data(), false, [&outstanding](Status) { --outstanding; });
      if (outstanding >= 16) clock.RunUntilTrue([&] { return outstanding < 8; });
    }
  }
  clock.RunUntilTrue([&] { return outstanding == 0; });
}

}  // namespace vsl::testing
