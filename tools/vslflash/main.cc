// vslflash: create, inspect and exercise simulated flash cards at the raw-flash level.
//
//   vslflash profiles                        list the built-in card profiles
//   vslflash create DIR --profile P          make a new card (sparse images) in DIR
//   vslflash info DIR [--json]               identity, geometry and health, no I/O
//   vslflash exercise DIR [--timing M] [--ecc statistical|bit-exact]
//                                            attach, scan, write and verify every die
//   vslflash serve DIR [--socket PATH]       run the card for several hosts (vsld
//                                            --card shared:DIR --host-id N; docs/ha.md)
//                                            until SIGTERM or SIGINT
//
// Exit codes: 0 success; 1 the card failed verification; 2 bad usage or input (unknown
// profile, missing or damaged card); 3 an internal error.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/vslflash/exercise.h"
#include "vsl/card/shared_card.h"
#include "vsl/core/log.h"
#include "vsl/core/clock.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::tools {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitVerify = 1, kExitUsage = 2, kExitInternal = 3;

struct Args {
  std::string dir;
  std::string profile = "duo-slc-small";
  uint32_t blocks = 0;
  uint64_t seed = 1;
  std::string serial;
  std::string timing = "virtual";
  uint32_t pages = 32;
  bool json = false;
  bool no_scan = false;
  std::string ecc = "statistical";
  std::string socket;
  std::string socket_mode = "0600";
};

int Fail(const Status& s) {
  std::fprintf(stderr, "vslflash: %s\n", s.ToString().c_str());
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kCorruption:
    case StatusCode::kNotSupported: return kExitUsage;
    default: return kExitInternal;
  }
}

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

json HealthJson(const simcard::ControllerHealth& h) {
  return {{"controller", h.controller},
          {"serial", h.serial},
          {"model", h.model},
          {"profile", h.profile},
          {"firmware_version", h.firmware_version},
          {"dies", h.dies},
          {"failed_dies", h.failed_dies},
          {"blocks", h.blocks},
          {"factory_bad_blocks", h.factory_bad_blocks},
          {"grown_bad_blocks", h.grown_bad_blocks},
          {"erase_count", {{"min", h.min_erase_count}, {"mean", h.mean_erase_count}, {"max", h.max_erase_count}}},
          {"rated_pe_used_percent", h.rated_pe_used_percent},
          {"programmed_pages", h.programmed_pages},
          {"torn_pages", h.torn_pages},
          {"power_on_count", h.power_on_count},
          {"unsafe_power_offs", h.unsafe_power_offs},
          {"power_loss_protection", std::string(nand::PlpStateName(h.plp))},
          {"image_bytes", h.image_bytes},
          {"image_allocated_bytes", h.image_allocated_bytes}};
}

void PrintHealth(const simcard::SimCard& card) {
  const auto& g = card.geometry();
  std::printf("Card %016llx  profile %s  (%s)\n", static_cast<unsigned long long>(card.card_id()),
              card.profile().name.c_str(), card.profile().description.c_str());
  std::printf("  geometry: %s\n", g.ToString().c_str());
  std::printf("  raw capacity: %s in %u LUN(s) of %s\n", Bytes(g.card_data_bytes()).c_str(),
              g.pipes(), Bytes(g.pipe_data_bytes()).c_str());
  for (uint32_t c = 0; c < g.controllers; ++c) {
    const auto h = card.Health(c);
    std::printf("  controller %u: serial %s, model %s, firmware %s\n", c, h.serial.c_str(),
                h.model.c_str(), h.firmware_version.c_str());
    std::printf("    dies %u (failed %u); blocks %llu: factory bad %llu, grown bad %llu\n", h.dies,
                h.failed_dies, static_cast<unsigned long long>(h.blocks),
                static_cast<unsigned long long>(h.factory_bad_blocks),
                static_cast<unsigned long long>(h.grown_bad_blocks));
    std::printf("    erase count min/mean/max %u / %.2f / %u (%.4f%% of rated %u P/E)\n",
                h.min_erase_count, h.mean_erase_count, h.max_erase_count,
                h.rated_pe_used_percent, card.profile().reliability.endurance_cycles);
    std::printf("    pages programmed %llu, torn %llu; power-ons %llu, unsafe power-offs %llu; "
                "power-loss protection %s\n",
                static_cast<unsigned long long>(h.programmed_pages),
                static_cast<unsigned long long>(h.torn_pages),
                static_cast<unsigned long long>(h.power_on_count),
                static_cast<unsigned long long>(h.unsafe_power_offs),
                std::string(nand::PlpStateName(h.plp)).c_str());
    std::printf("    image %s on disk of %s addressable\n", Bytes(h.image_allocated_bytes).c_str(),
                Bytes(h.image_bytes).c_str());
  }
}

