// The groomer's relocation of one victim, as bookkeeping (docs/ftl.md, "Groomer and
// wear"): Start on the victim GroomPolicy chose; NextRead hands out the page positions
// still worth reading (a valid sector, or a trim page), a bounded number at a time;
// CarryTrims keeps the records of a trim page that must outlive the victim; AddRef and
// DropRef count the pages holding relocated data that are not durable yet; Release says
// whether the victim may go (freed, or kept closed) or what it still waits for.
//
// groomer.cc drives it: it issues the reads, appends live sectors through the writer,
// writes the carried records and acts on Release's verdict. This class owns the
// relocation's state and touches a LEB only to read it (valid bits, trim page list,
// pins, valid count), so its contract is tested without flash
// (tests/ftl/relocation_test.cc).
//
// Invariants: at most one victim at a time; reads() is the reads handed out and not
// ReadDone; refs() never goes below zero (DropRef on zero is a bug); once every position
// has been handed out and read back (Scanned), NextRead hands out nothing more until the
// next Start.
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

  // Takes `v` as the victim: every position unread, no references, nothing held.
  void Start(Leb* v);
  // The victim is released (freed or kept): no victim until the next Start.
  void End() { victim_ = nullptr; }
  Leb* victim() const { return victim_; }

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

  // Pages holding the victim's relocated data (or carried records) not yet durable.
  void AddRef() { ++refs_; }
  void DropRef() { --refs_; }
  uint32_t refs() const { return refs_; }

  // Something could not be moved out (no room for carried records, a rewrite job that
  // may still go back to it): the victim is kept, not freed.
  void Hold() { held_ = true; }
  bool held() const { return held_; }

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
  // Called once carried records are written. `job_pins`: pins on the victim held by
  // rewrite jobs waiting for room; waiting for those could deadlock (their room is this
  // victim's), so they hold the victim instead. With the device lost nothing more lands:
  // pins are not waited for.
  Verdict Release(uint32_t job_pins, bool device_lost);

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
  uint32_t refs_ = 0;
  bool held_ = false;
  std::vector<format::TrimRecord> carry_;
  std::vector<Buffer> pool_;
};

}  // namespace vsl::ftl
