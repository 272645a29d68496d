// vsld's ublk front end: every export of the catalog as /dev/ublkbN, where the kernel has
// ublk. The ids are recorded in a state file (next to the control socket) so that after a
// crash of vsld the next one takes the waiting devices over (user recovery) instead of
// adding new ones; a clean stop deletes the devices and the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vsl/nbd/export.h"
#include "vsl/ublk/ublk.h"

namespace vsl::daemon {

class UblkFrontEnd {
 public:
  // NotSupported (with the reason) when the kernel has no ublk; other errors when a
  // device cannot be set up.
  static Result<std::unique_ptr<UblkFrontEnd>> Start(nbd::ExportCatalog& catalog, const std::string& state_path,
                                                     const std::string& control = ublk::kControlPath);
  // `vsld --ublk-release`: when vsld died and is not coming back, deletes the devices the
  // state file names (their held I/O fails with EIO) and removes the file. Returns how many
  // were released; devices a live server runs are left alone and named in the log.
  static Result<int> Release(const std::string& state_path, const std::string& control = ublk::kControlPath);
  ~UblkFrontEnd();
  nlohmann::json Status() const;
  // Why the device serving export `name` is held ("" when it is not, or there is none).
  std::string InUse(const std::string& name) const;
  // After a format: the devices follow the catalog again. A device whose export now has
  // another size or sector size is deleted and made again in the new shape; an export
  // without a device (a LUN formatted for the first time) gets one; a device whose export
  // is gone (a pipe-mode change) is deleted. Failures are logged; NBD still serves.
  void Refresh();

 private:
  UblkFrontEnd() = default;
  void WriteState() const;
  // Makes devices_ follow the catalog (Refresh). With `recover` (the state file's ids, at
  // start) a new device first tries to take over the one a dead vsld left, and a device
  // that cannot be set up is returned as an error (later, it is logged and skipped).
  vsl::Status Reconcile(const nlohmann::json* recover);
  nbd::ExportCatalog* catalog_ = nullptr;
  std::string control_;
  std::string state_path_;
  std::vector<std::pair<std::string, std::unique_ptr<ublk::Device>>> devices_;
};

}  // namespace vsl::daemon
