#include "vsl/core/log.h"

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace vsl {
namespace {

std::mutex g_mu;
bool g_level_set = false;  // guarded by g_mu
spdlog::level::level_enum g_level = spdlog::level::warn;  // guarded by g_mu

spdlog::level::level_enum DefaultLevel() {
  const char* env = std::getenv("VSL_LOG");
  if (env == nullptr || *env == '\0') return spdlog::level::warn;
  return spdlog::level::from_str(env);
}

spdlog::sink_ptr Sink() {
  static spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  return sink;
}

}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto existing = spdlog::get(component);
  if (existing) return existing;
  auto logger = std::make_shared<spdlog::logger>(component, Sink());
  logger->set_level(g_level_set ? g_level : DefaultLevel());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  spdlog::register_logger(logger);
  return logger;
}

void SetLogLevel(spdlog::level::level_enum level) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_level_set = true;
  g_level = level;
  spdlog::apply_all([level](const std::shared_ptr<spdlog::logger>& l) { l->set_level(level); });
  spdlog::set_level(level);
}

}  // namespace vsl
