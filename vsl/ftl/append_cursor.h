// Where an append point writes next in its open LEB (docs/ftl.md, "Layout"): row by row,
// across the dies that hold data in each row (StripeLayout::DataPos: the LEB's good dies
// less the row's parity die), leaving the last summary_pages() data positions for the
// LEB's summary. append.cc opens and closes LEBs and submits a row's parity when the
// cursor says the row is done; the cursor owns only the position. Tested alone
// (tests/ftl/append_cursor_test.cc).
//
// Invariant: positions are handed out in program order (each die's pages in ascending
// rows), each at most once per opening of the LEB.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vsl/ftl/leb.h"
#include "vsl/ftl/stripe.h"

namespace vsl::ftl {

class AppendCursor {
 public:
  AppendCursor(uint32_t dies, uint32_t pages) : d_(dies), p_(pages) {}

  // Starts filling `l` from its first position.
  void Open(Leb* l) {
    leb_ = l;
    row_ = die_ = 0;
  }
  void Close() { leb_ = nullptr; }
  Leb* leb() const { return leb_; }
  uint32_t row() const { return row_; }  // the next position looked at
  uint32_t die() const { return die_; }

  enum class Step {
    kPosition,  // (*die, *row) is taken
    kRowDone,   // row *row has no data position left: its parity goes now; call again
    kFull,      // no position is left before the summary's: close the LEB
  };
  // The next step of filling leb() (which must be open).
  Step Next(const StripeLayout& stripe, uint32_t* die, uint32_t* row) {
    while (row_ < p_) {
      while (die_ < d_ && !stripe.DataPos(*leb_, row_, die_)) ++die_;
      if (die_ < d_) break;
      *row = row_;
      die_ = 0;
      ++row_;
      return Step::kRowDone;
    }
    // Every row has a data position (a row's parity takes one of two or more good dies),
    // so while more rows follow this one than the summary takes, no count is needed.
    const bool near_end = p_ - row_ - 1 <= stripe.summary_pages();
    if (row_ >= p_ || (near_end && stripe.RemainingPositions(*leb_, row_, die_) <= stripe.summary_pages())) {
      return Step::kFull;
    }
    *die = die_;
    *row = row_;
    ++die_;
    return Step::kPosition;
  }

  // Data positions left for data (the summary's excluded); 0 with no LEB open.
  uint32_t DataPositionsLeft(const StripeLayout& stripe) const {
    if (leb_ == nullptr || row_ >= p_) return 0;
    const uint32_t left = stripe.RemainingPositions(*leb_, row_, die_);
    return left > stripe.summary_pages() ? left - stripe.summary_pages() : 0;
  }
  // Where the summary's positions start when the LEB closes here (row * dies + die).
  uint32_t SummaryFrom() const { return std::min(row_, p_) * d_ + (row_ < p_ ? die_ : 0); }

 private:
  uint32_t d_, p_;
  Leb* leb_ = nullptr;
  uint32_t row_ = 0, die_ = 0;
};

}  // namespace vsl::ftl
