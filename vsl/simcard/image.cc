#include "vsl/simcard/image.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "vsl/core/crc.h"
#include "vsl/core/log.h"
#include "vsl/nand/flash.h"

namespace vsl::simcard {
namespace {

using format::ImageHeader;
using format::ImageState;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void CopyText(char* dst, std::size_t width, const std::string& s) {
  std::memset(dst, 0, width);
  std::memcpy(dst, s.data(), std::min(s.size(), width - 1));
}

std::string ReadText(const char* src, std::size_t width) {
  return std::string(src, strnlen(src, width));
}

uint32_t HeaderCrc(const ImageHeader& h) {
  ImageHeader copy = h;
  copy.header_crc = 0;
  return Crc32c(&copy, sizeof(copy));
}

uint32_t StateCrc(const ImageState& s) {
  ImageState copy = s;
  copy.crc = 0;
  return Crc32c(&copy, sizeof(copy));
}

Status PwriteAll(int fd, const void* buf, uint64_t len, uint64_t off) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "card image write");
    }
    p += n;
    len -= static_cast<uint64_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status PreadAll(int fd, void* buf, uint64_t len, uint64_t off) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = ::pread(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "card image read");
    }
    if (n == 0) return Status::Corruption("card image read past end of file");
    p += n;
    len -= static_cast<uint64_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

nand::Geometry GeometryOf(const ImageHeader& h) {
  nand::Geometry g;
  g.controllers = h.controllers;
  g.pipes_per_controller = h.pipes_per_controller;
  g.channels_per_pipe = h.channels_per_pipe;
  g.luns_per_channel = h.luns_per_channel;
  g.planes_per_lun = h.planes_per_lun;
  g.blocks_per_lun = h.blocks_per_lun;
  g.pages_per_block = h.pages_per_block;
  g.page_data_bytes = h.page_data_bytes;
  g.page_spare_bytes = h.page_spare_bytes;
  g.ecc_codeword_bytes = h.ecc_codeword_bytes;
  g.ecc_parity_bytes = h.ecc_parity_bytes;
  g.ecc_t = h.ecc_t;
  return g;
}

}  // namespace

ImageLayout ComputeLayout(const nand::Geometry& g) {
  ImageLayout l{};
  const uint64_t dies = g.dies_per_controller();
  const uint64_t blocks = dies * g.blocks_per_lun;
  const uint64_t pages = blocks * g.pages_per_block;
  l.die_table_offset = format::kTablesOffset;
  l.block_table_offset =
      AlignUp(l.die_table_offset + dies * sizeof(format::DieRecord), format::kAlign);
  l.page_table_offset =
      AlignUp(l.block_table_offset + blocks * sizeof(format::BlockRecord), format::kAlign);
  l.data_offset = AlignUp(l.page_table_offset + pages, format::kAlign);
  l.page_slot_bytes = uint64_t{g.page_data_bytes} + g.page_spare_bytes;
  l.file_bytes = l.data_offset + pages * l.page_slot_bytes;
  return l;
}

