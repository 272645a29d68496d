// Structured logging through spdlog. One named logger per component ("simcard",
// "engine", ...), all sharing one stderr sink and one level. The level comes from the
// VSL_LOG environment variable (trace, debug, info, warn, error, off; default warn) or
// SetLogLevel. Messages carry key=value fields so logs can be grepped and parsed.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace vsl {

// The logger for `component`, created on first use. Thread-safe.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);
void SetLogLevel(spdlog::level::level_enum level);

}  // namespace vsl
