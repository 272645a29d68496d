// The block exports vsld serves over NBD: every LUN of every card, and the card volume
// (RAID 0 over a card's LUNs) when one is configured.
//
// Names: the first card's LUNs are "lun0", "lun1", ... and its volume "volume"; card k > 0
// prefixes "card<k>/". The default export ("") is the first listed. With a volume
// configured only the volume is exported: its LUNs hold its stripes, and a client writing
// a LUN directly would corrupt it.
//
// A LUN export is bound to the FTL geometry it was opened with: if the LUN is detached its
// requests fail with EIO ("offline") and resume when it is attached again; if it is
// reformatted to another size or sector size they fail until the client reconnects.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vsl/card/card.h"
#include "vsl/nbd/export.h"

namespace vsl::daemon {

class CardCatalog : public nbd::ExportCatalog {
 public:
  // `volume_chunk_bytes` 0: no volume exports.
  CardCatalog(std::vector<card::Card*> cards, uint32_t volume_chunk_bytes)
      : cards_(std::move(cards)), chunk_(volume_chunk_bytes) {}
  std::vector<nbd::ExportInfo> List() override;
  Result<std::shared_ptr<nbd::BlockExport>> Open(const std::string& name) override;
  // The export that holds LUN `l` of card `card`: the LUN's own, or the card's volume.
  std::string ExportOf(std::size_t card, const card::Lun& l) const {
    return Prefix(card) + (chunk_ != 0 ? std::string("volume") : l.name());
  }

 private:
  std::string Prefix(std::size_t card) const;
  std::vector<card::Card*> cards_;
  uint32_t chunk_;
};

}  // namespace vsl::daemon
