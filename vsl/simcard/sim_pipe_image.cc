// The simulated pipe's effects on the image: programs, erases, torn operations at a power
// cut, and reads (statistical or bit-exact ECC).
#include <algorithm>
#include <cstring>

#include "hls/bch.h"
#include "vsl/core/log.h"
#include "vsl/nand/onfi.h"
#include "vsl/simcard/ecc.h"
#include "vsl/simcard/sim_pipe.h"

namespace vsl::simcard {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;
using format::PageState;

// ---- Effects on the image ----

FlashStatus SimPipe::ApplyProgram(Op* op) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  if (rec.flags & (format::kBlockFactoryBad | format::kBlockGrownBad)) {
    if (rec.flags & format::kBlockGrownBad && p.page >= rec.next_page) {
      image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
      rec.next_page = static_cast<uint16_t>(p.page + 1);
    }
    return FlashStatus::kProgramFail;
  }
  if (p.page < rec.next_page) {
    ++stats_.violation_not_erased;
    Logger("simcard")->warn("rule violation: program of non-erased page pipe={} die={} block={} page={}",
                            topology_.pipe, p.die, p.block, p.page);
    return FlashStatus::kRuleViolation;
  }
  if (p.page > rec.next_page) {
    ++stats_.violation_out_of_order;
    Logger("simcard")->warn("rule violation: out-of-order program pipe={} die={} block={} page={} expected={}",
                            topology_.pipe, p.die, p.block, p.page, rec.next_page);
    return FlashStatus::kRuleViolation;
  }
  ++stats_.programs;
  rec.next_page = static_cast<uint16_t>(p.page + 1);
  const bool injected = inject_program_fail_.erase(Key(p)) > 0;
  if (injected || die_rng_[p.die].Bernoulli(FailProbability(rec.erase_count))) {
    rec.flags |= format::kBlockGrownBad;
    image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
    return FlashStatus::kProgramFail;
  }
  if (Status s = image().WriteSlot(idie, p.block, p.page, op->held); !s.ok()) {
    Logger("simcard")->error("card image write failed: {}", s.ToString());
    image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
    return FlashStatus::kProgramFail;
  }
  image().set_page_state(idie, p.block, p.page, PageState::kProgrammed);
  NoteProgrammed(rec, p.page, op->parity);
  stats_.bytes_programmed += g_.page_data_bytes;
  LifeCounters::Add(life_.nand_program_bytes, g_.page_data_bytes);
  return FlashStatus::kOk;
}

FlashStatus SimPipe::ApplyErase(uint32_t die, uint32_t block) {
  const uint32_t idie = image_die(die);
  auto& rec = image().block(idie, block);
  if (rec.flags & (format::kBlockFactoryBad | format::kBlockGrownBad)) {
    return FlashStatus::kEraseFail;
  }
  ++stats_.erases;
  LifeCounters::Add(life_.erases, 1);
  ++rec.erase_count;
  const bool injected = inject_erase_fail_.erase(Key({die, block, 0})) > 0;
  if (injected || die_rng_[die].Bernoulli(FailProbability(rec.erase_count))) {
    rec.flags |= format::kBlockGrownBad;
    return FlashStatus::kEraseFail;
  }
  rec.reads_since_erase = 0;
  rec.next_page = 0;
  rec.flags &= static_cast<uint8_t>(~format::kBlockParity);
  image().EraseBlockPages(idie, block);
  return FlashStatus::kOk;
}

void SimPipe::ApplyTornProgram(const nand::Ppa& p) {
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  if (rec.flags & format::kBlockFactoryBad || p.page != rec.next_page) return;
  rec.next_page = static_cast<uint16_t>(p.page + 1);
  const bool garbage = die_rng_[p.die].Bernoulli(rel_.torn_reads_as_garbage);
  image().set_page_state(idie, p.block, p.page,
                         garbage ? PageState::kTornGarbage : PageState::kTornUncorrectable);
}

void SimPipe::InjectUncorrectable(const nand::Ppa& p) {
  if (!ValidPpa(p)) return;
  inject_uncorrectable_[Key(p)] = image().block(image_die(p.die), p.block).erase_count;
}

