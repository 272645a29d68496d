#include "vsl/nand/geometry.h"

#include <fmt/format.h>

namespace vsl::nand {

Status Geometry::Validate() const {
  auto bad = [](const char* what, uint64_t v, const char* rule) {
    return Status::InvalidArgument(fmt::format("geometry: {} = {} ({})", what, v, rule));
  };
  if (controllers < 1 || controllers > 8) return bad("controllers", controllers, "1..8");
  if (pipes_per_controller < 1 || pipes_per_controller > 2) {
    return bad("pipes_per_controller", pipes_per_controller, "1 or 2");
  }
  if (channels_per_pipe < 1 || channels_per_pipe > 32) {
    return bad("channels_per_pipe", channels_per_pipe, "1..32");
  }
  if (luns_per_channel < 1 || luns_per_channel > 8) {
    return bad("luns_per_channel", luns_per_channel, "1..8");
  }
  if (planes_per_lun < 1 || planes_per_lun > 4) return bad("planes_per_lun", planes_per_lun, "1..4");
  if (blocks_per_lun < 2 || blocks_per_lun > (1u << 20) || blocks_per_lun % planes_per_lun != 0) {
    return bad("blocks_per_lun", blocks_per_lun, "2..2^20, a multiple of planes_per_lun");
  }
  if (pages_per_block < 2 || pages_per_block > 1024) {
    return bad("pages_per_block", pages_per_block, "2..1024");
  }
  if (ecc_codeword_bytes != 512 && ecc_codeword_bytes != 1024) {
    return bad("ecc_codeword_bytes", ecc_codeword_bytes, "512 or 1024");
  }
  if (page_data_bytes < ecc_codeword_bytes || page_data_bytes > 65536 ||
      page_data_bytes % ecc_codeword_bytes != 0) {
    return bad("page_data_bytes", page_data_bytes, "a multiple of the codeword, at most 64 KiB");
  }
  if (ecc_t < 1 || ecc_t > 64) return bad("ecc_t", ecc_t, "1..64");
  if (page_spare_bytes > 8192 ||
      uint64_t{ecc_parity_bytes} * codewords_per_page() + 16 > page_spare_bytes) {
    return bad("page_spare_bytes", page_spare_bytes,
               "must hold ECC parity for every codeword plus at least 16 metadata bytes");
  }
  return Status::Ok();
}

std::string Geometry::ToString() const {
  return fmt::format(
      "{} controller(s) x {} pipe(s) x {} channel(s) x {} LUN(s); {} plane(s), {} blocks/LUN, "
      "{} pages/block, page {} + {} B (ECC t={} per {} B, {} B host metadata)",
      controllers, pipes_per_controller, channels_per_pipe, luns_per_channel, planes_per_lun,
      blocks_per_lun, pages_per_block, page_data_bytes, page_spare_bytes, ecc_t,
      ecc_codeword_bytes, meta_bytes_per_page());
}

}  // namespace vsl::nand
