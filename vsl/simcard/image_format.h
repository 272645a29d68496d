// On-disk format of a simulated card's controller image (one sparse file per controller).
//
// Layout, every offset a multiple of 4 KiB except inside the data region:
//   [0, 4096)                 ImageHeader (immutable after creation; CRC32C-checked)
//   [4096, 8192)              ImageState (power counters, clean flag; CRC32C-checked)
//   [die_table_offset ...)    DieRecord[dies]                     (dies = pipes * dies/pipe)
//   [block_table_offset ...)  BlockRecord[dies][blocks_per_lun]
//   [page_table_offset ...)   uint8_t page_state[dies][blocks][pages] (PageState)
//   [data_offset ...)         page slots [dies][blocks][pages], each page_data_bytes +
//                             page_spare_bytes: data, then the raw spare (host metadata
//                             first, then the ECC parity area, zero in statistical ECC).
// Dies are numbered per controller: die = pipe * dies_per_pipe + pipe-local die.
// Unwritten regions read as zero, so a new image is all erased (PageState::kErased == 0)
// and costs only its metadata on disk; an erase punches its block's slots out again.
// All integers are little-endian (the simulator runs on little-endian hosts only).
//
// Versioning: kVersionMajor changes when an older reader would misread the file; such
// images are refused with a clear error (no silent migration). kVersionMinor grows when
// fields are added in reserved space that older readers may ignore; readers accept any
// minor version of their major.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vsl::simcard::format {

inline constexpr char kMagic[8] = {'O', 'V', 'S', 'L', 'C', 'A', 'R', 'D'};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 2;  // 1: LifetimeRecord in the state block; 2: kBlockParity
inline constexpr uint64_t kHeaderOffset = 0;
inline constexpr uint64_t kStateOffset = 4096;
inline constexpr uint64_t kTablesOffset = 8192;
inline constexpr uint64_t kAlign = 4096;

struct ImageHeader {
  char magic[8];
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t header_bytes;  // sizeof(ImageHeader)
  uint64_t card_id;       // the same in every controller image of one card
  uint32_t controller_index;
  uint32_t controllers;
  // Geometry (nand::Geometry, same field order).
  uint32_t pipes_per_controller;
  uint32_t channels_per_pipe;
  uint32_t luns_per_channel;
  uint32_t planes_per_lun;
  uint32_t blocks_per_lun;
  uint32_t pages_per_block;
  uint32_t page_data_bytes;
  uint32_t page_spare_bytes;
  uint32_t ecc_codeword_bytes;
  uint32_t ecc_parity_bytes;
  uint32_t ecc_t;
  uint32_t reserved0;
  uint64_t die_table_offset;
  uint64_t block_table_offset;
  uint64_t page_table_offset;
  uint64_t data_offset;
  uint64_t page_slot_bytes;  // page_data_bytes + page_spare_bytes
  uint64_t file_bytes;       // the file's size
  uint64_t creation_seed;    // seed that drew the factory bad blocks
  char serial[32];           // NUL-padded ASCII
  char profile[32];
  char firmware_version[32];
  char model[32];
  uint8_t param_page[256];   // the ONFI parameter page every die of this controller reports
  uint8_t reserved[3572];    // zero; room for minor-version fields
  uint32_t header_crc;       // CRC32C of the header with this field zero
};
static_assert(sizeof(ImageHeader) == 4096, "ImageHeader is one 4 KiB block");
static_assert(offsetof(ImageHeader, header_crc) == 4092, "CRC is the last word");

// Mutable card state, rewritten in place (its own CRC).
struct ImageState {
  uint64_t power_on_count;       // times the card was opened or powered on
  uint64_t unsafe_power_offs;    // power cuts and opens that found the card not closed
  uint32_t attached;             // 1 while a simulator has the image open
  uint8_t plp_state;             // nand::PlpState
  // The controller's pipe mode, kept like a register in its configuration flash:
  // 0 dual pipe (each pipe its own LUN), 1 single pipe (one LUN over both pipes).
  // Written by the VSL at format (card layer); zero in images of minor version 0.
  uint8_t pipe_mode;
  uint8_t reserved0[2];
  // The controller firmware loaded by an update (NUL-padded; empty: the one it shipped
  // with, ImageHeader's). The image itself is kept beside the card image (ctrlN.fw).
  char firmware_version[32];
  uint64_t reserved[1];
  uint32_t pad;
  uint32_t crc;                  // CRC32C of this record with this field zero
};
static_assert(sizeof(ImageState) == 72, "ImageState size is part of the format");

// The controller's lifetime counters (its SMART log), in the state block at
// kLifetimeOffset (minor version 1; zero in older images, which count from zero). Kept
// current while the card runs (the image is mapped) and synced with the state record.
// NAND counters are the controller's own; host bytes are what the VSL reports of its
// logical I/O; temperatures in milli-degrees C.
inline constexpr uint64_t kLifetimeMagic = 0x4546494c4c53564fULL;  // "OVSLLIFE"
inline constexpr uint64_t kLifetimeOffset = kStateOffset + 1024;
struct LifetimeRecord {
  uint64_t magic;
  uint64_t host_read_bytes, host_write_bytes;
  uint64_t nand_read_bytes, nand_program_bytes, erases;
  uint64_t uncorrectable_reads, program_fails, erase_fails;
  uint64_t powered_ns;
  int64_t max_temp_mc;
  uint64_t thermal_shutdowns;
  uint64_t reserved[4];
  uint32_t pad;
  uint32_t crc;  // CRC32C of this record with this field zero
};
static_assert(sizeof(LifetimeRecord) == 136, "LifetimeRecord size is part of the format");

enum DieFlags : uint32_t {
  kDieFailed = 1u << 0,  // the die no longer answers (persists: a dead die stays dead)
};

struct DieRecord {
  uint32_t flags;                // DieFlags
  uint32_t param_page_bad_mask;  // bit i: copy i of the parameter page reads corrupted
  uint64_t reserved[3];
};
static_assert(sizeof(DieRecord) == 32, "DieRecord size is part of the format");

enum BlockFlags : uint8_t {
  kBlockFactoryBad = 1u << 0,  // marked bad at manufacture (marker in spare byte 0)
  kBlockGrownBad = 1u << 1,    // a program or erase failed; every later one fails too
  // (minor 2) Every page programmed since the block's last erase carries its BCH parity in
  // the spare area (written in bit-exact ECC mode). Without it a bit-exact read computes
  // the parity from the stored data, as the controller would have written it. Readers of
  // minor 0-1 ignore the bit (they never read parity); a program by such a reader leaves
  // it set over a page without parity, which a later bit-exact read reports uncorrectable.
  kBlockParity = 1u << 2,
};

struct BlockRecord {
  uint32_t erase_count;        // P/E cycles
  uint32_t reads_since_erase;  // read disturb
  uint16_t next_page;          // pages below this are programmed (or torn) since erase
  uint8_t flags;               // BlockFlags
  uint8_t reserved0;
  uint32_t reserved1;
};
static_assert(sizeof(BlockRecord) == 16, "BlockRecord size is part of the format");

enum class PageState : uint8_t {
  kErased = 0,         // reads as all 0xFF
  kProgrammed = 1,     // data in the slot
  kTornUncorrectable = 2,  // program interrupted or failed: reads uncorrectable
  kTornGarbage = 3,    // program interrupted: ECC passes it, the data is garbage
};

}  // namespace vsl::simcard::format
