#pragma once

// Names the calling thread, as `top -H`, `perf`, gdb and /proc/<pid>/task/*/comm show it:
// "vsl-pipe0" for an engine, "vsl-sdk-lun0" for an attached session. Linux keeps 15
// bytes; a longer name keeps its first 15. C++17-clean (shared with the testbench).

#include <pthread.h>

#include <string>

namespace vsl {

inline void SetThreadName(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace vsl
