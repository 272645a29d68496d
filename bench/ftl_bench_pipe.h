// One formatted, attached FTL pipe on a fresh simulated card, for the virtual-time bench
// tools: the card lives in /dev/shm (or the temp directory) and is removed on exit.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include "vsl/core/clock.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::bench {

struct FtlBenchPipe {
  std::string dir;
  VirtualClock clock{1};
  std::unique_ptr<simcard::SimCard> card;
  std::unique_ptr<ftl::Ftl> ftl;

  // Creates a `profile` card with `blocks` blocks per LUN (0: the profile's), formats
  // pipe 0 and attaches it. False (with nothing left behind) when any step fails.
  bool Start(const std::string& name, const std::string& profile, uint32_t blocks,
             const ftl::FtlOptions& opts = {}) {
    namespace fs = std::filesystem;
    dir = (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
          "/openvsl-" + name + "-" + std::to_string(::getpid());
    fs::remove_all(dir);
    simcard::CreateOptions co;
    co.blocks_per_lun = blocks;
    auto p = simcard::FindProfile(profile);
    if (!p.ok() || !simcard::SimCard::Create(dir, *p, co).ok()) return false;
    auto c = simcard::SimCard::Open(dir, clock);
    if (!c.ok()) return false;
    card = std::move(c).value();
    std::optional<Status> st;
    ftl::Ftl::Format(card->pipe(0), clock, {}, [&](Status s) { st = s; });
    clock.RunUntilTrue([&] { return st.has_value(); });
    if (!st || !st->ok()) return false;
    std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
    ftl::Ftl::Open(card->pipe(0), clock, opts, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
    clock.RunUntilTrue([&] { return r.has_value(); });
    if (!r || !r->ok()) return false;
    ftl = std::move(*r).value();
    return true;
  }
  ~FtlBenchPipe() {
    ftl.reset();
    card.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

}  // namespace vsl::bench
