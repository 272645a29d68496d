#include "vsl/nand/discover.h"

#include <array>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace vsl::nand {
namespace {

struct DiscoverState {
  FlashPipe* pipe;
  Function<void(Result<DiscoveredPipe>)> done;
  uint32_t dies = 0;
  uint32_t next = 0;
  std::array<uint8_t, 8> id{};
  std::array<uint8_t, onfi::kParamPageBytes * onfi::kParamPageCopies> pages{};
  std::optional<onfi::ParameterPage> first;
  DiscoveredPipe out;
  Status error;
};

void Finish(std::shared_ptr<DiscoverState> st);
void NextDie(std::shared_ptr<DiscoverState> st);

void Fail(std::shared_ptr<DiscoverState> st, Status s) {
  auto done = std::move(st->done);
  done(Result<DiscoveredPipe>(std::move(s)));
}

void OnParamPage(std::shared_ptr<DiscoverState> st, uint32_t die, const Completion& c) {
  if (c.status == FlashStatus::kDieTimeout) {
    st->out.silent_dies.push_back(die);
    return NextDie(st);
  }
  if (!c.ok()) {
    return Fail(st, Status::IOError(fmt::format("die {}: READ PARAMETER PAGE failed ({})", die,
                                                FlashStatusName(c.status))));
  }
  std::size_t copy = 0;
  auto pp = onfi::Decode(st->pages.data(), onfi::kParamPageCopies, &copy);
  if (!pp.ok()) return Fail(st, pp.status().WithContext(fmt::format("die {}", die)));
  if (copy != 0) st->out.dies_on_backup_copy.push_back(die);
  if (!st->first) {
    st->first = pp.value();
  } else if (!(*st->first == pp.value())) {
    return Fail(st, Status::Corruption(fmt::format(
                        "die {}: parameter page differs from the first answering die's", die)));
  }
  NextDie(st);
}

void NextDie(std::shared_ptr<DiscoverState> st) {
  if (st->next == st->dies) return Finish(st);
  const uint32_t die = st->next++;
  st->id.fill(0);
  st->pipe->ReadId(die, onfi::kReadIdOnfiAddr, st->id.data(), 4, [st, die](const Completion& c) {
    if (c.status == FlashStatus::kDieTimeout) {
      st->out.silent_dies.push_back(die);
      return NextDie(st);
    }
    if (!c.ok() || std::memcmp(st->id.data(), onfi::kOnfiSignature.data(), 4) != 0) {
      return Fail(st, Status::IOError(fmt::format(
                          "die {}: READ ID 20h did not answer \"ONFI\" ({})", die,
                          FlashStatusName(c.status))));
    }
    st->pipe->ReadParameterPage(die, st->pages.data(), static_cast<uint32_t>(st->pages.size()),
                                [st, die](const Completion& c2) { OnParamPage(st, die, c2); });
  });
}

void Finish(std::shared_ptr<DiscoverState> st) {
  if (!st->first) {
    return Fail(st, Status::IOError(fmt::format("no die of the pipe answered ({} silent)",
                                                st->out.silent_dies.size())));
  }
  const PipeTopology& t = st->pipe->topology();
  const onfi::ParameterPage& pp = *st->first;
  Geometry& g = st->out.geometry;
  g.controllers = t.controllers;
  g.pipes_per_controller = t.pipes_per_controller;
  g.channels_per_pipe = t.channels;
  g.luns_per_channel = t.luns_per_channel;
  g.planes_per_lun = pp.planes;
  g.blocks_per_lun = pp.blocks_per_lun;
  g.pages_per_block = pp.pages_per_block;
  g.page_data_bytes = pp.data_bytes_per_page;
  g.page_spare_bytes = pp.spare_bytes_per_page;
  g.ecc_codeword_bytes = t.ecc_codeword_bytes;
  g.ecc_parity_bytes = t.ecc_parity_bytes;
  g.ecc_t = t.ecc_t;
  if (pp.luns_per_target != t.luns_per_channel) {
    return Fail(st, Status::Corruption(fmt::format(
                        "parameter page says {} LUNs per target, controller says {}",
                        pp.luns_per_target, t.luns_per_channel)));
  }
  if (Status s = g.Validate(); !s.ok()) {
    return Fail(st, Status::Corruption(s.message()).WithContext("discovered geometry"));
  }
  st->out.param = pp;
  auto done = std::move(st->done);
  done(std::move(st->out));
}

}  // namespace

void DiscoverPipe(FlashPipe& pipe, Function<void(Result<DiscoveredPipe>)> done) {
  auto st = std::make_shared<DiscoverState>();
  st->pipe = &pipe;
  st->done = std::move(done);
  st->dies = pipe.topology().dies();
  NextDie(st);
}

}  // namespace vsl::nand
