#include "vsl/simcard/plp_journal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace vsl::simcard {

// Layout: a 64-byte file header, then `records` slots of stride bytes: a 64-byte record
// head followed by slot_bytes of data. `state` is written last when a record is added and
// first when it is removed, so a kill leaves every slot either absent or complete.
struct PlpJournal::Head {
  uint32_t state;  // 0 free, kLive present
  uint8_t kind;
  uint8_t pad[3];
  uint64_t seq;
  uint32_t die, block, page, erase_count_after;
  uint8_t reserved[32];
};
static_assert(sizeof(PlpJournal::Head) == 64, "record heads are 64 bytes");


namespace {
constexpr uint64_t kMagic = 0x4F56534C504C504AULL;  // "OVSLPLPJ"
constexpr uint32_t kLive = 0x4C495645;              // "LIVE"
struct FileHeader {
  uint64_t magic;
  uint32_t records, slot_bytes;
  uint8_t reserved[48];
};
static_assert(sizeof(FileHeader) == 64);
}  // namespace

Result<std::unique_ptr<PlpJournal>> PlpJournal::Open(const std::string& path, uint32_t records,
                                                     uint32_t slot_bytes) {
  std::unique_ptr<PlpJournal> j(new PlpJournal());
  j->records_ = records;
  j->slot_bytes_ = slot_bytes;
  j->stride_ = (64 + slot_bytes + 63) / 64 * 64;
  j->map_bytes_ = 64 + std::size_t{records} * j->stride_;
  j->fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (j->fd_ < 0) return Status::IOError(fmt::format("open {}: {}", path, std::strerror(errno)));
  FileHeader fh{};
  const bool fresh = ::pread(j->fd_, &fh, sizeof fh, 0) != static_cast<ssize_t>(sizeof fh) || fh.magic != kMagic ||
                     fh.records != records || fh.slot_bytes != slot_bytes;
  if (fresh) {
    // New, or from another shape: nothing in it can be replayed safely.
    if (::ftruncate(j->fd_, 0) != 0 || ::ftruncate(j->fd_, static_cast<off_t>(j->map_bytes_)) != 0) {
      return Status::IOError(fmt::format("size {}: {}", path, std::strerror(errno)));
    }
  }
  void* m = ::mmap(nullptr, j->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, j->fd_, 0);
  if (m == MAP_FAILED) return Status::IOError(fmt::format("mmap {}: {}", path, std::strerror(errno)));
  j->map_ = static_cast<uint8_t*>(m);
  if (fresh) {
    fh = FileHeader{};
    fh.magic = kMagic;
    fh.records = records;
    fh.slot_bytes = slot_bytes;
    std::memcpy(j->map_, &fh, sizeof fh);
  }
  j->live_.assign(records, false);
  j->free_.reserve(records);
  for (uint32_t i = records; i-- > 0;) {
    // A fresh file reads as zeros: no need to fault in every slot to learn so.
    if (!fresh && j->head(i)->state == kLive) {
      j->live_[i] = true;
    } else {
      j->free_.push_back(i);
    }
  }
  return j;
}

PlpJournal::~PlpJournal() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

PlpJournal::Head* PlpJournal::head(uint32_t i) const {
  return reinterpret_cast<Head*>(map_ + 64 + std::size_t{i} * stride_);
}

int PlpJournal::Add(Kind kind, uint64_t seq, uint32_t die, uint32_t block, uint32_t page,
                    uint32_t erase_count_after, const uint8_t* data) {
  int i = -1;
  uint8_t* d = Reserve(&i);
  if (d == nullptr) return -1;
  if (data != nullptr) std::memcpy(d, data, slot_bytes_);
  Commit(i, kind, seq, die, block, page, erase_count_after);
  return i;
}

uint8_t* PlpJournal::Reserve(int* index) {
  *index = -1;
  if (free_.empty()) {
    if (overflows_++ == 0) {
      std::fprintf(stderr, "simcard: PLP journal full (%u records): an operation goes unrecorded\n", records_);
    }
    return nullptr;
  }
  const uint32_t i = free_.back();
  free_.pop_back();
  *index = static_cast<int>(i);
  return reinterpret_cast<uint8_t*>(head(i)) + 64;
}

void PlpJournal::Commit(int index, Kind kind, uint64_t seq, uint32_t die, uint32_t block, uint32_t page,
                        uint32_t erase_count_after) {
  const uint32_t i = static_cast<uint32_t>(index);
  Head* h = head(i);
  h->kind = static_cast<uint8_t>(kind);
  h->seq = seq;
  h->die = die;
  h->block = block;
  h->page = page;
  h->erase_count_after = erase_count_after;
  __atomic_store_n(&h->state, kLive, __ATOMIC_RELEASE);
  live_[i] = true;
}

void PlpJournal::Remove(int index) {
  if (index < 0) return;
  __atomic_store_n(&head(static_cast<uint32_t>(index))->state, 0u, __ATOMIC_RELEASE);
  live_[static_cast<uint32_t>(index)] = false;
  free_.push_back(static_cast<uint32_t>(index));
}

std::vector<PlpJournal::Record> PlpJournal::Pending() const {
  std::vector<Record> v;
  for (uint32_t i = 0; i < records_; ++i) {
    if (!live_[i]) continue;
    const Head* h = head(i);
    v.push_back({static_cast<Kind>(h->kind), h->seq, h->die, h->block, h->page, h->erase_count_after,
                 reinterpret_cast<const uint8_t*>(h) + 64});
  }
  return v;
}

void PlpJournal::Clear() {
  free_.clear();
  for (uint32_t i = records_; i-- > 0;) {
    if (live_[i]) {
      head(i)->state = 0;
      live_[i] = false;
    }
    free_.push_back(i);
  }
}

}  // namespace vsl::simcard
