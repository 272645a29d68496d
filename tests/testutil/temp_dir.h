// A directory under $TMPDIR (default /tmp) removed with everything in it on destruction.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace vsl::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/openvsl-test-XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace vsl::testing
