// The groomer's relocation of its victims, as bookkeeping (docs/ftl.md, "Groomer and
// wear"): Start on the victim GroomPolicy chose; NextRead hands out the page positions
// still worth reading (a valid sector, or a trim page), a bounded number at a time;
// CarryTrims keeps the records of a trim page that must outlive the victim; AddRef and
// DropRef count, per victim, the pages holding relocated data that are not durable yet;
// Release says whether a victim may go (freed, or kept closed) or what it still waits for.
//
// Victims overlap: once the current victim has been read through (nothing left to hand
// out, no read in flight) and only waits for its relocated pages to become durable,
// Drain sets it aside and the next victim may Start while it drains (at most kMaxDraining
// of them). Between victims the groomer used to earn the host no pacing credits for as
// long as the last pages took to land (measured with the override: stalls of 4.5-6 ms),
// though the drained victim's room was already as good as free.
//
// groomer.cc drives it: it issues the reads, appends live sectors through the writer,
// writes the carried records and acts on Release's verdict. This class owns the
// relocation's state and touches a LEB only to read it (valid bits, trim page list,
// pins, valid count), so its contract is tested without flash
// (tests/ftl/relocation_test.cc).
//
// Invariants: at most one victim being read, at most kMaxDraining draining; reads() is
// the current victim's reads handed out and not ReadDone; a victim's refs never go below
// zero (DropRef on zero is a bug); once every position has been handed out and read back,
// NextRead hands out nothing more until the next Start; a draining victim is never read
// again (a copy that fails puts its sectors back in it, and it is then kept, not freed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/psa.h"

namespace vsl::ftl {

class Relocation {
 public:
  explicit Relocation(const PsaLayout& addr) : addr_(addr) {}

  static constexpr std::size_t kMaxDraining = 2;

  // Takes `v` as the victim: every position unread, no references, nothing held. Only
  // with no current victim.
  void Start(Leb* v);
  // `v` (the current victim or a draining one) is released (freed or kept).
  void End(Leb* v);
  // The current victim, read through (!Reading()), drains beside the next one. Only when
  // CanDrain().
  void Drain();
  bool CanDrain() const { return victim_ != nullptr && !Reading() && draining_.size() < kMaxDraining; }
  Leb* victim() const { return victim_; }
  const std::vector<Leb*>& draining() const { return draining_; }
  // A victim being read or draining: room is still on its way.
  bool busy() const { return victim_ != nullptr || !draining_.empty(); }
  // `v` is the current victim or a draining one.
  bool IsVictim(const Leb* v) const;

  struct Read {
    uint32_t die, page;
    bool is_trim;  // listed as a trim page: its records may need carrying
  };
  // The next position (in row-major order: row by row, die by die) holding a valid sector
  // or listed as a trim page, counted as a read in flight; nullopt when `max_reads` are
  // in flight or no position is left.
  std::optional<Read> NextRead(uint32_t max_reads);
  void ReadDone() { --reads_; }
  // A read of the victim outside NextRead's order (a page a copy could not move, read
  // again through host memory): counted like the others.
  void ExtraRead() { ++reads_; }
  uint32_t reads() const { return reads_; }
  uint32_t cursor() const { return cursor_; }
  // Positions are still to be handed out, or reads are in flight.
  bool Reading() const { return cursor_ < addr_.dies() * addr_.pages() || reads_ > 0; }

  // Pages holding `v`'s relocated data (or carried records) not yet durable.
  static void AddRef(Leb& v) { ++v.reloc_refs; }
  static void DropRef(Leb& v) { --v.reloc_refs; }
  uint32_t refs() const { return victim_ != nullptr ? victim_->reloc_refs : 0; }

  // Something could not be moved out of the current victim (no room for carried
  // records, a rewrite job that may still go back to it): it is kept, not freed.
  void Hold() { victim_->reloc_held = true; }

  // A trim page of the victim read back as `meta`/`data`: trusted only if it is a trim
  // page of `epoch` with `spp` entries whose header and data CRCs check (a listed page may
  // never have reached flash and read back erased). Its records newer than `oldest` are
  // kept to be written again; `seen` (if given) is told of every record and whether it
  // was kept. False if the page was not trusted.
  bool CarryTrims(const uint8_t* meta, const std::vector<uint8_t>& data, uint32_t spp, uint32_t epoch,
                  uint64_t oldest, const std::function<void(const format::TrimRecord&, bool)>& seen = nullptr);
  std::vector<format::TrimRecord>& carried() { return carry_; }

  // What the victim waits for before it may go, or what becomes of it.
  enum class Verdict {
    kReading,     // positions or reads left
    kRefs,        // relocated data not durable yet: push the groomer's open page out
    kPins,        // newer copies of its sectors not durable yet: push the open pages out
    kKeep,        // release it closed (something stayed; it is skipped until room frees)
    kFree,        // everything moved: erase and free it
  };
  // For the current victim or a draining one `v`, called once carried records are
  // written. `job_pins`: pins on the victim held by rewrite jobs waiting for room;
  // waiting for those could deadlock (their room is this victim's), so they hold the
  // victim instead. With the device lost nothing more lands: pins are not waited for.
  Verdict Release(Leb& v, uint32_t job_pins, bool device_lost);

  // Page buffers (data, spare) for relocation reads, reused once read through.
  using Buffer = std::shared_ptr<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>;
  Buffer TakeBuffer(uint32_t data_bytes, uint32_t meta_bytes);
  void ReturnBuffer(Buffer b);

 private:
  static constexpr std::size_t kPoolMax = 64;
  const PsaLayout addr_;
  Leb* victim_ = nullptr;
  uint32_t cursor_ = 0;  // next position (row * dies + die) to look at
  uint32_t reads_ = 0;
  std::vector<Leb*> draining_;
  std::vector<format::TrimRecord> carry_;
  std::vector<Buffer> pool_;
};

}  // namespace vsl::ftl
