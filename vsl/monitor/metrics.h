// The Prometheus text exposition (format 0.0.4) of vsld's state: what `/metrics` serves
// (docs/monitoring.md lists every family). Built from the control protocol's `status`
// reply with "all" (the same data vslctl shows, so the two never disagree) and the
// monitor's own state (alerts, lifetime predictions).
//
// Naming follows Prometheus conventions: a `vsl_` prefix, base units (seconds, bytes,
// joules, watts, celsius, ratios 0..1), `_total` for counters, one HELP and TYPE line per
// family, labels card (index), controller, lun (name). Counters kept by the FTL restart
// from zero when a LUN re-attaches; rate() treats that as a counter reset.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vsl::monitor {

// `status`: the status command's result (with "all"); `mon`: Monitor::StateJson() (alerts
// and predictions; may be null).
std::string RenderMetrics(const nlohmann::json& status, const nlohmann::json& mon);

// Escapes a label value for the exposition (backslash, double quote, newline).
std::string EscapeLabel(const std::string& v);

}  // namespace vsl::monitor