Result<std::unique_ptr<ControllerImage>> ControllerImage::Create(const std::string& path,
                                                                 const Profile& profile,
                                                                 uint32_t index,
                                                                 uint64_t card_id,
                                                                 const std::string& serial,
                                                                 uint64_t seed) {
  const nand::Geometry& g = profile.geometry;
  VSL_RETURN_IF_ERROR(g.Validate());
  if (index >= g.controllers) {
    return Status::InvalidArgument(
        fmt::format("controller index {} out of range (card has {})", index, g.controllers));
  }
  const ImageLayout l = ComputeLayout(g);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("create card image {}", path));
  if (::ftruncate(fd, static_cast<off_t>(l.file_bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return Status::FromErrno(err, fmt::format("size card image {}", path));
  }

  auto header = std::make_unique<ImageHeader>();
  std::memset(header.get(), 0, sizeof(ImageHeader));
  ImageHeader& h = *header;
  std::memcpy(h.magic, format::kMagic, sizeof(h.magic));
  h.version_major = format::kVersionMajor;
  h.version_minor = format::kVersionMinor;
  h.header_bytes = sizeof(ImageHeader);
  h.card_id = card_id;
  h.controller_index = index;
  h.controllers = g.controllers;
  h.pipes_per_controller = g.pipes_per_controller;
  h.channels_per_pipe = g.channels_per_pipe;
  h.luns_per_channel = g.luns_per_channel;
  h.planes_per_lun = g.planes_per_lun;
  h.blocks_per_lun = g.blocks_per_lun;
  h.pages_per_block = g.pages_per_block;
  h.page_data_bytes = g.page_data_bytes;
  h.page_spare_bytes = g.page_spare_bytes;
  h.ecc_codeword_bytes = g.ecc_codeword_bytes;
  h.ecc_parity_bytes = g.ecc_parity_bytes;
  h.ecc_t = g.ecc_t;
  h.die_table_offset = l.die_table_offset;
  h.block_table_offset = l.block_table_offset;
  h.page_table_offset = l.page_table_offset;
  h.data_offset = l.data_offset;
  h.page_slot_bytes = l.page_slot_bytes;
  h.file_bytes = l.file_bytes;
  h.creation_seed = seed;
  CopyText(h.serial, sizeof(h.serial), serial);
  CopyText(h.profile, sizeof(h.profile), profile.name);
  CopyText(h.firmware_version, sizeof(h.firmware_version), profile.firmware_version);
  CopyText(h.model, sizeof(h.model), profile.model);
  const auto pp = nand::onfi::Encode(profile.ParameterPage());
  std::memcpy(h.param_page, pp.data(), pp.size());
  h.header_crc = HeaderCrc(h);

  ImageState st{};
  st.plp_state = static_cast<uint8_t>(profile.plp.present ? nand::PlpState::kHealthy
                                                          : nand::PlpState::kAbsent);
  st.crc = StateCrc(st);
  Status s = PwriteAll(fd, &h, sizeof(h), format::kHeaderOffset);
  if (s.ok()) s = PwriteAll(fd, &st, sizeof(st), format::kStateOffset);
  if (!s.ok()) {
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  auto mapped = Map(fd, path);
  if (!mapped.ok()) {
    ::unlink(path.c_str());
    return mapped.status();
  }
  auto img = std::move(mapped).value();

  // Factory bad blocks: NAND vendors mark them by a non-0xFF byte 0 in the spare area of
  // the block's first and last page. Block 0 of each die is guaranteed good (ONFI's
  // "guaranteed valid blocks"). The count per die never exceeds the parameter page's max.
  const uint32_t max_bad = profile.ParameterPage().max_bad_blocks_per_lun;
  std::vector<uint8_t> slot(l.page_slot_bytes, 0x00);
  Rng rng(seed);
  for (uint32_t d = 0; d < g.dies_per_controller(); ++d) {
    Rng die_rng = rng.Fork(uint64_t{index} << 32 | d);
    uint32_t bad = 0;
    for (uint32_t b = 1; b < g.blocks_per_lun && bad < max_bad; ++b) {
      if (!die_rng.Bernoulli(profile.reliability.factory_bad_fraction)) continue;
      ++bad;
      auto& rec = img->block(d, b);
      rec.flags |= format::kBlockFactoryBad;
      rec.next_page = static_cast<uint16_t>(g.pages_per_block);
      for (uint32_t p : {0u, g.pages_per_block - 1}) {
        VSL_RETURN_IF_ERROR(img->WriteSlot(d, b, p, slot.data()));
        img->set_page_state(d, b, p, format::PageState::kProgrammed);
      }
    }
  }
  VSL_RETURN_IF_ERROR(img->Sync());
  return img;
}

Result<std::unique_ptr<ControllerImage>> ControllerImage::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("open card image {}", path));
  // One owner at a time (a card is one piece of hardware): the lock goes with the file
  // descriptor, so it is released however the owner ends, a crash included.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return Status::Busy(fmt::format("card image {} is in use by another process (vsld?)", path));
    }
    return Status::FromErrno(e, fmt::format("lock card image {}", path));
  }
  return Map(fd, path);
}

