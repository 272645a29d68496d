// A markdown report that bench tools print as they go and can also write to a file.
#pragma once

#include <cstdio>
#include <string>

namespace vsl::bench {

class Report {
 public:
  // Prints `s` (and a newline) at once, so long runs show progress, and keeps it.
  void Line(const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
    text_ += s + "\n";
  }
  // Writes everything printed so far to `path` (nothing when empty). False on error.
  bool WriteTo(const std::string& path) const {
    if (path.empty()) return true;
    FILE* fp = std::fopen(path.c_str(), "w");
    if (fp == nullptr) return false;
    std::fputs(text_.c_str(), fp);
    return std::fclose(fp) == 0;
  }

 private:
  std::string text_;
};

}  // namespace vsl::bench
