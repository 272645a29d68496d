// The raw-flash contract: the one seam between the card's controllers and the host VSL.
//
// A FlashPipe is one pipe of one controller: its own command and completion path and its
// own dies. Commands are asynchronous; each completes exactly once through its callback
// with a Completion. Callbacks run on the backend's engine (the thread that owns the
// card); a caller on another engine hops back with Engine::Submit. All FlashPipe calls
// must be made on the backend's engine.
//
// Ordering: commands to one die execute in submission order. Commands to different dies
// run in parallel, sharing the channel bus (one per channel) and the controller's host
// link. Reset is out of band: it aborts what is queued or running on its die.
//
// Buffers: a read's data/meta buffers must stay valid until `done`; a program's buffers
// must stay valid until `accepted` (or, when the program is rejected before reaching the
// controller, until `done`). The controller copies program data into its write buffer.
//
// Programs complete twice. `accepted` fires when the data is in the controller's protected
// write buffer: from then on, while power-loss protection (PLP) is healthy, the page will
// reach flash even across a power cut, so a host write may be acknowledged. `done` fires
// when the page is on flash (ok) or has failed. `accepted` fires at most once and always
// before `done`; a program rejected up front (bad address, powered off) gets only `done`.
// With PLP failed or absent, `accepted` only means "in a volatile buffer".
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vsl/core/function.h"
#include "vsl/core/time.h"
#include "vsl/nand/geometry.h"

