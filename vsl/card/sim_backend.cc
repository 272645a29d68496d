#include "vsl/card/sim_backend.h"

#include <fstream>

#include <fmt/format.h>

#include "vsl/simcard/sim_card.h"

namespace vsl::card {
namespace {

class SimBackend final : public CardBackend {
 public:
  SimBackend(std::string dir, const model::SimCardOptions& o, simcard::SimCard::Probed probed)
      : dir_(std::move(dir)), opts_(o), probed_(std::move(probed)) {}

  std::string kind() const override { return "sim"; }
  std::string spec() const override { return "sim:" + dir_; }
  const nand::Geometry& geometry() const override { return sim_ ? sim_->geometry() : probed_.geometry; }
  const model::Timing& timing() const override { return sim_->timing(); }
  const model::Power& power_model() const override { return sim_->profile().power; }
  const model::Reliability& reliability() const override { return sim_->profile().reliability; }
  std::string ecc_mode() const override { return simcard::EccModeName(sim_->ecc_mode()); }
  bool zero_time() const override { return opts_.null_timing; }

  Status Start(const std::vector<Clock*>& pipe_clocks, PipeRunner&) override {
    model::SimCardOptions so = opts_;
    so.pipe_clocks.clear();
    // One clock for every pipe: the card runs on it alone (SimCardOptions::pipe_clocks).
    bool shared = true;
    for (Clock* c : pipe_clocks) shared = shared && c == pipe_clocks[0];
    if (!shared) so.pipe_clocks = pipe_clocks;
    VSL_ASSIGN_OR_RETURN(sim_, simcard::SimCard::Open(dir_, *pipe_clocks.at(0), so));
    return Status::Ok();
  }
  void Stop() override {
    if (sim_) sim_->SaveLifetime();
  }
  nand::FlashPipe& pipe(uint32_t index) override { return sim_->pipe(index); }
  Result<std::unique_ptr<nand::FlashPipe>> NewPort(uint32_t index) override {
    if (index >= sim_->pipe_count()) return Status::InvalidArgument(fmt::format("no pipe {}", index));
    return sim_->NewPort(index);
  }
  Status RebindPipe(uint32_t index, Clock& clock) override { return sim_->RebindPipe(index, clock); }
  uint8_t pipe_mode(uint32_t c) const override {
    return sim_ ? sim_->pipe_mode(c) : probed_.pipe_modes.at(c);
  }
  Status SetPipeMode(uint32_t c, uint8_t mode) override { return sim_->SetPipeMode(c, mode); }
  nand::PlpState plp_state() const override { return sim_->plp_state(); }

  ControllerIdentity identity(uint32_t c) const override {
    const auto& id = sim_->image(c).identity();
    return {id.serial, id.model, id.profile, sim_->firmware_version(c), "simulated card (vsl/simcard)"};
  }
  Status UpdateFirmware(uint32_t c, const std::vector<uint8_t>& image) override {
    return sim_->UpdateFirmware(c, image);
  }

  model::PowerReading ReadPower(uint32_t c) const override { return sim_->ReadPower(c); }
  model::Environment environment() const override { return sim_->environment(); }
  Status SetEnvironment(const model::Environment& env) override {
    sim_->SetEnvironment(env);
    return Status::Ok();
  }
  void SetLowPower(uint32_t c, bool on) override { sim_->SetLowPower(c, on); }

  model::Lifetime lifetime(uint32_t c) const override { return sim_->lifetime(c); }
  void AccountHostIo(uint32_t c, uint64_t r, uint64_t w) override { sim_->AccountHostIo(c, r, w); }
  void CountThermalShutdown(uint32_t c) override { sim_->CountThermalShutdown(c); }
  void SaveLifetime() override { sim_->SaveLifetime(); }
  PowerCycles power_cycles(uint32_t c) const override {
    const auto& st = sim_->image(c).state();
    return {st.power_on_count, st.unsafe_power_offs};
  }

  model::DieCounters PipeCounters(uint32_t p) const override { return sim_->PipeCounters(p); }
  model::ControllerHealth Health(uint32_t c, const std::vector<model::DieCounters>& per_pipe) const override {
    return sim_->Health(c, per_pipe);
  }
  Status InjectDieFailure(uint32_t p, uint32_t die) override {
    const auto& g = sim_->geometry();
    if (p >= sim_->pipe_count() || die >= g.dies_per_pipe()) {
      return Status::InvalidArgument(fmt::format("no die {} on pipe {}", die, p));
    }
    sim_->InjectDieFailure(p, die);
    return Status::Ok();
  }

  simcard::SimCard* sim() { return sim_.get(); }

 private:
  std::string dir_;
  model::SimCardOptions opts_;
  simcard::SimCard::Probed probed_;
  std::unique_ptr<simcard::SimCard> sim_;
};

}  // namespace

Status CardBackend::UpdateFirmware(uint32_t, const std::vector<uint8_t>&) {
  return Status::NotSupported(fmt::format("the {} backend cannot load controller firmware", kind()));
}

Result<std::unique_ptr<nand::FlashPipe>> CardBackend::NewPort(uint32_t) {
  return Status::NotSupported(fmt::format("the {} backend offers one host port per pipe", kind()));
}

Status CardBackend::InjectDieFailure(uint32_t, uint32_t) {
  return Status::NotSupported(fmt::format("the {} backend has no fault path to kill a die", kind()));
}

std::string CardSpec::ToString() const {
  std::string s = kind + ":" + path;
  if (!extra.empty()) s += ":" + extra;
  return s;
}

Result<CardSpec> ParseCardSpec(std::string_view spec) {
  if (spec.empty()) return Status::InvalidArgument("empty card spec");
  CardSpec s;
  const auto colon = spec.find(':');
  const std::string_view head = colon == std::string_view::npos ? std::string_view{} : spec.substr(0, colon);
  if (head == "sim" || head == "rtl" || head == "kernel" || head == "shared") {
    s.kind = std::string(head);
    s.path = std::string(spec.substr(colon + 1));
  } else if (head == "xrt") {
    s.kind = "xrt";
    const std::string_view rest = spec.substr(colon + 1);
    const auto c2 = rest.find(':');
    s.path = std::string(rest.substr(0, c2));
    if (c2 != std::string_view::npos) s.extra = std::string(rest.substr(c2 + 1));
  } else {
    s.kind = "sim";  // a bare directory (which may itself hold a colon)
    s.path = std::string(spec);
  }
  if (s.path.empty()) return Status::InvalidArgument(fmt::format("card spec '{}' names no {}", spec,
                                                               s.kind == "xrt" ? "device" : "directory"));
  return s;
}

Result<std::unique_ptr<CardBackend>> MakeSimBackend(const std::string& dir, const model::SimCardOptions& opts) {
  // A co-simulated card keeps its controllers' images in the same format, marked with its
  // backend: it must not be opened as a simulated card.
  if (std::ifstream m(dir + "/BACKEND"); m) {
    std::string kind;
    m >> kind;
    if (!kind.empty() && kind != "sim") {
      return Status::InvalidArgument(fmt::format("card {} is for the {} backend: open it as {}:{}", dir, kind, kind, dir));
    }
  }
  VSL_ASSIGN_OR_RETURN(simcard::SimCard::Probed probed, simcard::SimCard::Probe(dir));
  return std::unique_ptr<CardBackend>(new SimBackend(dir, opts, std::move(probed)));
}

simcard::SimCard* SimCardOf(CardBackend& backend) {
  auto* s = dynamic_cast<SimBackend*>(&backend);
  return s ? s->sim() : nullptr;
}

}  // namespace vsl::card
