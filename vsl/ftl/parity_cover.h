// FlashBack's acknowledgement rule, as bookkeeping (docs/flashback.md): a member page of a
// parity row is durable only once a durable parity page includes it (the row's own parity
// page, a partial parity page written while the row waited, or the row's running parity
// parked in a stage slot of the controller's protected buffer). ParityCover keeps, by
// (leb, row), the members still waiting for that, the die the row's parity goes to, and
// the stage slot (if any) the row owns. flashback_parity.cc drives it (stages, parity
// pages, what a covered page does next); tested alone (tests/ftl/parity_cover_test.cc).
//
// `Page` is any type with a `uint32_t die`. Invariants: a page waits in at most one row;
// a slot is owned by at most one row, from TakeSlot until the row's final Cover; a row
// leaves the table only by a final Cover.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace vsl::ftl {

template <typename Page>
class ParityCover {
 public:
  struct Row {
    uint32_t pd = UINT32_MAX;     // the die the row's parity goes to
    std::vector<Page*> waiting;   // members not covered yet
    int slot = -1;                // the stage slot it owns, or -1
    uint64_t staged_mask = 0;     // members in the last image sent to the slot
  };

  explicit ParityCover(uint32_t stage_slots = 0) : slot_busy_(stage_slots, 0) {}
  uint32_t stage_slots() const { return static_cast<uint32_t>(slot_busy_.size()); }

  // `b`, a member of (leb, row) whose parity goes to die `pd`, waits for cover.
  void Wait(uint32_t leb, uint32_t row, uint32_t pd, Page* b) {
    auto it = rows_.find({leb, row});
    if (it == rows_.end()) {
      if (spare_.empty()) {
        it = rows_.emplace(std::make_pair(leb, row), Row{}).first;
      } else {
        auto node = std::move(spare_.back());
        spare_.pop_back();
        node.key() = {leb, row};
        Row& fresh = node.mapped();
        fresh.waiting.clear();
        fresh.slot = -1;
        fresh.staged_mask = 0;
        it = rows_.insert(std::move(node)).position;
      }
    }
    Row& r = it->second;
    r.pd = pd;
    r.waiting.push_back(b);
  }
  Row* Find(uint32_t leb, uint32_t row) {
    const auto it = rows_.find({leb, row});
    return it == rows_.end() ? nullptr : &it->second;
  }

  // The members covered by one call, for the caller to move on, and the slot the row
  // gave up (final), for the caller to clear. Held inline: a row has at most one member
  // per die and a pipe at most 64 dies (the masks are 64-bit); more would spill to the
  // heap rather than be lost.
  struct Covered {
    int freed_slot = -1;
    std::size_t size() const { return count + spill.size(); }
    bool empty() const { return size() == 0; }
    Page* at(std::size_t i) const { return i < count ? inline_[i] : spill[i - count]; }
    template <typename F>
    void ForEach(F&& f) const {
      for (std::size_t i = 0; i < size(); ++i) f(at(i));
    }
    void Add(Page* b) {
      if (count < inline_.size()) inline_[count++] = b;
      else spill.push_back(b);
    }

   private:
    std::array<Page*, 64> inline_;
    std::size_t count = 0;
    std::vector<Page*> spill;
  };
  // A durable parity for (leb, row) includes the members of dies in `mask`: they are
  // covered. `final` (the row's own parity page, or the row can have no other): every
  // member is, the row leaves, and its slot is free again.
  Covered Cover(uint32_t leb, uint32_t row, uint64_t mask, bool final) {
    Covered out;
    const auto it = rows_.find({leb, row});
    if (it == rows_.end()) return out;
    Row& r = it->second;
    for (std::size_t i = 0; i < r.waiting.size();) {
      if (final || ((mask >> r.waiting[i]->die) & 1)) {
        out.Add(r.waiting[i]);
        r.waiting[i] = r.waiting.back();
        r.waiting.pop_back();
      } else {
        ++i;
      }
    }
    if (final) {
      if (r.slot >= 0) {
        slot_busy_[static_cast<uint32_t>(r.slot)] = 0;
        out.freed_slot = r.slot;
      }
      // The node (and its waiting list's storage) is kept for the next row.
      if (spare_.size() < kSpareRows) spare_.push_back(rows_.extract(it));
      else rows_.erase(it);
    }
    return out;
  }
  // `b` no longer waits in (leb, row) (it failed, or was given up).
  void Remove(uint32_t leb, uint32_t row, Page* b) {
    Row* r = Find(leb, row);
    if (r == nullptr) return;
    auto& w = r->waiting;
    w.erase(std::remove(w.begin(), w.end(), b), w.end());
  }
  // A free stage slot for `r`, kept until the row's final Cover; false if none is free.
  // A row that owns one already keeps it.
  bool TakeSlot(Row& r) {
    for (uint32_t s = 0; s < slot_busy_.size() && r.slot < 0; ++s) {
      if (!slot_busy_[s]) {
        slot_busy_[s] = 1;
        r.slot = static_cast<int>(s);
      }
    }
    return r.slot >= 0;
  }
  // The rows waiting, by (leb, row) in order.
  const std::map<std::pair<uint32_t, uint32_t>, Row>& rows() const { return rows_; }

  // One StageRows run at a time: true if none was posted (the caller posts one).
  bool PostStage() {
    if (stage_posted_) return false;
    stage_posted_ = true;
    return true;
  }
  void StageRan() { stage_posted_ = false; }

 private:
  using Rows = std::map<std::pair<uint32_t, uint32_t>, Row>;
  static constexpr std::size_t kSpareRows = 64;
  Rows rows_;
  std::vector<typename Rows::node_type> spare_;  // nodes of rows that left, for reuse
  std::vector<uint8_t> slot_busy_;  // per stage slot: owned by a row until its final cover
  bool stage_posted_ = false;
};

}  // namespace vsl::ftl
