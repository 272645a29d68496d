// A card shared by several hosts (docs/ha.md): the dual-ported card.
//
// On the reference hardware two servers reach one card through its two PCIe ports, and
// the card's controllers keep running whatever happens to either server. Here the card
// is a process of its own, `vslflash serve DIR` (CardServer): it opens the simulated card
// and offers every host a port on every pipe over the Unix socket DIR/card.sock (the
// port protocol, shared_wire.h). A host opens the card as "shared:DIR" (MakeSharedBackend)
// and runs its LUNs on it exactly as on a card of its own; which host may write which
// pipe is the controller's business: ownership with generations and leases
// (nand::FlashPipe::Claim, docs/raw-flash-contract.md "Ownership"), checked by the card
// on every command, so a host that only seems dead is fenced by the card itself.
//
// What is the card's stays with the card: the PLP buffer, the stage slots and
// accumulators, lifetime counters, sensors. A host that dies leaves its claims to run out
// (the card does not know it died: a paused host must stay fenced until its lease ends);
// the card server that dies is a power cut (the next `serve` finishes the protected
// buffer, as a power-on does).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "vsl/card/backend.h"
#include "vsl/core/status.h"
#include "vsl/nand/card_model.h"

namespace vsl::card {

// The socket a shared card in `dir` is served on.
std::string SharedSocketPath(const std::string& dir);

struct CardServerOptions {
  model::SimCardOptions sim;  // how the simulated card runs (pipe_clocks are the server's)
  std::string socket;         // "": SharedSocketPath(dir)
  uint32_t socket_mode = 0600;
  DurNs save_every_ns = 10 * kSec;  // lifetime counters into the images this often
};

class CardServer {
 public:
  // Opens the simulated card in `dir` (its own engine per pipe, in real time) and serves
  // its ports. Busy when another process has the card open; AlreadyExists when another
  // server answers on the socket.
  static Result<std::unique_ptr<CardServer>> Start(const std::string& dir, const CardServerOptions& opts);
  // Closes every connection (their hosts see their ports lost), saves the lifetime
  // counters and closes the card cleanly.
  ~CardServer();

  const std::string& socket_path() const;
  CardBackend& backend();
  // Connections open now (pipe ports and control links).
  uint32_t connections() const;
  // Malformed messages seen (each closed its connection).
  uint64_t malformed() const;

  struct Impl;

 private:
  explicit CardServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The shared card served for `dir` ("shared:DIR"), as one host's backend. Unavailable
// (with how to start one) when no server answers. Its pipes need engines on real clocks.
Result<std::unique_ptr<CardBackend>> MakeSharedBackend(const std::string& dir);

}  // namespace vsl::card