int CmdProfiles(const Args&) {
  for (const auto& name : simcard::ProfileNames()) {
    auto p = simcard::FindProfile(name);
    std::printf("%-14s %s\n", name.c_str(), p->description.c_str());
  }
  return kExitOk;
}

int CmdCreate(const Args& a) {
  auto p = simcard::FindProfile(a.profile);
  if (!p.ok()) return Fail(p.status());
  simcard::CreateOptions o;
  o.seed = a.seed;
  o.serial = a.serial;
  o.blocks_per_lun = a.blocks;
  if (Status s = simcard::SimCard::Create(a.dir, *p, o); !s.ok()) return Fail(s);
  std::printf("created %s card in %s\n", a.profile.c_str(), a.dir.c_str());
  return kExitOk;
}

int CmdInfo(const Args& a) {
  VirtualClock clock(a.seed);
  auto card = simcard::SimCard::Open(a.dir, clock);
  if (!card.ok()) return Fail(card.status());
  if (a.json) {
    json j;
    j["card_id"] = fmt::format("{:016x}", (*card)->card_id());
    j["profile"] = (*card)->profile().name;
    j["controllers"] = json::array();
    for (uint32_t c = 0; c < (*card)->geometry().controllers; ++c) {
      j["controllers"].push_back(HealthJson((*card)->Health(c)));
    }
    std::cout << j.dump(2) << "\n";
  } else {
    PrintHealth(**card);
  }
  return kExitOk;
}

