// The card's host ports on the wire (docs/ha.md, "The port protocol"): what the card
// server (shared_card.h, CardServer) and a host's shared backend exchange over the card's
// Unix socket. Internal to vsl/card.
//
// Connections are SOCK_SEQPACKET: every send is one whole message. A connection opens
// with a Hello and is then either one host's port on one pipe (the raw-flash contract,
// nand::FlashPipe, message by message) or the host's control link (JSON requests for what
// a CardBackend offers beyond its pipes: sensors, lifetime, health, faults).
//
// Every message starts with a Header: its type and the tag the host chose for the command
// (the card echoes it on every reply to that command). Fixed parts are the structs below,
// byte for byte (both ends are one build on one machine: the Hello's magic, version and
// sizes check that), then the payload the struct announces. A message whose length does
// not match what its header says is malformed: the card logs it and closes the
// connection (the host sees its port lost); it never acts on part of one.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vsl/nand/card_model.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/geometry.h"

namespace vsl::card::wire {

inline constexpr uint32_t kMagic = 0x504C5356;  // "VSLP"
inline constexpr uint16_t kVersion = 1;
// The largest message either side sends or accepts (a page, its metadata and a header
// fit many times over; a control reply is far smaller).
inline constexpr std::size_t kMaxMessage = 512 * 1024;

enum class Type : uint8_t {
  // host -> card
  kHello = 1,
  kRead,
  kProgram,
  kStage,
  kErase,
  kReset,
  kReadId,
  kParam,
  kCopy,
  kClearStage,
  kClearAcc,
  kClaim,
  kRenew,
  kRelease,
  kOwner,
  kControl,  // JSON request on the control link
  // card -> host
  kWelcome = 64,  // Hello answered (pipe: WelcomePipe; control: JSON)
  kRefused,       // Hello refused: text payload; the card closes the connection
  kAccepted,      // a program, stage or copy is in the protected write buffer
  kDone,          // a command completed (CompletionMsg + read data)
  kOwnerIs,       // answer to claim, renew, release, owner (OwnerMsg)
  kControlReply,  // JSON reply on the control link
};

struct Header {
  uint8_t type = 0;
  uint8_t pad[7] = {};
  uint64_t tag = 0;
};

enum class Link : uint16_t { kPipe = 0, kControl = 1 };

struct Hello {
  Header h;
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t link = 0;  // Link
  uint32_t pipe = 0;  // kPipe: which
  uint32_t pid = 0;   // the host process, for the card's log
};

struct WelcomePipe {
  Header h;
  nand::PipeTopology topology;
  uint32_t stage_slots = 0, copy_accumulators = 0;
  uint32_t page_data_bytes = 0, meta_bytes = 0;
  uint8_t plp = 0;  // nand::PlpState
  uint8_t offers_ownership = 0;
  uint8_t pad[6] = {};
};

struct ReadMsg {
  Header h;
  nand::Ppa ppa;
  uint32_t first_sector = 0, sector_count = 0;
  uint8_t want_data = 0, want_meta = 0;
  uint8_t pad[2] = {};
};

// kProgram and kStage; followed by page_data_bytes of data (has_data) and meta_bytes of
// metadata (has_meta).
struct ProgramMsg {
  Header h;
  nand::Ppa ppa;
  uint32_t acc = nand::kNoAccumulator;
  uint32_t slot = 0;  // kStage
  uint8_t fence = 0, acc_op = 0, has_data = 0, has_meta = 0;
  uint16_t acc_meta_at = 0, acc_meta_len = 0, acc_crc_at = 0;
  uint8_t pad[2] = {};
};

// kErase (die, block), kReset (die), kReadId (die, address, len), kParam (die, len).
struct DieMsg {
  Header h;
  uint32_t die = 0, block = 0;
  uint32_t len = 0;
  uint8_t address = 0;
  uint8_t pad[3] = {};
};

// Followed by meta_bytes of metadata (has_meta) and of fail metadata (has_fail_meta).
struct CopyMsg {
  Header h;
  nand::Ppa src, dst;
  uint32_t acc = nand::kNoAccumulator;
  uint32_t segment_count = 0;
  nand::CopySegment segments[nand::kMaxCopySegments] = {};
  uint8_t has_meta = 0, has_fail_meta = 0;
  uint8_t pad[6] = {};
};

// kClearStage, kClearAcc: `value` is the slot or accumulator. kClaim (host, force,
// lease_ns), kRenew (lease_ns), kRelease, kOwner.
struct ValueMsg {
  Header h;
  uint32_t value = 0;
  uint32_t host = 0;
  int64_t lease_ns = 0;
  uint8_t force = 0;
  uint8_t pad[7] = {};
};

// kAccepted, kDone; followed by `payload` bytes (a read's data then metadata, READ ID's
// or the parameter page's bytes).
struct CompletionMsg {
  Header h;
  uint8_t status = 0;  // nand::FlashStatus
  uint8_t pad[3] = {};
  uint32_t corrected_bits = 0;
  uint32_t payload = 0;
  uint32_t pad2 = 0;
};

// Lease time as what is left of it: the two ends' clocks share no epoch.
struct OwnerMsg {
  Header h;
  uint8_t granted = 0;  // claim: granted; renew: renewed; release, owner: 1
  uint8_t pad[3] = {};
  uint32_t host = 0, generation = 0;
  uint32_t pad2 = 0;
  int64_t lease_left_ns = 0;  // INT64_MAX: never runs out
};

template <typename T>
std::vector<uint8_t> Pack(const T& m, const void* a = nullptr, std::size_t alen = 0, const void* b = nullptr,
                          std::size_t blen = 0) {
  std::vector<uint8_t> out(sizeof(T) + alen + blen);
  std::memcpy(out.data(), &m, sizeof(T));
  if (alen != 0) std::memcpy(out.data() + sizeof(T), a, alen);
  if (blen != 0) std::memcpy(out.data() + sizeof(T) + alen, b, blen);
  return out;
}

// The fixed part of `msg` as T, or false when the message is shorter.
template <typename T>
bool Unpack(const std::vector<uint8_t>& msg, T* out) {
  if (msg.size() < sizeof(T)) return false;
  std::memcpy(out, msg.data(), sizeof(T));
  return true;
}

inline std::vector<uint8_t> Text(Type t, uint64_t tag, const std::string& s) {
  Header h;
  h.type = static_cast<uint8_t>(t);
  h.tag = tag;
  return Pack(h, s.data(), s.size());
}
inline std::string TextOf(const std::vector<uint8_t>& msg) {
  return msg.size() <= sizeof(Header) ? std::string()
                                      : std::string(reinterpret_cast<const char*>(msg.data()) + sizeof(Header),
                                                    msg.size() - sizeof(Header));
}

// Sends one message (blocking); false when the peer is gone.
bool Send(int fd, const std::vector<uint8_t>& msg);
// Receives one message (blocking) into `msg`; false at end of stream, on error or for a
// message over kMaxMessage (then the connection is unusable).
bool Receive(int fd, std::vector<uint8_t>* msg);

}  // namespace vsl::card::wire

