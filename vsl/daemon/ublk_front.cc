#include "vsl/daemon/ublk_front.h"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "vsl/core/log.h"

namespace vsl::daemon {

Result<std::unique_ptr<UblkFrontEnd>> UblkFrontEnd::Start(nbd::ExportCatalog& catalog, const std::string& state_path,
                                                          const std::string& control) {
  if (vsl::Status s = ublk::Probe(control); !s.ok()) return s;
  std::unique_ptr<UblkFrontEnd> f(new UblkFrontEnd());
  f->state_path_ = state_path;
  f->catalog_ = &catalog;
  f->control_ = control;
  nlohmann::json old = nlohmann::json::object();
  if (std::ifstream in(state_path); in) {
    try {
      old = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      Logger("ublk")->warn("{}: not JSON: ignored (devices are added afresh)", state_path);
    }
  }
  if (vsl::Status st = f->Reconcile(&old); !st.ok()) return st;
  return f;
}

Result<int> UblkFrontEnd::Release(const std::string& state_path, const std::string& control) {
  if (vsl::Status s = ublk::Probe(control); !s.ok()) return s;
  std::ifstream in(state_path);
  if (!in) return vsl::Status::NotFound(fmt::format("{}: no ublk devices recorded (vsld stopped cleanly?)", state_path));
  nlohmann::json old;
  try {
    old = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return vsl::Status::Corruption(fmt::format("{}: not JSON", state_path));
  }
  if (!old.is_object()) return vsl::Status::Corruption(fmt::format("{}: not a JSON object", state_path));
  int released = 0;
  bool kept = false;
  ublk::Device::Options o;
  o.control = control;
  for (const auto& [name, id] : old.items()) {
    if (!id.is_number_integer()) continue;
    vsl::Status s = ublk::Device::Release(id.get<int>(), o);
    if (s.ok()) {
      ++released;
      Logger("ublk")->info("{}: /dev/ublkb{} released", name, id.get<int>());
    } else if (s.code() == vsl::StatusCode::kNotFound) {
      Logger("ublk")->info("{}: {}", name, s.message());
    } else {
      kept = true;
      Logger("ublk")->warn("{}: {}", name, s.ToString());
    }
  }
  if (!kept) ::unlink(state_path.c_str());
  return released;
}

void UblkFrontEnd::WriteState() const {
  nlohmann::json now = nlohmann::json::object();
  for (const auto& [name, d] : devices_) now[name] = d->id();
  std::ofstream(state_path_) << now.dump() << "\n";
}

std::string UblkFrontEnd::InUse(const std::string& name) const {
  for (const auto& [n, d] : devices_) {
    if (n == name) return d->InUse();
  }
  return "";
}

vsl::Status UblkFrontEnd::Reconcile(const nlohmann::json* recover) {
  std::vector<std::pair<std::string, std::unique_ptr<ublk::Device>>> now;
  auto take = [this](const std::string& name) {
    for (auto& [n, d] : devices_) {
      if (n == name && d) return std::move(d);
    }
    return std::unique_ptr<ublk::Device>();
  };
  for (const nbd::ExportInfo& info : catalog_->List()) {
    std::unique_ptr<ublk::Device> d = take(info.name);
    auto e = catalog_->Open(info.name);
    if (!e.ok()) {
      if (d) {
        Logger("ublk")->warn("{}: {}; {} stays as it was", info.name, e.status().message(), d->block_path());
        now.emplace_back(info.name, std::move(d));
      } else {
        Logger("ublk")->warn("{}: not served over ublk: {}", info.name, e.status().message());
      }
      continue;
    }
    if (d && (*e)->size_bytes() == d->size_bytes() && (*e)->block_bytes() == d->block_bytes()) {
      now.emplace_back(info.name, std::move(d));  // same shape: the device goes on serving
      continue;
    }
    if (d) {
      Logger("ublk")->info("{}: reformatted ({} -> {} bytes, {} -> {}-byte blocks): making {} again", info.name,
                           d->size_bytes(), (*e)->size_bytes(), d->block_bytes(), (*e)->block_bytes(),
                           d->block_path());
      d.reset();
    }
    ublk::Device::Options o;
    o.control = control_;
    if (recover != nullptr && recover->is_object() && recover->contains(info.name) &&
        (*recover)[info.name].is_number_integer()) {
      o.recover_id = (*recover)[info.name].get<int>();
    }
    auto nd = ublk::Device::Start(std::move(e).value(), o, info.name);
    if (!nd.ok()) {
      vsl::Status st = nd.status().WithContext(fmt::format("ublk device for {}", info.name));
      if (recover != nullptr) return st;  // at start: the caller says so, and NBD alone serves
      Logger("ublk")->error("{}; served over NBD only", st.ToString());
      continue;
    }
    now.emplace_back(info.name, std::move(nd).value());
  }
  devices_.swap(now);  // devices of exports no longer listed (a mode change) are deleted here
  now.clear();
  WriteState();
  return vsl::Status::Ok();
}

void UblkFrontEnd::Refresh() { (void)Reconcile(nullptr); }

UblkFrontEnd::~UblkFrontEnd() {
  devices_.clear();  // each stops and deletes its block device
  ::unlink(state_path_.c_str());
}

nlohmann::json UblkFrontEnd::Status() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [name, d] : devices_) {
    j.push_back({{"export", name}, {"device", d->block_path()}, {"recovered", d->recovered()}});
  }
  return j;
}

}  // namespace vsl::daemon
