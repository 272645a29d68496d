// JoinedPipe: the two pipes of a controller in single-pipe mode, presented to one FTL as
// one pipe with the dies of both (pipe A's dies first, then pipe B's).
//
// Both pipes must run on the same clock (the LUN's engine). The contract of FlashPipe
// holds for the joined pipe as a whole:
// - Commands to one die run in submission order: each goes to its own pipe at once,
//   unless an earlier fenced program of the same pipe is still held (below), in which
//   case it queues behind it, so no die sees its commands out of order.
// - A fenced program enters the write buffer only after every program submitted before
//   it on *either* pipe has been accepted (or has ended): it is held here until the
//   other pipe has accepted everything older, then passed on fenced to its own pipe
//   (which orders it behind that pipe's own older programs).
// - Stage slots are the slots both pipes have (the smaller count); an image goes to the
//   slot of the pipe of its die. Using slot s on one pipe empties slot s on the other, so
//   a slot holds one image, as on a single pipe.
// - PLP state is pipe A's (both pipes of a controller share its protected buffer).
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "vsl/nand/flash.h"

namespace vsl::card {

class JoinedPipe final : public nand::FlashPipe {
 public:
  // `a` and `b` are the controller's two pipes, same shape, on the same clock.
  JoinedPipe(nand::FlashPipe& a, nand::FlashPipe& b);
  ~JoinedPipe() override = default;

  const nand::PipeTopology& topology() const override { return topology_; }
  nand::PlpState plp_state() const override { return pipes_[0]->plp_state(); }
  void Read(const nand::ReadRequest& req, nand::FlashCallback done) override;
  void Program(const nand::ProgramRequest& req, nand::FlashCallback accepted,
               nand::FlashCallback done) override;
  void Erase(uint32_t die, uint32_t block, nand::FlashCallback done) override;
  void Reset(uint32_t die, nand::FlashCallback done) override;
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
              nand::FlashCallback done) override;
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len,
                         nand::FlashCallback done) override;
  uint32_t stage_slots() const override { return slots_; }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, nand::FlashCallback accepted,
             nand::FlashCallback done) override;
  void ClearStage(uint32_t slot) override;

  // Commands held behind a fenced program (for tests and status).
  std::size_t held() const { return held_[0].size() + held_[1].size(); }

 private:
  // A command waiting to be passed to its pipe.
  struct Held {
    uint64_t serial = 0;  // submission order over both pipes
    bool fenced = false;
    Function<void()> issue;  // passes the command on (its request copied in)
  };
  uint32_t PipeOf(uint32_t die) const { return die < dies_a_ ? 0 : 1; }
  uint32_t LocalDie(uint32_t die) const { return die < dies_a_ ? die : die - dies_a_; }
  nand::Ppa Local(const nand::Ppa& p) const { return {LocalDie(p.die), p.block, p.page}; }
  bool Valid(uint32_t die) const { return die < 2 * dies_a_; }
  // True while programs of pipe `p` submitted before `serial` are not all accepted.
  bool OlderUnaccepted(uint32_t p, uint64_t serial) const;
  // Queues `issue` for pipe `p` (or issues it now if nothing is held there).
  void Submit(uint32_t p, bool fenced, Function<void()> issue);
  // Issues held commands whose turn has come.
  void Release();
  void Reject(nand::FlashCallback done, nand::FlashStatus st);

  std::array<nand::FlashPipe*, 2> pipes_;
  nand::PipeTopology topology_;
  uint32_t dies_a_ = 0;
  uint32_t slots_ = 0;
  std::vector<int8_t> slot_pipe_;  // per stage slot: the pipe holding its image (-1: none)
  std::vector<uint64_t> slot_gen_;  // per stage slot: bumped by ClearStage
  uint64_t next_serial_ = 1;
  // Per pipe: serials of programs passed on and not yet accepted (nor ended), in order.
  std::array<std::deque<uint64_t>, 2> unaccepted_;
  std::array<std::deque<Held>, 2> held_;
  bool releasing_ = false;
};

}  // namespace vsl::card