Result<std::unique_ptr<ControllerImage>> ControllerImage::Map(int fd, const std::string& path) {
  auto fail = [&](Status s) {
    ::close(fd);
    return s.WithContext(fmt::format("card image {}", path));
  };
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return fail(Status::FromErrno(errno, "stat"));
  const auto size = static_cast<uint64_t>(sb.st_size);
  if (size < format::kTablesOffset) {
    return fail(Status::Corruption(
        fmt::format("file is {} bytes, too small to be an OpenVSL card image", size)));
  }
  ImageHeader h;
  Status s = PreadAll(fd, &h, sizeof(h), format::kHeaderOffset);
  if (!s.ok()) return fail(s);
  if (std::memcmp(h.magic, format::kMagic, sizeof(h.magic)) != 0) {
    return fail(Status::Corruption("not an OpenVSL card image (bad magic)"));
  }
  if (h.version_major != format::kVersionMajor) {
    return fail(Status::NotSupported(
        fmt::format("format version {}.{} is not readable by this build (major {})",
                    h.version_major, h.version_minor, format::kVersionMajor)));
  }
  if (h.header_crc != HeaderCrc(h)) {
    return fail(Status::Corruption("header CRC mismatch (the header is damaged)"));
  }
  if (h.header_bytes != sizeof(ImageHeader)) {
    return fail(Status::Corruption("header size field is wrong"));
  }
  const nand::Geometry g = GeometryOf(h);
  if (Status gs = g.Validate(); !gs.ok()) return fail(Status::Corruption(gs.message()));
  if (h.controller_index >= h.controllers) {
    return fail(Status::Corruption("controller index out of range"));
  }
  const ImageLayout l = ComputeLayout(g);
  if (h.die_table_offset != l.die_table_offset || h.block_table_offset != l.block_table_offset ||
      h.page_table_offset != l.page_table_offset || h.data_offset != l.data_offset ||
      h.page_slot_bytes != l.page_slot_bytes || h.file_bytes != l.file_bytes) {
    return fail(Status::Corruption("layout does not match the geometry in the header"));
  }
  if (size != h.file_bytes) {
    return fail(Status::Corruption(fmt::format(
        "file is {} bytes but the header says {} (truncated or extended)", size, h.file_bytes)));
  }
  auto pp = nand::onfi::DecodeOne(h.param_page);
  if (!pp.ok()) return fail(Status::Corruption("stored parameter page is damaged"));

  const uint64_t map_bytes = l.file_bytes;
  void* m = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (m == MAP_FAILED) return fail(Status::FromErrno(errno, "mmap"));

  auto img = std::unique_ptr<ControllerImage>(new ControllerImage());
  img->path_ = path;
  img->fd_ = fd;
  img->map_ = static_cast<uint8_t*>(m);
  img->map_bytes_ = map_bytes;
  img->meta_bytes_ = l.data_offset;
  img->os_page_bytes_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  img->blocks_ = uint64_t{g.dies_per_controller()} * g.blocks_per_lun;
  img->allocated_.reset(new std::atomic<uint32_t>[img->blocks_]);
  for (uint64_t i = 0; i < img->blocks_; ++i) img->allocated_[i].store(0, std::memory_order_relaxed);
  img->chunk_pages_ = static_cast<uint32_t>(
      std::clamp<uint64_t>(kAllocChunkBytes / l.page_slot_bytes, 1, g.pages_per_block));
  {
    const uint64_t block_bytes = uint64_t{g.pages_per_block} * l.page_slot_bytes;
    img->kept_limit_ = std::min(img->blocks_ / kKeptErasedShare, kKeptMaxBytes / std::max<uint64_t>(block_bytes, 1));
  }
  img->header_ = reinterpret_cast<const ImageHeader*>(img->map_);
  img->state_ = reinterpret_cast<ImageState*>(img->map_ + format::kStateOffset);
  img->lifetime_ = reinterpret_cast<format::LifetimeRecord*>(img->map_ + format::kLifetimeOffset);
  {
    format::LifetimeRecord& lr = *img->lifetime_;
    const uint32_t want = lr.crc;
    lr.crc = 0;
    const uint32_t got = Crc32c(&lr, sizeof(lr));
    lr.crc = want;
    if (lr.magic != format::kLifetimeMagic || got != want) {
      // Counters are not data: a damaged record starts again from zero, said aloud.
      if (lr.magic != 0) Logger("simcard")->warn("card image {}: lifetime counters damaged; counting from zero", path);
      std::memset(&lr, 0, sizeof(lr));
      lr.magic = format::kLifetimeMagic;
      img->SealLifetime();
    }
  }
  img->die_table_ = reinterpret_cast<format::DieRecord*>(img->map_ + h.die_table_offset);
  img->block_table_ = reinterpret_cast<format::BlockRecord*>(img->map_ + h.block_table_offset);
  img->page_table_ = img->map_ + h.page_table_offset;
  img->geometry_ = g;
  img->identity_ = ImageIdentity{h.card_id,
                                 h.controller_index,
                                 ReadText(h.serial, sizeof(h.serial)),
                                 ReadText(h.profile, sizeof(h.profile)),
                                 ReadText(h.firmware_version, sizeof(h.firmware_version)),
                                 ReadText(h.model, sizeof(h.model))};
  if (img->state_->crc != StateCrc(*img->state_)) {
    return Status::Corruption(
        fmt::format("card image {}: state record CRC mismatch (the state is damaged)", path));
  }
  // Table contents are checked where they are used: a page state or block record out of
  // range is treated as damage by the card model, never trusted blindly.
  return img;
}

