// Logical erase blocks (LEBs): LEB i is block i on every die of the pipe, minus the dies
// where that block is bad (pblk calls this a line). Blocks 0 and 1 are the metadata LEBs.
//
// LebTable keeps LEBs on Boost.Intrusive lists: the free list, and the closed LEBs in
// buckets by valid-sector count, so a valid-count change is an O(1), allocation-free
// bucket move on the write path. Victim and free-LEB choices scan a list once per LEB.
// Not thread-safe: owned by the pipe's engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <boost/intrusive/list.hpp>

namespace vsl::ftl {

// FlashBack parity of the stripe row being written in an open LEB (format: ftl_format.h).
struct RowParity {
  static constexpr uint8_t kUndecided = 0xFF, kNone = 0xFE;
  uint32_t row = UINT32_MAX;  // the row being accumulated
  bool submitted = false;     // its parity page has been submitted
  uint64_t mask = 0;          // member dies so far
  // XOR of the members' data and leading metadata: kept only for a row without an
  // accumulator (`acc`), whose parity the host forms; stale otherwise.
  std::vector<uint8_t> data, meta;
  std::vector<uint8_t> pdie;  // per row: the die holding its parity (kUndecided, kNone)
  // The row's accumulator in the controller (nand::kNoAccumulator: the host sends its
  // parity), chosen when its first member is submitted.
  uint32_t acc = UINT32_MAX;
};

enum class LebState : uint8_t { kFree = 0, kOpen, kClosed, kVictim, kMeta };

struct Leb : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>> {
  uint32_t index = 0;
  LebState state = LebState::kFree;
  bool needs_erase = true;       // holds old data (or unknown contents): erase before use
  uint32_t erase_count = 0;
  uint64_t open_seq = 0;         // seq of its first page
  // seq when it filled (age for cost-benefit). Set before the LEB enters kClosed and not
  // changed while it is closed: LebTable keeps a lower bound of it per bucket.
  uint64_t close_seq = 0;
  // Oldest seq of data still physically on this LEB although it is free (blocks are
  // erased lazily, on reuse). Until its erases succeed, that stale data could reappear
  // in a scan, so trim records newer than it must be kept. 0: nothing stale.
  uint64_t stale_seq = 0;
  uint32_t valid = 0;            // valid sectors
  uint32_t capacity = 0;         // sectors it holds when full (<= the table's max_capacity)
  uint32_t inflight = 0;         // programs submitted and not done
  uint32_t pins = 0;  // pages not yet durable that superseded sectors here: no erase until 0
  // Atomic batches not yet committed with member pages here (also counted in `pins`):
  // never a victim meanwhile, since the batch's commit may need the room a victim would
  // only give back after the batch let go of it.
  uint32_t atomic_pins = 0;
  uint32_t bucket = 0;           // the valid-count bucket it is linked in (closed LEBs)
  // FlashBack: holds rows that could not survive another die failure (cut while open
  // without parity, or formed with a die that has since failed): its data is moved.
  bool unprotected = false;
  bool gc_skip = false;  // grooming could not empty it (unreadable sectors, no room to
                         // carry trim records): not a victim until some LEB frees up
  // While a groomer victim (Relocation): pages holding data relocated out of it (or its
  // carried trim records) not yet durable, and whether something must stay in it.
  uint32_t reloc_refs = 0;
  bool reloc_held = false;
  std::vector<uint8_t> good;     // per die: 1 if this LEB's block on that die is usable
  std::vector<uint64_t> valid_bits;  // per physical sector slot of the LEB
  std::vector<uint32_t> trim_pages;  // page slots (row * dies + die) holding trim records
  // While open (and until its summary is submitted): the summary being built, one
  // entry per page position (format::SummaryHeader). Empty otherwise.
  std::vector<uint64_t> summary;
  std::vector<uint32_t> summary_crc;  // with format::kFlagSummaryCrcs: per sector slot
  uint32_t summary_from = 0;  // first page position left for the summary when it closed
  bool summary_due = false;   // closed; write the summary once nothing is in flight
  // The summary this FTL wrote (not one a scan found): its page positions (row * dies +
  // die), and whether every one of them is on flash (summary_left programs still to
  // finish, none failed). The groomer copies such a LEB's pages from it unread.
  std::vector<uint32_t> summary_at;
  uint32_t summary_left = 0;
  bool summary_ok = false;
  std::unique_ptr<RowParity> par;  // while written, if FlashBack is on
  bool counted_unusable = false;  // LebTable bookkeeping
  uint32_t good_dies() const {
    uint32_t n = 0;
    for (uint8_t g : good) n += g;
    return n;
  }
};

enum class VictimPolicy : uint8_t { kGreedy, kCostBenefit };

class LebTable {
 public:
  using List = boost::intrusive::list<Leb, boost::intrusive::constant_time_size<true>>;

  LebTable(uint32_t lebs, uint32_t dies, uint32_t slots_per_leb, uint32_t max_capacity);
  ~LebTable();

  Leb& leb(uint32_t i) { return lebs_[i]; }
  const Leb& leb(uint32_t i) const { return lebs_[i]; }
  uint32_t size() const { return static_cast<uint32_t>(lebs_.size()); }
  // Free LEBs that can be formed (see set_min_good).
  uint32_t free_count() const { return static_cast<uint32_t>(free_.size()) - unusable_free_; }
  // FlashBack: a LEB with fewer good dies than this cannot carry parity and is not handed
  // out (its data could not survive a die failure). Call Recount after changing `good`
  // of free LEBs.
  void set_min_good(uint32_t m) {
    min_good_ = m;
    Recount();
  }
  void Recount();
  uint32_t closed_count() const { return closed_count_; }

  // Moves `l` to `s`, keeping the lists right.
  void SetState(Leb& l, LebState s);
  // Call after changing l.valid of a closed LEB.
  void OnValidChanged(Leb& l);
  // The free LEB with the lowest erase count (wear levelling), or null.
  Leb* PickFree();
  // The closed LEB to groom next, or null. `now_seq` ages LEBs for cost-benefit.
  // `ok` (if given) rules candidates out (e.g. a victim that would free nothing).
  Leb* PickVictim(VictimPolicy policy, uint64_t now_seq, const std::function<bool(const Leb&)>& ok = nullptr);

 private:
  uint32_t BucketOf(uint32_t valid) const {
    return std::min<uint32_t>(valid / bucket_width_, static_cast<uint32_t>(buckets_.size()) - 1);
  }
  void Unlink(Leb& l);
  void Link(Leb& l);
  void Join(Leb& l, uint32_t bucket);
  void Leave(Leb& l);

  std::vector<Leb> lebs_;
  List free_;
  std::vector<List> buckets_;  // closed LEBs by valid count
  // Per bucket: at most the least close_seq of its LEBs (lowered as LEBs join, reset when
  // it empties), so a cost-benefit scan can bound a whole bucket's best score.
  std::vector<uint64_t> bucket_min_close_;
  uint32_t max_capacity_;
  uint32_t bucket_width_;
  uint32_t closed_count_ = 0;
  uint32_t min_good_ = 0;
  uint32_t unusable_free_ = 0;  // free LEBs below min_good_ (each has counted_unusable)
};

}  // namespace vsl::ftl