namespace vsl::nand {

enum class FlashStatus : uint8_t {
  kOk = 0,          // done; for reads, corrected_bits tells how hard ECC worked
  kUncorrectable,   // read: a codeword had more bit errors than ECC corrects
  kProgramFail,     // program: status FAIL; the page (and block) must not be trusted
  kEraseFail,       // erase: status FAIL; the block is bad
  kDieTimeout,      // the die did not answer (a dead die)
  kAborted,         // aborted by reset or power loss before it finished
  kInvalidAddress,  // die/block/page/sector range outside the geometry: a host bug
  kRuleViolation,   // NAND rule broken (program of a non-erased page, out of page order):
                    // a host bug; counted by the backend
  kFenced,          // refused: another host (or a newer claim) owns the pipe now; the
                    // command did nothing (FlashPipe::Claim, "Ownership")
};
std::string_view FlashStatusName(FlashStatus s);

struct Completion {
  FlashStatus status = FlashStatus::kOk;
  uint32_t corrected_bits = 0;  // reads: bits ECC corrected over the codewords read
  TimeNs submit_ns = 0;
  TimeNs complete_ns = 0;
  bool ok() const { return status == FlashStatus::kOk; }
};
using FlashCallback = Function<void(const Completion&)>;

// Read page `ppa`: `sector_count` ECC codewords from `first_sector` (0 = the whole page)
// into `data` (sector_count * codeword bytes), and the page's host metadata into `meta`
// (meta_bytes_per_page, may be null). With `data` null the codewords are read off the
// die and checked but not sent to the host: a metadata-only read names the last
// codeword, which carries the metadata (the scan's, and the groomer's look at a victim
// page it will copy). An erased page reads as all 0xFF.
struct ReadRequest {
  Ppa ppa;
  uint32_t first_sector = 0;
  uint32_t sector_count = 0;
  uint8_t* data = nullptr;
  uint8_t* meta = nullptr;
};

// Program page `ppa` with a whole page of `data` and `meta` (meta_bytes_per_page; null
// programs 0xFF). Pages of a block must be programmed in order, each once per erase.
// `fence`: the page enters the write buffer only after every program submitted before it
// on this pipe has (on any die), so once it is accepted they are all in the buffer too
// (a parity page vouches for members that will reach flash with it). Stage images are
// always fenced.
// Accumulators (FlashPipe::copy_accumulators): page-sized XOR registers in the controller
// with which a stripe row's parity is formed there, so neither the parity page nor the
// row's running parity (a stage image) crosses the host link, and members copied inside
// the controller (Copy) are covered too. `acc` names one; `acc_op` says what this
// program does with it:
//   kAdd   the page programmed is `data`, which is also XORed into the accumulator;
//   kTake  the page programmed is `data` XOR the accumulator (`data` may be null: zeros,
//          and only the metadata crosses the link), and the accumulator is zeroed;
//   kPeek  as kTake, but the accumulator is kept (a partial parity page).
// A Stage with `acc` peeks. Accumulator operations take effect in submission order: a
// take or peek is fenced (it lands after every earlier program, copy included), and an
// add lands only after every earlier take or peek of its accumulator.
static constexpr uint32_t kNoAccumulator = UINT32_MAX;
enum class AccOp : uint8_t { kAdd = 0, kTake, kPeek };
// An accumulator also XORs the metadata its adds program (what lands: a copy's `meta`,
// or its `fail_meta` if a source failed), so the parity page's record of its members'
// metadata matches what they hold even when the host cannot know it (a copy that fails
// after the parity was sent). A take or peek with `acc_meta_len` > 0 XORs the first
// `acc_meta_len` bytes of that into its own metadata at `acc_meta_at`, then stores the
// CRC-32C of its metadata's first `acc_crc_at` bytes at `acc_crc_at` (little-endian).
struct ProgramRequest {
  Ppa ppa;
  const uint8_t* data = nullptr;
  const uint8_t* meta = nullptr;
  bool fence = false;
  uint32_t acc = kNoAccumulator;
  AccOp acc_op = AccOp::kAdd;
  uint16_t acc_meta_at = 0, acc_meta_len = 0, acc_crc_at = 0;
};

// Copy page `src` to page `dst` inside the controller (controller-side relocation): the
// source is read and its codewords decoded and corrected there, then programmed to `dst`
// (any die of the pipe) with `meta` as its host metadata (meta_bytes_per_page; null
// programs 0xFF), ECC encoded afresh. The data never crosses the host link. If the
// source cannot be read, `dst` is programmed all the same (a die's pages go in order and
// later ones may be queued behind it) with a zeroed data area and `fail_meta` (null:
// 0xFF): the host seals that as a page holding nothing. `acc` (optional) is an
// accumulator the copied data is added to (kAdd) once it is read.
//
// Gather: with `segment_count` > 0 the destination's data area is assembled inside the
// controller from `segments` in order (each `cw_count` codewords of page `src` from
// codeword `first_cw`; `CopyRequest::src` is then unused), and whatever they leave of
// the page is zeroed. Every segment is read and corrected there; if any cannot be read
// the copy fails as one whose source is unreadable. This is how the groomer packs the
// live sectors of several victim pages into one page without moving them over the link.
struct CopySegment {
  Ppa src;
  uint32_t first_cw = 0;
  uint32_t cw_count = 0;
};
static constexpr uint32_t kMaxCopySegments = 16;
struct CopyRequest {
  Ppa src;
  Ppa dst;
  const uint8_t* meta = nullptr;
  const uint8_t* fail_meta = nullptr;
  uint32_t acc = kNoAccumulator;
  uint32_t segment_count = 0;  // 0: the whole page `src`
  CopySegment segments[kMaxCopySegments] = {};
};

enum class PlpState : uint8_t { kHealthy = 0, kFailed, kAbsent };
std::string_view PlpStateName(PlpState s);

// What the controller's registers say about a pipe (the page format comes from the dies'
// parameter pages, see DiscoverPipe).
struct PipeTopology {
  uint32_t controller = 0;
  uint32_t pipe = 0;  // within the controller
  uint32_t controllers = 1;
  uint32_t pipes_per_controller = 1;
  uint32_t channels = 1;
  uint32_t luns_per_channel = 1;
  uint32_t ecc_codeword_bytes = 512;
  uint32_t ecc_parity_bytes = 13;
  uint32_t ecc_t = 8;
  uint32_t dies() const { return channels * luns_per_channel; }
};

// Ownership of a pipe shared by several hosts (a dual-ported card; docs/raw-flash-
// contract.md, "Ownership"). The controller keeps one owner per pipe: a host id, a
// generation bumped by every successful claim, and a lease.
struct PipeOwner {
  uint32_t host = 0;        // 0: nobody (never claimed, or released)
  uint32_t generation = 0;  // 0: never claimed; commands are then not checked
  TimeNs lease_until = 0;   // on the controller's clock; the owner renews before it
};
struct ClaimReply {
  bool granted = false;
  PipeOwner owner;  // after the claim: the new owner, or the holder that refused it
};

class FlashPipe {
 public:
  virtual ~FlashPipe() = default;
  virtual const PipeTopology& topology() const = 0;
  virtual PlpState plp_state() const = 0;

