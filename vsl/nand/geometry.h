// Geometry of a card and of the pages on it, as the raw-flash contract reports it.
//
// Hierarchy: card -> controllers -> pipes -> channels -> LUNs (dies) -> planes -> blocks
// -> pages; a page is data bytes + spare (OOB) bytes. Dies are addressed inside a pipe by
// a flat index, die = channel * luns_per_channel + lun. The controller's ECC protects each
// page as codewords of ecc_codeword_bytes of data (the last codeword also covers the
// host's metadata bytes) with ecc_parity_bytes of parity each, stored in the spare area;
// what is left of the spare is the host's per-page metadata (meta_bytes_per_page). Byte 0
// of the spare (and so of the host metadata) is the factory bad-block marker position: a
// good block's first page has 0xFF there, and the host must keep writing 0xFF to it.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>
#include <string>

#include "vsl/core/status.h"

namespace vsl::nand {

struct Geometry {
  uint32_t controllers = 1;
  uint32_t pipes_per_controller = 1;
  uint32_t channels_per_pipe = 1;
  uint32_t luns_per_channel = 1;
  uint32_t planes_per_lun = 1;
  uint32_t blocks_per_lun = 1;
  uint32_t pages_per_block = 1;
  uint32_t page_data_bytes = 4096;
  uint32_t page_spare_bytes = 128;  // raw spare per page: ECC parity + host metadata
  uint32_t ecc_codeword_bytes = 512;
  uint32_t ecc_parity_bytes = 13;   // per codeword
  uint32_t ecc_t = 8;               // bits correctable per codeword

  uint32_t dies_per_pipe() const { return channels_per_pipe * luns_per_channel; }
  uint32_t pipes() const { return controllers * pipes_per_controller; }
  uint32_t dies_per_controller() const { return pipes_per_controller * dies_per_pipe(); }
  uint32_t codewords_per_page() const { return page_data_bytes / ecc_codeword_bytes; }
  // Host-usable metadata bytes per page (spare minus ECC parity).
  uint32_t meta_bytes_per_page() const {
    return page_spare_bytes - ecc_parity_bytes * codewords_per_page();
  }
  uint64_t block_data_bytes() const {
    return uint64_t{pages_per_block} * page_data_bytes;
  }
  uint64_t die_data_bytes() const { return block_data_bytes() * blocks_per_lun; }
  uint64_t pipe_data_bytes() const { return die_data_bytes() * dies_per_pipe(); }
  uint64_t card_data_bytes() const { return pipe_data_bytes() * pipes(); }
  uint32_t ChannelOf(uint32_t die) const { return die / luns_per_channel; }
  uint32_t LunOf(uint32_t die) const { return die % luns_per_channel; }
  uint32_t PlaneOf(uint32_t block) const { return block % planes_per_lun; }

  // OK, or InvalidArgument naming the first field that is out of range.
  Status Validate() const;
  std::string ToString() const;
  bool operator==(const Geometry& o) const {
    return controllers == o.controllers && pipes_per_controller == o.pipes_per_controller &&
           channels_per_pipe == o.channels_per_pipe && luns_per_channel == o.luns_per_channel &&
           planes_per_lun == o.planes_per_lun && blocks_per_lun == o.blocks_per_lun &&
           pages_per_block == o.pages_per_block && page_data_bytes == o.page_data_bytes &&
           page_spare_bytes == o.page_spare_bytes && ecc_codeword_bytes == o.ecc_codeword_bytes &&
           ecc_parity_bytes == o.ecc_parity_bytes && ecc_t == o.ecc_t;
  }
  bool operator!=(const Geometry& o) const { return !(*this == o); }
};

// Address of a page inside one pipe.
struct Ppa {
  uint32_t die = 0;
  uint32_t block = 0;
  uint32_t page = 0;
  bool operator==(const Ppa& o) const { return die == o.die && block == o.block && page == o.page; }
  bool operator!=(const Ppa& o) const { return !(*this == o); }
};

}  // namespace vsl::nand
