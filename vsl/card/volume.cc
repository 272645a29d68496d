#include "vsl/card/volume.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace vsl::card {

Result<std::unique_ptr<CardVolume>> CardVolume::Create(std::vector<Lun*> luns, uint32_t chunk_bytes) {
  if (luns.empty()) return vsl::Status::InvalidArgument("a card volume needs at least one LUN");
  auto v = std::unique_ptr<CardVolume>(new CardVolume());
  uint64_t smallest = UINT64_MAX;
  uint32_t sb = 0;
  for (Lun* l : luns) {
    uint64_t n = 0;
    uint32_t b = 0;
    vsl::Status s = l->Call([l, &n, &b](Lun::Done d) {
      if (l->ftl() == nullptr) return d(vsl::Status::FailedPrecondition(fmt::format("{} is not online", l->name())));
      n = l->ftl()->sectors();
      b = l->ftl()->sector_bytes();
      d(vsl::Status::Ok());
    });
    if (!s.ok()) return vsl::Status::InvalidArgument(s.message());
    if (sb != 0 && b != sb) {
      return vsl::Status::InvalidArgument(
          fmt::format("{} has {} B sectors, the volume's other LUNs {} B", l->name(), b, sb));
    }
    sb = b;
    smallest = std::min(smallest, n);
  }
  if (chunk_bytes == 0 || chunk_bytes % sb != 0) {
    return vsl::Status::InvalidArgument(
        fmt::format("chunk of {} B is not a whole number of {} B sectors", chunk_bytes, sb));
  }
  v->luns_ = std::move(luns);
  v->sector_bytes_ = sb;
  v->chunk_sectors_ = chunk_bytes / sb;
  v->lun_sectors_ = smallest / v->chunk_sectors_ * v->chunk_sectors_;
  v->sectors_ = v->lun_sectors_ * v->luns_.size();
  return v;
}

std::pair<uint32_t, uint64_t> CardVolume::Locate(uint64_t lba) const {
  const uint64_t chunk = lba / chunk_sectors_;
  const auto lun = static_cast<uint32_t>(chunk % luns_.size());
  return {lun, chunk / luns_.size() * chunk_sectors_ + lba % chunk_sectors_};
}

std::vector<CardVolume::Part> CardVolume::Split(uint64_t lba, uint64_t count) const {
  std::vector<Part> parts;
  uint64_t done = 0;
  while (done < count) {
    const uint64_t at = lba + done;
    const uint64_t n = std::min<uint64_t>(count - done, chunk_sectors_ - at % chunk_sectors_);
    const auto [lun, lun_lba] = Locate(at);
    parts.push_back({lun, lun_lba, n, done});
    done += n;
  }
  return parts;
}

template <typename Op>
void CardVolume::Fan(std::vector<Part> parts, Done done, Op op) {
  struct Join {
    std::atomic<uint32_t> left{0};
    std::mutex mu;
    vsl::Status first;
    Done done;
  };
  auto j = std::make_shared<Join>();
  j->left = static_cast<uint32_t>(parts.size());
  j->done = std::move(done);
  auto finish = [j](vsl::Status s) {
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(j->mu);
      if (j->first.ok()) j->first = s;
    }
    if (j->left.fetch_sub(1) == 1) {
      vsl::Status r;
      {
        std::lock_guard<std::mutex> lock(j->mu);
        r = j->first;
      }
      auto d = std::move(j->done);
      d(r);
    }
  };
  for (const Part& p : parts) {
    Lun* l = luns_[p.lun];
    auto task = [l, p, op, finish]() mutable {
      ftl::Ftl* f = l->ftl();
      if (f == nullptr) return finish(vsl::Status::IOError(fmt::format("{} of the volume is offline", l->name())));
      op(*f, p, finish);
    };
    l->engine().Send(std::move(task));
  }
}

void CardVolume::Read(uint64_t lba, uint32_t count, uint8_t* out, Done done) {
  if (count == 0 || lba >= sectors_ || count > sectors_ - lba || out == nullptr) {
    return done(vsl::Status::InvalidArgument(
        fmt::format("read of {} sectors at {} is outside the {} sectors of the volume", count, lba, sectors_)));
  }
  const uint32_t sb = sector_bytes_;
  Fan(Split(lba, count), std::move(done), [out, sb](ftl::Ftl& f, const Part& p, auto fin) {
    f.Read(p.lba, static_cast<uint32_t>(p.count), out + p.offset * sb, std::move(fin));
  });
}

void CardVolume::Write(uint64_t lba, uint32_t count, const uint8_t* data, bool fua, Done done) {
  if (count == 0 || lba >= sectors_ || count > sectors_ - lba || data == nullptr) {
    return done(vsl::Status::InvalidArgument(
        fmt::format("write of {} sectors at {} is outside the {} sectors of the volume", count, lba, sectors_)));
  }
  const uint32_t sb = sector_bytes_;
  Fan(Split(lba, count), std::move(done), [data, sb, fua](ftl::Ftl& f, const Part& p, auto fin) {
    f.Write(p.lba, static_cast<uint32_t>(p.count), data + p.offset * sb, fua, std::move(fin));
  });
}

void CardVolume::Trim(uint64_t lba, uint64_t count, Done done) {
  if (count == 0 || lba >= sectors_ || count > sectors_ - lba) {
    return done(vsl::Status::InvalidArgument(
        fmt::format("trim of {} sectors at {} is outside the {} sectors of the volume", count, lba, sectors_)));
  }
  // A trim has no buffer: its parts on one LUN are adjacent there (whole chunks, a
  // partial one at each end), so each LUN gets one trim.
  std::vector<Part> parts = Split(lba, count);
  std::vector<Part> merged;
  for (uint32_t i = 0; i < luns_.size(); ++i) {
    for (const Part& p : parts) {
      if (p.lun != i) continue;
      if (!merged.empty() && merged.back().lun == i && merged.back().lba + merged.back().count == p.lba) {
        merged.back().count += p.count;
      } else {
        merged.push_back(p);
      }
    }
  }
  Fan(std::move(merged), std::move(done),
      [](ftl::Ftl& f, const Part& p, auto fin) { f.Trim(p.lba, p.count, std::move(fin)); });
}

void CardVolume::Flush(Done done) {
  std::vector<Part> parts;
  for (uint32_t i = 0; i < luns_.size(); ++i) parts.push_back({i, 0, 0, 0});
  Fan(std::move(parts), std::move(done), [](ftl::Ftl& f, const Part&, auto fin) { f.Flush(std::move(fin)); });
}

}  // namespace vsl::card