ControllerImage::~ControllerImage() {
  if (map_ != nullptr) {
    ::msync(map_, meta_bytes_, MS_SYNC);
    ::munmap(map_, map_bytes_);
  }
  if (fd_ >= 0) ::close(fd_);
}

Status ControllerImage::Allocate(uint32_t d, uint32_t b, uint32_t p) {
  std::atomic<uint32_t>& a = allocated_[uint64_t{d} * geometry_.blocks_per_lun + b];
  uint32_t v = a.load(std::memory_order_acquire);
  if ((v & kKeptBit) != 0 && a.compare_exchange_strong(v, v & kCountMask, std::memory_order_acq_rel)) {
    kept_.fetch_sub(1, std::memory_order_relaxed);
    v &= kCountMask;
  }
  if ((v & (kKeptBit | kReleasingBit)) == 0 && p < v) return Status::Ok();
  // Beyond what is allocated, or a kept block a release took first: allocate the chunk
  // that holds `p` (and any unallocated pages before it), after any release is done.
  std::lock_guard<std::mutex> lock(space_mu_);
  v = a.load(std::memory_order_acquire);  // 0 after a release, else this pipe's own count
  const uint32_t from = v & kCountMask;
  if (p < from) return Status::Ok();
  const uint32_t to = std::min(geometry_.pages_per_block, (p / chunk_pages_ + 1) * chunk_pages_);
  const uint64_t start = SlotOffset(d, b, from);
  const uint64_t len = uint64_t{to - from} * header_->page_slot_bytes;
  bool released = false;
  while (::fallocate(fd_, 0, static_cast<off_t>(start), static_cast<off_t>(len)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EOPNOTSUPP) {
      pwrite_slots_ = true;  // a write through the mapping could not report a full disk
      return Status::Ok();
    }
    if (errno == ENOSPC && !released) {
      released = true;
      const uint64_t freed = ReleaseKeptLocked();
      if (freed > 0) {
        Logger("simcard")->warn("card image {}: the filesystem is full; gave back the room of {} kept erased blocks",
                                path_, freed);
        continue;
      }
      errno = ENOSPC;
    }
    return Status::FromErrno(errno, "card image: allocate a block's page slots");
  }
  a.store(to, std::memory_order_release);
  // Map the pages now, in one call, rather than fault them in a page at a time as the
  // slots are written (best effort: older kernels lack it).
  const uint64_t first = start / os_page_bytes_ * os_page_bytes_;
  (void)::madvise(map_ + first, start + len - first, MADV_POPULATE_WRITE);
  return Status::Ok();
}

