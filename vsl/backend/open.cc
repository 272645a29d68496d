#include "vsl/backend/open.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "vsl/backend/ctrl_backend.h"
#include "vsl/backend/hosts.h"
#include "vsl/card/shared_card.h"
#include "vsl/card/sim_backend.h"
#include "vsl/hw/xrt_port.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::backend {
namespace fs = std::filesystem;

namespace {
// Where an Alveo board's card metadata (identity, pipe modes, lifetime, dead dies) lives:
// the board itself keeps only the pages.
std::string XrtStateDir(const std::string& device) {
  const char* base = std::getenv("VSL_STATE_DIR");
  return fmt::format("{}/xrt-{}", base && *base ? base : "/var/lib/openvsl", device);
}
}  // namespace

std::vector<std::string> Backends() {
  std::vector<std::string> v{"sim"};
  if (HaveCosim()) {
    v.push_back("rtl");
    v.push_back("kernel");
  }
  v.push_back("xrt");
  return v;
}

std::string DefaultProfile(const std::string& kind) {
  if (kind == "rtl") return "rtl-duo";
  if (kind == "kernel" || kind == "xrt") return "kernel-emu";
  return "duo-slc-small";
}

Result<std::unique_ptr<card::CardBackend>> MakeBackend(const std::string& spec_text, const card::CardOptions& opts) {
  VSL_ASSIGN_OR_RETURN(card::CardSpec spec, card::ParseCardSpec(spec_text));
  if (spec.kind == "sim") return card::MakeSimBackend(spec.path, opts.sim);
  if (spec.kind == "shared") return card::MakeSharedBackend(spec.path);
  if (spec.kind == "rtl" || spec.kind == "kernel") {
    if (!HaveCosim()) {
      return Status::NotSupported(fmt::format("{}: this build has no co-simulation (verilator and libsystemc-dev "
                                              "were missing at configure time; scripts/setup installs them)",
                                              spec_text));
    }
    const std::string kind = spec.kind, dir = spec.path;
    return ControllerBackend::Make(kind, dir, opts,
                                   [kind, dir](std::vector<simcard::ControllerImage*>& images,
                                               const simcard::Profile& profile) {
                                     return CosimHost(kind, dir, images, profile);
                                   });
  }
  // xrt: the board first (no board: one clear line), then its metadata directory.
  auto cards = hw::ListAlveoCards();
  if (!cards.ok() || cards->empty()) {
    return Status::NotFound(fmt::format("no Alveo device for {}: {}", spec_text,
                                        cards.ok() ? hw::NoAlveoCardMessage() : cards.status().ToString()));
  }
  const std::string device = spec.path, xclbin = spec.extra, dir = XrtStateDir(spec.path);
  return ControllerBackend::Make("xrt", dir, opts,
                                 [device, xclbin](std::vector<simcard::ControllerImage*>&,
                                                  const simcard::Profile& profile) {
                                   return XrtBoard(device, xclbin, profile);
                                 });
}

Result<std::unique_ptr<card::Card>> OpenCard(const std::string& spec, const card::CardOptions& opts) {
  VSL_ASSIGN_OR_RETURN(card::CardSpec s, card::ParseCardSpec(spec));
  if (s.kind == "sim") return card::Card::Open(spec, opts);  // keeps the name it was given
  VSL_ASSIGN_OR_RETURN(auto b, MakeBackend(spec, opts));
  return card::Card::Open(std::move(b), opts);
}

Status CreateCard(const std::string& spec_text, const CreateArgs& args) {
  VSL_ASSIGN_OR_RETURN(card::CardSpec spec, card::ParseCardSpec(spec_text));
  if ((spec.kind == "rtl" || spec.kind == "kernel") && !HaveCosim()) {
    return Status::NotSupported(fmt::format("{}: this build has no co-simulation", spec_text));
  }
  if (spec.kind == "shared") {
    return Status::InvalidArgument(fmt::format(
        "{}: a shared card is made as a simulated one (sim:{}) and then served (vslflash serve {})", spec_text,
        spec.path, spec.path));
  }
  if (spec.kind == "xrt") {
    auto cards = hw::ListAlveoCards();
    if (!cards.ok() || cards->empty()) {
      return Status::NotFound(fmt::format("no Alveo device for {}: {}", spec_text,
                                          cards.ok() ? hw::NoAlveoCardMessage() : cards.status().ToString()));
    }
  }
  const std::string dir = spec.kind == "xrt" ? XrtStateDir(spec.path) : spec.path;
  const std::string pname = args.profile.empty() ? DefaultProfile(spec.kind) : args.profile;
  VSL_ASSIGN_OR_RETURN(simcard::Profile p, simcard::FindProfile(pname));
  if (spec.kind != "sim") {
    const auto& g = p.geometry;
    if (g.pipes_per_controller != 2 || g.channels_per_pipe != 1 || g.luns_per_channel != 4) {
      return Status::InvalidArgument(fmt::format(
          "profile {} is [{}]: a {} card has the controller's shape (2 pipes of 1 channel of 4 LUNs; try {})", pname,
          g.ToString(), spec.kind, DefaultProfile(spec.kind)));
    }
    if (spec.kind != "rtl" && pname != "kernel-emu") {
      return Status::InvalidArgument(fmt::format(
          "the kernel's emulators are built for the kernel-emu shape; profile {} does not fit", pname));
    }
  }
  simcard::CreateOptions co;
  co.serial = args.serial;
  co.seed = args.seed;
  co.blocks_per_lun = args.blocks_per_lun;
  VSL_RETURN_IF_ERROR(simcard::SimCard::Create(dir, p, co));
  if (spec.kind != "sim") {
    std::ofstream m(dir + "/BACKEND");
    m << spec.kind << "\n";
    m.close();
    if (!m) return Status::IOError(fmt::format("cannot write {}/BACKEND", dir));
  }
  return Status::Ok();
}

}  // namespace vsl::backend