void SimPipe::ApplyTornErase(uint32_t die, uint32_t block) {
  const uint32_t idie = image_die(die);
  auto& rec = image().block(idie, block);
  if (rec.flags & format::kBlockFactoryBad) return;
  ++rec.erase_count;
  rec.reads_since_erase = 0;
  // Half-erased cells: every page reads uncorrectable until the block is erased again.
  for (uint32_t pg = 0; pg < g_.pages_per_block; ++pg) {
    image().set_page_state(idie, block, pg, PageState::kTornUncorrectable);
  }
  rec.next_page = static_cast<uint16_t>(g_.pages_per_block);
}

FlashStatus SimPipe::DoRead(Op* op, uint32_t* corrected) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  const uint32_t cw = g_.ecc_codeword_bytes;
  const uint32_t meta_bytes = g_.meta_bytes_per_page();
  const uint64_t data_off = uint64_t{op->first_sector} * cw;
  const uint64_t data_len = uint64_t{op->sector_count} * cw;
  Rng& rng = die_rng_[p.die];
  const PageState state = image().page_state(idie, p.block, p.page);
  ++rec.reads_since_erase;
  switch (state) {
    case PageState::kErased:
      if (card_.opts_.ecc == EccMode::kBitExact) return ReadBitExact(op, state, rec, corrected);
      if (op->data) std::memset(op->data, 0xFF, data_len);
      if (op->meta) std::memset(op->meta, 0xFF, meta_bytes);
      return FlashStatus::kOk;
    case PageState::kTornUncorrectable:
    case PageState::kTornGarbage:
      if (op->data) rng.Fill(op->data, data_len);
      if (op->meta) rng.Fill(op->meta, meta_bytes);
      return state == PageState::kTornGarbage ? FlashStatus::kOk : FlashStatus::kUncorrectable;
    case PageState::kProgrammed:
      break;
    default:
      // A page-state byte this build does not know: damaged metadata, never trusted.
      if (op->data) rng.Fill(op->data, data_len);
      if (op->meta) rng.Fill(op->meta, meta_bytes);
      return FlashStatus::kUncorrectable;
  }
  if (!inject_uncorrectable_.empty() && op->first_sector < g_.codewords_per_page() - 1) {
    auto it = inject_uncorrectable_.find(Key(p));
    if (it != inject_uncorrectable_.end() && it->second == rec.erase_count) {
      if (op->data) rng.Fill(op->data, data_len);
      if (op->meta) rng.Fill(op->meta, meta_bytes);
      return FlashStatus::kUncorrectable;
    }
  }
  if (card_.opts_.ecc == EccMode::kBitExact) return ReadBitExact(op, state, rec, corrected);
  Status s = Status::Ok();
  if (op->data) s = image().ReadSlotRange(idie, p.block, p.page, data_off, data_len, op->data);
  if (s.ok() && op->meta) {
    s = image().ReadSlotRange(idie, p.block, p.page, g_.page_data_bytes, meta_bytes, op->meta);
  }
  if (!s.ok()) {
    Logger("simcard")->error("card image read failed: {}", s.ToString());
    return FlashStatus::kUncorrectable;
  }
  // Statistical ECC: each codeword read sees Binomial(bits, rber) raw bit errors; up to t
  // are corrected (and counted), more make the read uncorrectable and the codeword comes
  // back with those bits flipped. The last codeword also carries the host metadata.
  const double rber = Rber(rec.erase_count, rec.reads_since_erase);
  const uint32_t last = g_.codewords_per_page() - 1;
  const bool need_last = op->meta != nullptr && op->first_sector + op->sector_count <= last;
  FlashStatus st = FlashStatus::kOk;
  BinomialDist errors;  // for the codeword size at hand (the last one also holds the metadata)
  for (uint32_t i = 0; i < op->sector_count + (need_last ? 1 : 0); ++i) {
    const uint32_t cwi = i < op->sector_count ? op->first_sector + i : last;
    const uint32_t extra = cwi == last ? meta_bytes : 0;
    const uint64_t bits = uint64_t{cw + g_.ecc_parity_bytes + extra} * 8;
    if (errors.n() != bits) errors = BinomialDist(bits, rber);
    const uint64_t k = errors(rng);
    if (k <= g_.ecc_t) {
      *corrected += static_cast<uint32_t>(k);
      continue;
    }
    st = FlashStatus::kUncorrectable;
    for (uint64_t e = 0; e < k; ++e) {
      const uint64_t bit = rng.Below(uint64_t{cw + extra} * 8);
      const uint64_t byte = bit / 8;
      if (byte < cw) {
        if (i < op->sector_count && op->data) op->data[uint64_t{i} * cw + byte] ^= uint8_t(1u << (bit % 8));
      } else if (op->meta) {
        op->meta[byte - cw] ^= uint8_t(1u << (bit % 8));
      }
    }
  }
  return st;
}