uint64_t ControllerImage::ReleaseKept() {
  std::lock_guard<std::mutex> lock(space_mu_);
  return ReleaseKeptLocked();
}

uint64_t ControllerImage::ReleaseKeptLocked() {
  uint64_t freed = 0;
  for (uint64_t i = 0; i < blocks_ && kept_.load(std::memory_order_relaxed) > 0; ++i) {
    uint32_t v = allocated_[i].load(std::memory_order_acquire);
    if ((v & kKeptBit) == 0) continue;
    if (!allocated_[i].compare_exchange_strong(v, kReleasingBit, std::memory_order_acq_rel)) continue;
    const uint32_t d = static_cast<uint32_t>(i / geometry_.blocks_per_lun);
    const uint32_t b = static_cast<uint32_t>(i % geometry_.blocks_per_lun);
    const uint64_t len = uint64_t{geometry_.pages_per_block} * header_->page_slot_bytes;
    (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(SlotOffset(d, b, 0)),
                      static_cast<off_t>(len));
    allocated_[i].store(0, std::memory_order_release);
    kept_.fetch_sub(1, std::memory_order_relaxed);
    ++freed;
  }
  return freed;
}

Status ControllerImage::WriteSlot(uint32_t d, uint32_t b, uint32_t p, const uint8_t* slot) {
  if (Status s = Allocate(d, b, p); !s.ok()) return s;
  if (pwrite_slots_) return PwriteAll(fd_, slot, header_->page_slot_bytes, SlotOffset(d, b, p));
  std::memcpy(map_ + SlotOffset(d, b, p), slot, header_->page_slot_bytes);
  return Status::Ok();
}

Status ControllerImage::ReadSlot(uint32_t d, uint32_t b, uint32_t p, uint8_t* slot) const {
  std::memcpy(slot, map_ + SlotOffset(d, b, p), header_->page_slot_bytes);
  return Status::Ok();
}

Status ControllerImage::ReadSlotRange(uint32_t d, uint32_t b, uint32_t p, uint64_t offset,
                                      uint64_t len, uint8_t* out) const {
  if (offset > header_->page_slot_bytes || len > header_->page_slot_bytes - offset) {
    return Status::InvalidArgument("card image read past the page slot");
  }
  std::memcpy(out, map_ + SlotOffset(d, b, p) + offset, len);
  return Status::Ok();
}

void ControllerImage::EraseBlockPages(uint32_t d, uint32_t b) {
  std::memset(page_table_ + PageIndex(d, b, 0), 0, geometry_.pages_per_block);
  std::atomic<uint32_t>& a = allocated_[uint64_t{d} * geometry_.blocks_per_lun + b];
  const uint32_t v = a.load(std::memory_order_acquire);
  if ((v & (kKeptBit | kReleasingBit)) != 0) return;  // already erased: kept, or being punched
  if (v != 0 && !pwrite_slots_ && kept_.load(std::memory_order_relaxed) < kept_limit_) {
    kept_.fetch_add(1, std::memory_order_relaxed);
    a.store(v | kKeptBit, std::memory_order_release);
    return;
  }
  a.store(0, std::memory_order_release);
  const uint64_t start = SlotOffset(d, b, 0);
  const uint64_t len = uint64_t{geometry_.pages_per_block} * header_->page_slot_bytes;
  // Best effort: a filesystem without hole punching keeps the old bytes, which is fine
  // because erased pages are served from the page state, never from the slot. (The whole
  // block: slots allocated before the image was opened are not in the count.)
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(start),
                    static_cast<off_t>(len));
}

