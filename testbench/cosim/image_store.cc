// ImageStore (image_store.h).
#include "testbench/cosim/image_store.h"

#include <algorithm>
#include <cstring>

#include "vsl/core/log.h"
#include "vsl/simcard/ecc.h"

namespace vsl::tb {
namespace {
// A bad block (factory or grown) fails every program and erase, as on the simulated card.
constexpr uint8_t kBad = simcard::format::kBlockFactoryBad | simcard::format::kBlockGrownBad;
}  // namespace

ImageStore::ImageStore(simcard::ControllerImage& image, const simcard::Reliability& rel, uint32_t first_die,
                       uint64_t seed)
    : image_(image), rel_(rel), first_die_(first_die), rng_(seed) {}

void ImageStore::ReadPage(uint32_t lun, uint32_t block, uint32_t page, uint8_t* out) {
  const auto& g = image_.geometry();
  const uint32_t d = first_die_ + lun;
  const uint32_t slot = g.page_data_bytes + g.page_spare_bytes;
  auto& rec = image_.block(d, block);
  const auto state = image_.page_state(d, block, page);
  if (state == simcard::format::PageState::kErased) {
    std::memset(out, 0xFF, slot);
  } else {
    if (Status s = image_.ReadSlot(d, block, page, out); !s.ok()) {
      Logger("cosim")->error("card image read failed: {}", s.ToString());
      std::memset(out, 0, slot);
    }
    if (state == simcard::format::PageState::kProgrammed) {
      if (!(rec.flags & simcard::format::kBlockParity)) simcard::EncodeSlot(g, out);
    } else {  // torn: half the page never made it
      for (uint32_t i = slot / 2; i < slot; ++i) out[i] ^= 0x5A;
    }
  }
  ++rec.reads_since_erase;
  ++stats_.pages_sensed;
  const uint64_t bits = uint64_t{slot} * 8;
  const uint64_t k = std::min<uint64_t>(rng_.Binomial(bits, rel_.Rber(rec.erase_count, rec.reads_since_erase)), bits);
  pos_.clear();
  while (pos_.size() < k) {
    const auto b = static_cast<uint32_t>(rng_.Below(bits));
    if (std::find(pos_.begin(), pos_.end(), b) != pos_.end()) continue;
    pos_.push_back(b);
    out[b / 8] ^= static_cast<uint8_t>(1u << (b % 8));
  }
  stats_.bits_flipped += k;
}

bool ImageStore::ProgramPage(uint32_t lun, uint32_t block, uint32_t page, const uint8_t* data) {
  const uint32_t d = first_die_ + lun;
  auto& rec = image_.block(d, block);
  if ((rec.flags & kBad) || page != rec.next_page ||
      image_.page_state(d, block, page) != simcard::format::PageState::kErased) {
    ++stats_.refused;
    return false;
  }
  rec.next_page = static_cast<uint16_t>(page + 1);
  if (rng_.Bernoulli(rel_.FailProbability(rec.erase_count))) {
    image_.set_page_state(d, block, page, simcard::format::PageState::kTornUncorrectable);
    rec.flags |= simcard::format::kBlockGrownBad;
    ++stats_.program_failures;
    return false;
  }
  if (Status s = image_.WriteSlot(d, block, page, data); !s.ok()) {
    Logger("cosim")->error("card image write failed: {}", s.ToString());
    return false;
  }
  image_.set_page_state(d, block, page, simcard::format::PageState::kProgrammed);
  simcard::NoteProgrammed(rec, page, true);
  return true;
}

bool ImageStore::EraseBlock(uint32_t lun, uint32_t block) {
  const uint32_t d = first_die_ + lun;
  auto& rec = image_.block(d, block);
  if (rec.flags & kBad) {
    ++stats_.refused;
    return false;
  }
  if (rng_.Bernoulli(rel_.FailProbability(rec.erase_count))) {
    rec.flags |= simcard::format::kBlockGrownBad;
    ++stats_.erase_failures;
    return false;
  }
  image_.EraseBlockPages(d, block);
  ++rec.erase_count;
  rec.reads_since_erase = 0;
  rec.next_page = 0;
  rec.flags = static_cast<uint8_t>(rec.flags & ~simcard::format::kBlockParity);
  return true;
}

void ImageStore::TearPage(uint32_t lun, uint32_t block, uint32_t page) {
  const uint32_t d = first_die_ + lun;
  if (image_.page_state(d, block, page) == simcard::format::PageState::kProgrammed) {
    image_.set_page_state(d, block, page, simcard::format::PageState::kTornUncorrectable);
  }
}

}  // namespace vsl::tb
