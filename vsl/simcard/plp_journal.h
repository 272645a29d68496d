// PlpJournal: the controller's power-loss-protected buffer, kept where a killed host
// process cannot take it.
//
// A real card holds accepted programs (and the erases queued ahead of them) in its own
// DRAM under capacitors: if the host crashes, the card still has power and finishes them.
// The simulated card lives in the host process, so without this a SIGKILL of that process
// (vsld) lost what the controller had accepted. The journal mirrors the buffer into a
// shared memory-mapped file per pipe (`plp-<pipe>.bin` in the card directory): a record is
// written when a program's data lands in the buffer (or an erase or staged parity image
// is queued) and released when the operation completes in any way (applied, aborted,
// timed out, superseded). The next open of the card, if its last owner did not close it,
// finishes every record still there in the order PowerCut would (docs/simcard.md), then
// clears the journal. A clean close and a simulated power cut leave it empty.
//
// Records are fixed-size slots; the journal holds the whole buffer, the stage slots and
// a bounded number of queued erases. If it is ever full, the operation is not journaled
// (counted in `overflows`): only a process kill at that moment could lose it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsl/core/status.h"

namespace vsl::simcard {

class PlpJournal {
 public:
  enum class Kind : uint8_t { kProgram = 1, kErase = 2, kStage = 3 };
  struct Record {
    Kind kind;
    uint64_t seq;       // queue order on the pipe (stages: when staged)
    uint32_t die, block, page;
    uint32_t erase_count_after;  // erases: the block's erase count once applied
    const uint8_t* data;         // programs and stages: page data + spare (slot bytes)
  };

  // Opens (creating it if needed) the journal at `path` with room for `records` records
  // of `slot_bytes` of data each.
  static Result<std::unique_ptr<PlpJournal>> Open(const std::string& path, uint32_t records,
                                                  uint32_t slot_bytes);
  ~PlpJournal();

  // Returns the record's index, or -1 when full. `data` may be null (erases).
  int Add(Kind kind, uint64_t seq, uint32_t die, uint32_t block, uint32_t page, uint32_t erase_count_after,
          const uint8_t* data);
  // Add in two steps, so the controller can build a page straight in its record (the
  // record *is* the protected buffer's copy, not a second one): Reserve returns a free
  // record's data area (slot_bytes) and its index in *index, or null (and -1) when full;
  // the record is not present until Commit. The data area stays valid until Remove.
  uint8_t* Reserve(int* index);
  void Commit(int index, Kind kind, uint64_t seq, uint32_t die, uint32_t block, uint32_t page,
              uint32_t erase_count_after);
  void Remove(int index);
  // The records present (after a kill: what the controller still had to do).
  std::vector<Record> Pending() const;
  void Clear();
  uint64_t overflows() const { return overflows_; }

 private:
  PlpJournal() = default;
 public:
  struct Head;  // on-file record head (plp_journal.cc)

 private:
  Head* head(uint32_t i) const;
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  uint32_t records_ = 0, slot_bytes_ = 0, stride_ = 0;
  std::vector<uint32_t> free_;
  // live_[i]: slot i's head says kLive (the file's state, mirrored so Clear touches only
  // live slots: touching every slot dirtied the whole mapping on each clean close).
  std::vector<bool> live_;
  uint64_t overflows_ = 0;
};

}  // namespace vsl::simcard