void ControllerImage::SealLifetime() {
  lifetime_->crc = 0;
  lifetime_->crc = Crc32c(lifetime_, sizeof(*lifetime_));
}

Status ControllerImage::SyncState() {
  state_->crc = StateCrc(*state_);
  if (::msync(map_, format::kTablesOffset, MS_SYNC) != 0) {
    return Status::FromErrno(errno, "msync card state");
  }
  return Status::Ok();
}

Status ControllerImage::Sync() {
  state_->crc = StateCrc(*state_);
  if (::msync(map_, meta_bytes_, MS_SYNC) != 0) return Status::FromErrno(errno, "msync card image");
  return Status::Ok();
}

uint64_t ControllerImage::AllocatedBytes() const {
  struct stat sb {};
  if (::fstat(fd_, &sb) != 0) return 0;
  return static_cast<uint64_t>(sb.st_blocks) * 512;
}

model::DieCounters CountDies(ControllerImage& img, const std::vector<uint32_t>& dies) {
  const auto& g = img.geometry();
  model::DieCounters n;
  for (const uint32_t d : dies) {
    if (img.die(d).flags & format::kDieFailed) ++n.failed_dies;
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      const auto& rec = img.block(d, b);
      ++n.blocks;
      if (rec.flags & format::kBlockFactoryBad) {
        ++n.factory_bad_blocks;
        continue;
      }
      if (rec.flags & format::kBlockGrownBad) ++n.grown_bad_blocks;
      n.min_erase_count = std::min(n.min_erase_count, rec.erase_count);
      n.max_erase_count = std::max(n.max_erase_count, rec.erase_count);
      n.pe_sum += rec.erase_count;
      for (uint32_t p = 0; p < rec.next_page && p < g.pages_per_block; ++p) {
        const auto s = img.page_state(d, b, p);
        if (s == format::PageState::kProgrammed) ++n.programmed_pages;
        else if (s != format::PageState::kErased) ++n.torn_pages;
      }
    }
  }
  return n;
}

model::ControllerHealth ImageHealth(ControllerImage& img, const std::vector<model::DieCounters>& per_pipe,
                                    uint32_t endurance_cycles) {
  model::ControllerHealth h;
  h.serial = img.identity().serial;
  h.model = img.identity().model;
  h.profile = img.identity().profile;
  h.dies = img.geometry().dies_per_controller();
  h.min_erase_count = UINT32_MAX;
  uint64_t pe_sum = 0;
  for (const model::DieCounters& n : per_pipe) {
    h.failed_dies += n.failed_dies;
    h.blocks += n.blocks;
    h.factory_bad_blocks += n.factory_bad_blocks;
    h.grown_bad_blocks += n.grown_bad_blocks;
    h.min_erase_count = std::min(h.min_erase_count, n.min_erase_count);
    h.max_erase_count = std::max(h.max_erase_count, n.max_erase_count);
    pe_sum += n.pe_sum;
    h.programmed_pages += n.programmed_pages;
    h.torn_pages += n.torn_pages;
  }
  const uint64_t good = h.blocks - h.factory_bad_blocks;
  if (good == 0) h.min_erase_count = 0;
  h.mean_erase_count = good ? static_cast<double>(pe_sum) / static_cast<double>(good) : 0;
  h.rated_pe_used_percent = 100.0 * h.mean_erase_count / endurance_cycles;
  h.power_on_count = img.state().power_on_count;
  h.unsafe_power_offs = img.state().unsafe_power_offs;
  h.plp = static_cast<nand::PlpState>(img.state().plp_state);
  h.image_bytes = img.header().file_bytes;
  h.image_allocated_bytes = img.AllocatedBytes();
  return h;
}

}  // namespace vsl::simcard