// The card model's records on the control link.
namespace vsl::model {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Timing, t_read_ns, t_prog_ns, t_erase_ns, t_reset_ns, cmd_overhead_ns,
                                   bus_bytes_per_sec, link_bytes_per_sec, die_timeout_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Reliability, endurance_cycles, rber_base, rber_wear, rber_wear_exp,
                                   rber_read_disturb, fail_base, fail_wear, fail_exp, factory_bad_fraction,
                                   max_bad_blocks_per_lun, torn_reads_as_garbage)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Power, static_w, standby_w, read_uj, program_uj, erase_uj, channel_nj_per_byte,
                                   link_nj_per_byte, heat_capacity_j_per_c, r_sink_c_per_w, r_air_c_per_w, lfm_knee)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Environment, ambient_c, airflow_lfm)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DieCounters, failed_dies, blocks, factory_bad_blocks, grown_bad_blocks,
                                   min_erase_count, max_erase_count, pe_sum, programmed_pages, torn_pages)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PowerReading, temperature_c, energy_j, nand_energy_j, at, low_power)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Lifetime, host_read_bytes, host_write_bytes, nand_read_bytes, nand_program_bytes,
                                   erases, uncorrectable_reads, program_fails, erase_fails, powered_ns,
                                   max_temperature_c, thermal_shutdowns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ControllerHealth, controller, serial, model, profile, firmware_version, dies,
                                   failed_dies, blocks, factory_bad_blocks, grown_bad_blocks, min_erase_count,
                                   max_erase_count, mean_erase_count, programmed_pages, torn_pages, power_on_count,
                                   unsafe_power_offs, plp, image_bytes, image_allocated_bytes, rated_pe_used_percent)
}  // namespace vsl::model

namespace vsl::nand {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Geometry, controllers, pipes_per_controller, channels_per_pipe, luns_per_channel,
                                   planes_per_lun, blocks_per_lun, pages_per_block, page_data_bytes,
                                   page_spare_bytes, ecc_codeword_bytes, ecc_parity_bytes, ecc_t)
}  // namespace vsl::nand