  virtual void Read(const ReadRequest& req, FlashCallback done) = 0;
  virtual void Program(const ProgramRequest& req, FlashCallback accepted, FlashCallback done) = 0;
  virtual void Erase(uint32_t die, uint32_t block, FlashCallback done) = 0;
  // Aborts everything queued or running on `die` (each gets kAborted), then resets it.
  virtual void Reset(uint32_t die, FlashCallback done) = 0;
  // READ ID at `address` (00h: JEDEC bytes, 20h: "ONFI"): `len` bytes into `out`.
  virtual void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
                      FlashCallback done) = 0;
  // READ PARAMETER PAGE: `len` bytes (copies of 256 bytes back to back) into `out`.
  virtual void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len,
                                 FlashCallback done) = 0;

  // Parity staging (FlashBack). The controller keeps stage_slots() page images in its
  // protected write buffer that are programmed only if power fails: the host parks the
  // running XOR of a part-written stripe row there, so the row is protected across a
  // power cut without spending a flash page on every partial parity.
  //
  // Stage puts an image for `req.ppa` into `slot`. It is admitted like a program (same
  // buffer and hold-up budget, behind the die's earlier programs); `accepted` fires when
  // it has landed and, while PLP is healthy, will reach flash at a power cut. A landed
  // image replaces the slot's previous one. The image leaves the slot when a Program of
  // the same address lands in the buffer (the real page supersedes it), when a newer
  // image lands in the slot, or on ClearStage; `done` then fires kOk. At a power cut the
  // PLP flush programs each landed image after the other accepted work of its die, and
  // `done` fires kAborted. A stage to a dead die ends kDieTimeout; a bad slot or address,
  // kInvalidAddress. Buffers as for Program. The default (a controller without slots)
  // completes at once with kInvalidAddress; callers check stage_slots() first.
  virtual uint32_t stage_slots() const { return 0; }
  virtual void Stage(uint32_t slot, const ProgramRequest& req, FlashCallback accepted,
                     FlashCallback done) {
    (void)slot;
    (void)req;
    (void)accepted;
    Completion c;
    c.status = FlashStatus::kInvalidAddress;
    done(c);
  }
  // Empties `slot`, images still landing included (their `done` fires kOk, `accepted`
  // never); nothing if it is empty.
  virtual void ClearStage(uint32_t slot) { (void)slot; }

  // Controller-side copy (CopyRequest). Offered when copy_accumulators() > 0; the default
  // (a controller without it) completes at once with kInvalidAddress, and the host moves
  // the page through its own memory instead.
  //
  // Ordering: the copy takes its place among `dst`'s die's commands when it is submitted
  // (a later program of that die runs after it: pages of a block stay in order). Its
  // source reads go ahead of their dies' queued programs and erases (the copy's program,
  // and the fenced parity behind it, wait for them); the host must have no erase of a
  // source block outstanding. Both metadata buffers are copied at once.
  // Completion: `accepted` fires once the source is read and corrected and the page is
  // in the controller's protected write buffer (as a program's `accepted`: a power cut
  // then still programs it); `done` fires when `dst` is on flash, with the source read's
  // corrected_bits. A source that cannot be read (kUncorrectable, kDieTimeout, kAborted
  // by a reset of its die) gets no `accepted`: `dst` is programmed with zeros and
  // `fail_meta`, nothing goes into the accumulator, and `done` reports the read's status
  // once that page is on flash (or the program's own failure). The host then moves the
  // page's data itself (FlashBack rebuilds it). A power cut aborts a copy not yet
  // accepted, like a program not yet in the buffer.
  //
  // Accumulators (ProgramRequest::acc): a copy with `acc` adds its data and metadata
  // when it lands in the buffer (a failed copy adds what it programs: zeros and
  // `fail_meta`), in submission order with the programs that take or peek. An
  // accumulator starts zeroed, is zeroed by a take, by ClearAccumulator and by a power
  // cut; a staged image that peeked holds its own copy.
  virtual uint32_t copy_accumulators() const { return 0; }
  // Zeroes accumulator `acc` now. For a host starting afresh (attach): adds still on
  // their way in would land after it, so the host calls it with none outstanding.
  virtual void ClearAccumulator(uint32_t acc) { (void)acc; }
  virtual void Copy(const CopyRequest& req, FlashCallback accepted, FlashCallback done) {
    (void)req;
    (void)accepted;
    Completion c;
    c.status = FlashStatus::kInvalidAddress;
    done(c);
  }

  // Ownership (PipeOwner). A FlashPipe is one host's port on the pipe; each command it
  // submits carries the generation of its last granted claim (0 before any), and once
  // the pipe has been claimed a command whose generation is not the owner's ends
  // kFenced: at submission, or, if it was waiting (queued for its die, or for write-
  // buffer room), at the moment a newer claim is granted. What the controller had
  // already accepted into its protected write buffer is programmed all the same (the
  // old owner may have acknowledged it), before any command of the new owner on that
  // die; a command already running on its die finishes. A granted claim also empties
  // the stage slots and zeroes the accumulators: they held the old owner's parity.
  //
  // Claim(host, force, lease) is granted when nobody holds the pipe, the holder's lease
  // has run out, `host` holds it already (a restarted host fences its old self), or with
  // `force`; refused otherwise, naming the holder. Renew extends this port's lease and
  // fails once the port is fenced; Release gives the pipe up (the generation stays, so
  // the port's stragglers stay fenced). The defaults (a controller without ownership,
  // one host) grant every claim with generation 0 and never fence.
  virtual bool offers_ownership() const { return false; }
  virtual ClaimReply Claim(uint32_t host, bool force, DurNs lease) {
    (void)force;
    (void)lease;
    ClaimReply r;
    r.granted = true;
    r.owner.host = host;
    r.owner.lease_until = kTimeNever;
    return r;
  }
  virtual bool Renew(DurNs lease) {
    (void)lease;
    return true;
  }
  virtual void Release() {}
  virtual PipeOwner owner() const { return PipeOwner{}; }
};

}  // namespace vsl::nand