int CmdExercise(const Args& a) {
  std::unique_ptr<Clock> clock;
  std::function<bool(std::function<bool()>)> drive;
  simcard::SimCardOptions so;
  so.seed = a.seed;
  auto ecc = simcard::ParseEccMode(a.ecc);
  if (!ecc.ok()) return Fail(ecc.status());
  so.ecc = *ecc;
  if (a.timing == "virtual" || a.timing == "null") {
    auto vc = std::make_unique<VirtualClock>(a.seed);
    VirtualClock* v = vc.get();
    drive = [v](std::function<bool()> pred) { return v->RunUntilTrue(pred); };
    so.null_timing = a.timing == "null";
    clock = std::move(vc);
  } else if (a.timing == "real") {
    auto rc = std::make_unique<RealClock>();
    RealClock* r = rc.get();
    drive = [r](std::function<bool()> pred) {
      while (!pred()) r->RunUntil(r->Now() + kMs);
      return true;
    };
    clock = std::move(rc);
  } else {
    return Fail(Status::InvalidArgument("--timing must be virtual, real or null"));
  }
  auto opened = simcard::SimCard::Open(a.dir, *clock, so);
  if (!opened.ok()) return Fail(opened.status());
  simcard::SimCard& card = **opened;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string last_phase;
  int last_decile = -1;
  ProgressFn progress = [&](const std::string& phase, double f) {
    if (a.json) return;
    if (tty) {
      std::fprintf(stderr, "\r  %-13s [%-40s] %3.0f%%", phase.c_str(),
                   std::string(static_cast<std::size_t>(f * 40), '#').c_str(), f * 100);
      if (f >= 1.0) std::fprintf(stderr, "\n");
    } else {
      const int decile = static_cast<int>(f * 10);
      if (phase != last_phase || decile != last_decile) {
        std::fprintf(stderr, "  %s %d%%\n", phase.c_str(), decile * 10);
        last_phase = phase;
        last_decile = decile;
      }
    }
  };
  ExerciseOptions eo;
  eo.pages_per_die = a.pages;
  eo.seed = a.seed;
  eo.scan_bad_blocks = !a.no_scan;
  if (!a.json) {
    std::fprintf(stderr, "exercising %s (%s timing): %u pipe(s) x %u dies, %u pages per die\n",
                 a.dir.c_str(), a.timing.c_str(), card.pipe_count(),
                 card.geometry().dies_per_pipe(), std::min(a.pages, card.geometry().pages_per_block));
  }
  auto r = RunExercise(card, *clock, drive, eo, progress);
  if (!r.ok()) return Fail(r.status());
  const ExerciseReport& rep = r.value();
  const double secs = static_cast<double>(rep.elapsed_ns) / 1e9;
  if (a.json) {
    json j;
    j["timing"] = a.timing;
    j["ecc"] = a.ecc;
    j["elapsed_ns"] = rep.elapsed_ns;
    j["pipes_discovered"] = rep.pipes.size();
    j["bad_blocks"] = {{"found_by_scan", rep.bad_blocks_found}, {"marked", rep.bad_blocks_truth}};
    j["dies"] = {{"exercised", rep.dies_exercised}, {"skipped", rep.dies_skipped}};
    j["pages"] = {{"programmed", rep.pages_programmed}, {"verified", rep.pages_verified},
                  {"mismatches", rep.mismatches}};
    j["failures"] = {{"program", rep.program_failures}, {"read", rep.read_failures},
                     {"erase", rep.erase_failures}};
    j["corrected_bits"] = rep.corrected_bits;
    auto lat = [](const LatencyStats& l) {
      return json{{"count", l.count}, {"mean_us", l.mean_us()}, {"max_us", l.max_us()}};
    };
    j["latency"] = {{"accept", lat(rep.accept)}, {"program", lat(rep.program)},
                    {"read", lat(rep.read)}, {"erase", lat(rep.erase)}};
    j["controllers"] = json::array();
    for (uint32_t c = 0; c < card.geometry().controllers; ++c) {
      j["controllers"].push_back(HealthJson(card.Health(c)));
    }
    j["ok"] = rep.ok();
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("\nRaw-flash exercise (%s timing)\n", a.timing.c_str());
    std::printf("  attach: %zu pipe(s) discovered through READ ID + ONFI parameter page\n",
                rep.pipes.size());
    if (!a.no_scan) {
      std::printf("  bad-block scan: %llu factory bad blocks found by marker (%llu marked)\n",
                  static_cast<unsigned long long>(rep.bad_blocks_found),
                  static_cast<unsigned long long>(rep.bad_blocks_truth));
    }
    std::printf("  dies exercised %llu (skipped %llu); pages programmed %llu, verified %llu, "
                "mismatches %llu\n",
                static_cast<unsigned long long>(rep.dies_exercised),
                static_cast<unsigned long long>(rep.dies_skipped),
                static_cast<unsigned long long>(rep.pages_programmed),
                static_cast<unsigned long long>(rep.pages_verified),
                static_cast<unsigned long long>(rep.mismatches));
    std::printf("  failures: program %llu, read %llu, erase %llu; ECC corrected bits %llu\n",
                static_cast<unsigned long long>(rep.program_failures),
                static_cast<unsigned long long>(rep.read_failures),
                static_cast<unsigned long long>(rep.erase_failures),
                static_cast<unsigned long long>(rep.corrected_bits));
    std::printf("  %s programmed and %s read in %.3f ms of card time (whole run, with scan and "
                "erases; not a benchmark)\n",
                Bytes(rep.bytes_programmed).c_str(), Bytes(rep.bytes_read).c_str(), secs * 1e3);
    std::printf("  latency mean/max (us): accept %.1f/%.1f  program %.1f/%.1f  read %.1f/%.1f  "
                "erase %.1f/%.1f\n",
                rep.accept.mean_us(), rep.accept.max_us(), rep.program.mean_us(),
                rep.program.max_us(), rep.read.mean_us(), rep.read.max_us(), rep.erase.mean_us(),
                rep.erase.max_us());
    std::printf("  (queue depth: every die loaded at once, so means include queueing)\n\n");
    PrintHealth(card);
    std::printf("\nresult: %s\n", rep.ok() ? "PASS" : "FAIL");
  }
  return rep.ok() ? kExitOk : kExitVerify;
}