FlashStatus SimPipe::ReadBitExact(Op* op, PageState state, const format::BlockRecord& rec, uint32_t* corrected) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  const uint32_t cw = g_.ecc_codeword_bytes;
  const uint32_t slot_bytes = g_.page_data_bytes + g_.page_spare_bytes;
  if (raw_.size() != slot_bytes) raw_.resize(slot_bytes);
  uint8_t* raw = raw_.data();
  // The page as the array holds it: erased cells read as ones; a programmed page as
  // written, with its parity (computed now from the data if the block was programmed
  // in statistical mode: what the controller would have stored).
  if (state == PageState::kErased) {
    std::memset(raw, 0xFF, slot_bytes);
  } else {
    if (Status s = image().ReadSlot(idie, p.block, p.page, raw); !s.ok()) {
      Logger("simcard")->error("card image read failed: {}", s.ToString());
      return FlashStatus::kUncorrectable;
    }
    if (!(rec.flags & format::kBlockParity)) EncodeSlot(g_, raw);
  }
  // Each codeword sensed sees Binomial(bits, rber) raw errors at distinct positions of its
  // message and parity; the decoder then corrects, flags or (rarely) miscorrects.
  const double rber = Rber(rec.erase_count, rec.reads_since_erase);
  const uint32_t last = g_.codewords_per_page() - 1;
  const bool need_last = op->meta != nullptr && op->first_sector + op->sector_count <= last;
  Rng& rng = die_rng_[p.die];
  FlashStatus st = FlashStatus::kOk;
  bool miscorrected = false;
  BinomialDist errors;  // for the codeword size at hand
  std::vector<uint32_t> pos;
  std::vector<uint8_t> truth;
  for (uint32_t i = 0; i < op->sector_count + (need_last ? 1 : 0); ++i) {
    const uint32_t cwi = i < op->sector_count ? op->first_sector + i : last;
    const CodewordSpan span = Codeword(g_, cwi);
    uint8_t* msg = raw + span.msg_offset;
    uint8_t* parity = raw + span.parity_offset;
    const uint32_t msg_bits = 8 * span.msg_bytes;
    const uint32_t bits = msg_bits + 8 * g_.ecc_parity_bytes;
    if (errors.n() != bits) errors = BinomialDist(bits, rber);
    const uint64_t k = std::min<uint64_t>(errors(rng), bits);
    if (k > g_.ecc_t) {  // beyond the code: keep the truth to recognise a miscorrection
      truth.assign(msg, msg + span.msg_bytes);
      truth.insert(truth.end(), parity, parity + g_.ecc_parity_bytes);
    }
    pos.clear();
    while (pos.size() < k) {
      const auto b = static_cast<uint32_t>(rng.Below(bits));
      if (std::find(pos.begin(), pos.end(), b) != pos.end()) continue;
      pos.push_back(b);
      uint8_t* byte = b < msg_bits ? msg + b / 8 : parity + (b - msg_bits) / 8;
      *byte ^= static_cast<uint8_t>(0x80u >> (b % 8));
    }
    const vslhls::BchResult r =
        vslhls::BchDecode(static_cast<int>(g_.ecc_t), msg, static_cast<int>(span.msg_bytes), parity);
    ++stats_.ecc_codewords_decoded;
    if (r.status == vslhls::BchStatus::kUncorrectable) {
      st = FlashStatus::kUncorrectable;
      continue;
    }
    *corrected += r.bits;
    if (k > g_.ecc_t && (std::memcmp(truth.data(), msg, span.msg_bytes) != 0 ||
                         std::memcmp(truth.data() + span.msg_bytes, parity, g_.ecc_parity_bytes) != 0)) {
      miscorrected = true;
    }
  }
  if (miscorrected) {
    ++stats_.miscorrected_reads;
    Logger("simcard")->warn("ECC miscorrection (model ground truth): pipe={} die={} block={} page={} passed with wrong data",
                            topology_.pipe, p.die, p.block, p.page);
  }
  if (op->data) std::memcpy(op->data, raw + uint64_t{op->first_sector} * cw, uint64_t{op->sector_count} * cw);
  if (op->meta) std::memcpy(op->meta, raw + g_.page_data_bytes, g_.meta_bytes_per_page());
  return st;
}

}  // namespace vsl::simcard