// The card as a process of its own: every host gets a port on every pipe; the card's
// power is this process (SIGKILL is a power cut, SIGTERM a clean power-off).
int CmdServe(const Args& a) {
  card::CardServerOptions o;
  o.socket = a.socket;
  auto ecc = model::ParseEccMode(a.ecc);
  if (!ecc.ok()) return Fail(ecc.status());
  o.sim.ecc = *ecc;
  if (a.timing == "null") {
    o.sim.null_timing = true;
  } else if (a.timing != "real" && a.timing != "virtual") {
    return Fail(Status::InvalidArgument(fmt::format("--timing {}: a served card runs real (or null) timing", a.timing)));
  }
  char* end = nullptr;
  const unsigned long m = std::strtoul(a.socket_mode.c_str(), &end, 8);
  if (end == a.socket_mode.c_str() || *end != '\0' || m > 0777) {
    return Fail(Status::InvalidArgument(fmt::format("--socket-mode '{}' is not an octal mode", a.socket_mode)));
  }
  o.socket_mode = static_cast<uint32_t>(m);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  auto server = card::CardServer::Start(a.dir, o);
  if (!server.ok()) return Fail(server.status());
  std::printf("vslflash: card %s served on %s\n", a.dir.c_str(), (*server)->socket_path().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  Logger("card-server")->info("signal {}: closing the card", sig);
  server->reset();
  return kExitOk;
}

struct Command {
  const char* name;
  const char* help;
  int (*run)(const Args&);
  bool needs_dir;
};

constexpr Command kCommands[] = {
    {"profiles", "List the built-in card profiles", &CmdProfiles, false},
    {"create", "Create a new simulated card in DIR", &CmdCreate, true},
    {"info", "Show a card's identity, geometry and health", &CmdInfo, true},
    {"exercise", "Attach, scan bad blocks, write and verify every die", &CmdExercise, true},
    {"serve", "Run the card for several hosts on DIR/card.sock (vsld --card shared:DIR)", &CmdServe, true},
};

}  // namespace
}  // namespace vsl::tools

int main(int argc, char** argv) {
  using namespace vsl::tools;
  CLI::App app{"vslflash: simulated flash cards at the raw-flash level"};
  app.require_subcommand(1);
  Args args;
  std::vector<std::pair<CLI::App*, const Command*>> subs;
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    if (c.needs_dir) sub->add_option("dir", args.dir, "Card directory")->required();
    if (std::string(c.name) == "create") {
      sub->add_option("--profile", args.profile, "Profile (see `vslflash profiles`)")
          ->capture_default_str();
      sub->add_option("--blocks", args.blocks, "Blocks per die (0 = the profile's)");
      sub->add_option("--serial", args.serial, "Serial number (default: from the seed)");
      sub->add_option("--seed", args.seed, "Seed for card id and factory bad blocks");
    }
    if (std::string(c.name) == "exercise") {
      sub->add_option("--timing", args.timing, "virtual | real | null")->capture_default_str();
      sub->add_option("--pages", args.pages, "Pages per die")->capture_default_str();
      sub->add_option("--seed", args.seed, "Seed for data and bit errors");
      sub->add_flag("--no-scan", args.no_scan, "Skip the bad-block scan");
      sub->add_option("--ecc", args.ecc, "statistical | bit-exact (the controller's BCH codec on every read)")
          ->capture_default_str();
    }
    if (std::string(c.name) == "serve") {
      sub->add_option("--socket", args.socket, "socket path (default DIR/card.sock)");
      sub->add_option("--socket-mode", args.socket_mode, "its permissions, octal")->capture_default_str();
      sub->add_option("--timing", args.timing, "real (default) or null (zero-time)");
      sub->add_option("--ecc", args.ecc, "statistical | bit-exact")->capture_default_str();
    }
    if (std::string(c.name) == "info" || std::string(c.name) == "exercise") {
      sub->add_flag("--json", args.json, "Machine-readable output");
    }
    subs.push_back({sub, &c});
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  for (auto& [sub, cmd] : subs) {
    if (sub->parsed()) return cmd->run(args);
  }
  return kExitUsage;
}
