// The monitor's parts without vsld: the Prometheus exposition (checked by promtool where
// it is installed), the history rings and their file, the lifetime prediction, alert
// evaluation and the tracker with its hook, and the HTTP endpoint's address rules.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "vsl/core/latency_histogram.h"
#include "vsl/monitor/alerts.h"
#include "vsl/monitor/history.h"
#include "vsl/monitor/http.h"
#include "vsl/monitor/metrics.h"

namespace vsl::monitor {
namespace {

using json = nlohmann::json;

std::string TempDir() {
  char t[] = "/tmp/vsl-monitor-XXXXXX";
  const char* d = mkdtemp(t);
  EXPECT_NE(d, nullptr);
  return d;
}

std::string ReadFile(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A status reply as vsld gives it (status --all), trimmed to what the monitor reads.
json FakeStatus(double temp = 40, uint32_t failed_dies = 0, bool reserve_warning = false,
                uint32_t rebuild = 0, double governor_waits = 0) {
  LatencyHistogram h;
  h.Record(30 * kUs);
  h.Record(800 * kUs);
  h.Record(3 * kMs);
  json buckets = json::array();
  uint64_t cum = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBoundsNs.size(); ++i) {
    cum += h.bucket(i);
    buckets.push_back({LatencyHistogram::kBoundsNs[i] / 1e9, cum});
  }
  const json hist{{"buckets", buckets}, {"count", h.count()}, {"sum_s", h.sum_ns() / 1e9}};
  json lun{{"name", "lun0"},
           {"index", 0},
           {"controller", 0},
           {"state", "online"},
           {"health", "healthy"},
           {"size_bytes", 1 << 30},
           {"mapped_bytes", 1 << 20},
           {"reserve", {{"percent", reserve_warning ? 5.0 : 100.0}, {"warning", reserve_warning},
                        {"warn_at_percent", 10.0}, {"free_lebs", 12}, {"spare_bytes", 1000}}},
           {"flashback", {{"enabled", true}, {"substitution_active", failed_dies > 0},
                          {"failed_dies", failed_dies ? json::array({3}) : json::array()},
                          {"rebuild_lebs_left", rebuild}, {"lost_sectors", 0}}},
           {"since_attach", {{"host_read_bytes", 4096}, {"host_write_bytes", 8192},
                             {"physical_write_bytes", 16384}, {"waf", 2.0}}},
           {"io", {{"reads", 1}, {"writes", 2}, {"trims", 0}, {"atomic_batches", 0},
                   {"read_latency", hist}, {"write_latency", hist}, {"write_stalls", 0},
                   {"gc_write_bytes", 0}, {"victims", 0}, {"wear_moves", 0}}},
           {"media", {{"corrected_bits", 12}, {"corrected_commands", 3}, {"uncorrectable", 0},
                      {"die_timeouts", 0}, {"program_failures", 0}, {"erase_failures", 0}}},
           {"erase_count", {{"min", 0}, {"max", 3}}},
           {"attach", {{"from_checkpoint", true}, {"ms", 12.5}}},
           {"host_ram_bytes", 65536}};
  json card{{"index", 0},
            {"serial", "OV\"1\\2"},  // quotes and backslashes must be escaped in labels
            {"model", "OVSL-SLC-16G"},
            {"temperature_c", temp},
            {"power", {{"avg_w", 20.5}, {"peak_w", 22.0}, {"limit_w", 24.75},
                       {"override", {{"on", false}, {"watts", 0}}},
                       {"governor", {{"write_waits", governor_waits}, {"write_wait_s", 0.5}}},
                       {"thermal", {{"state", temp >= 85 ? "shutdown" : temp >= 78 ? "throttle" : "normal"},
                                    {"throttle_c", 78.0}, {"shutdown_c", 85.0}, {"write_share", 0.5}}},
                       {"controllers", {{{"controller", 0}, {"temperature_c", temp}, {"energy_j", 100.0}}}}}},
            {"health", {{"state", "healthy"}, {"reserve_percent", reserve_warning ? 5.0 : 100.0},
                        {"reserve_warn_at_percent", 10.0}, {"endurance_used_percent", 1.5},
                        {"rated_pb_written", 0.26},
                        {"lifetime", {{"host_write_bytes", 100}, {"physical_write_bytes", 200}}},
                        {"smart", {{"media_errors", 0}, {"power_on_hours", 2.0}}}}},
            {"controllers", {{{"index", 0}, {"dies", 48}, {"failed_dies", failed_dies}, {"plp", "healthy"},
                              {"erase_count", {{"mean", 1.5}, {"max", 3}}}}}},
            {"luns", {lun}}};
  return json{{"pid", 1}, {"cards", {card}}, {"front_ends", {{"nbd", {{"connections", 2}}}}}};
}

TEST(MetricsTest, EveryFamilyHasOneHelpAndTypeAndHistogramsAreConsistent) {
  const std::string m = RenderMetrics(FakeStatus(), json{{"alerts", json::array()}, {"samples", 3}});
  std::istringstream in(m);
  std::string line;
  std::map<std::string, int> help, type;
  double inf = -1, count = -2, last_bucket = -1;
  bool monotonic = true;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) ++help[line.substr(7, line.find(' ', 7) - 7)];
    if (line.rfind("# TYPE ", 0) == 0) ++type[line.substr(7, line.find(' ', 7) - 7)];
    if (line.rfind("vsl_lun_write_latency_seconds_bucket", 0) == 0) {
      const double v = std::stod(line.substr(line.rfind(' ') + 1));
      monotonic = monotonic && v >= last_bucket;
      last_bucket = v;
      if (line.find("le=\"+Inf\"") != std::string::npos) inf = v;
    }
    if (line.rfind("vsl_lun_write_latency_seconds_count", 0) == 0) count = std::stod(line.substr(line.rfind(' ') + 1));
  }
  for (const auto& [name, n] : help) {
    EXPECT_EQ(n, 1) << name;
    EXPECT_EQ(type[name], 1) << name;
  }
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(inf, 3);
  EXPECT_EQ(count, 3);
  EXPECT_NE(m.find("vsl_lun_write_latency_seconds_bucket{card=\"0\",lun=\"lun0\",le=\"0.001\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("serial=\"OV\\\"1\\\\2\""), std::string::npos);
  EXPECT_NE(m.find("vsl_card_temperature_celsius{card=\"0\"} 40"), std::string::npos);
  EXPECT_NE(m.find("vsl_lun_ecc_corrected_bitflips_total{card=\"0\",lun=\"lun0\"} 12"), std::string::npos);
  EXPECT_NE(m.find("vsl_nbd_connections 2"), std::string::npos);
}

TEST(MetricsTest, PromtoolFindsNothingToCriticise) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool is not installed (Debian: prometheus)";
  const std::string dir = TempDir();
  json mon{{"alerts", {{{"name", "die_failed"}, {"severity", "critical"}, {"card", 0}, {"message", "x"}}}},
           {"predictions", {{{"card", 0}, {"percent_remaining", 98.5}, {"days", 400.0}, {"end_of_life_unix", 2e9}}}},
           {"raised_total", {{"die_failed", 1}}},
           {"samples", 7}};
  std::ofstream(dir + "/m.txt") << RenderMetrics(FakeStatus(90, 1, true, 4), mon);
  const std::string cmd = "promtool check metrics < " + dir + "/m.txt > " + dir + "/out.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << ReadFile(dir + "/out.txt");
  EXPECT_EQ(ReadFile(dir + "/out.txt"), "");
  std::system(("rm -rf " + dir).c_str());
}

Sample At(double t, double used = 1.0, double wbps = 100) {
  Sample s;
  s.t = t;
  s.write_bps = wbps;
  s.power_w = 20;
  s.temp_c = 40 + (static_cast<int>(t) % 7);
  s.endurance_used_pct = used;
  return s;
}

TEST(HistoryTest, RingsAreBoundedAndTheCoarseRingAveragesItsPeriod) {
  History h("", {/*coarse_period_s=*/60, /*fine_capacity=*/10, /*coarse_capacity=*/3});
  for (int i = 1; i <= 400; ++i) h.Add(At(1000 + 10 * i, 1.0, i));
  EXPECT_EQ(h.fine_size(), 10u);
  EXPECT_EQ(h.coarse_size(), 3u);
  const auto f = h.Fine();
  EXPECT_DOUBLE_EQ(f.back().t, 1000 + 4000);
  EXPECT_DOUBLE_EQ(f.front().t, 1000 + 3910);
  const auto c = h.Coarse();
  // Each coarse sample averages the six fine ones of its minute, closed by the first
  // sample of the next: [4920, 4980) holds rates 392..397 -> 394.5, stamped 4970.
  EXPECT_DOUBLE_EQ(c.back().t, 4970);
  EXPECT_DOUBLE_EQ(c.back().write_bps, 394.5);
  EXPECT_DOUBLE_EQ(c.back().temp_c, 46);  // the minute's hottest
  EXPECT_EQ(h.Fine(4950).size(), 5u);  // newer than 4950
  EXPECT_EQ(h.Fine(0, 2).size(), 2u);  // the newest two
  EXPECT_DOUBLE_EQ(h.Fine(0, 2).back().t, 5000);
}

TEST(HistoryTest, AFileSurvivesARestartAndBadLinesAreSkipped) {
  const std::string dir = TempDir();
  const std::string path = dir + "/monitor-history.jsonl";
  {
    History h(path, {60, 100, 100});
    for (int i = 1; i <= 20; ++i) h.Add(At(1000 + 10 * i));
  }
  {
    std::ofstream out(path, std::ios::app);
    out << "{\"tier\": \"fine\", \"t\": \"not a number\"}\n"
        << "garbage\n"
        << "{\"tier\": \"fine\", \"t\": 1150}\n"  // older than the last: not ours
        << "{\"tier\": \"fi";                      // torn by a crash
  }
  History h(path, {60, 100, 100});
  EXPECT_EQ(h.Load(), 4u);
  EXPECT_EQ(h.fine_size(), 20u);
  EXPECT_EQ(h.coarse_size(), 4u);  // minutes [960,1020) .. [1140,1200), closed by 1020 .. 1200
  EXPECT_DOUBLE_EQ(h.Fine().back().t, 1200);
  // The file was rewritten with what loaded: a second load skips nothing.
  History again(path, {60, 100, 100});
  EXPECT_EQ(again.Load(), 0u);
  EXPECT_EQ(again.fine_size(), 20u);
  std::system(("rm -rf " + dir).c_str());
}

TEST(HistoryTest, TheFileIsCompactedToTheRings) {
  const std::string dir = TempDir();
  const std::string path = dir + "/h.jsonl";
  History h(path, {1e9, 5, 5});
  for (int i = 1; i <= 100; ++i) h.Add(At(i));
  std::ifstream in(path);
  std::size_t lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_LE(lines, 2u * (5 + 5) + 1);
  History back(path, {1e9, 5, 5});
  EXPECT_EQ(back.Load(), 0u);
  EXPECT_EQ(back.fine_size(), 5u);
  EXPECT_DOUBLE_EQ(back.Fine().back().t, 100);
  std::system(("rm -rf " + dir).c_str());
}

TEST(PredictTest, WearOverTheHistoryIsExtrapolatedElseTheWriteRate) {
  History h("", {3600, 10000, 100});
  // 2% of the rating used over two days: 1% a day, 96% left -> 96 days.
  const double day = 86400;
  for (int i = 0; i <= 48; ++i) h.Add(At(1e6 + i * 3600, 2.0 + 2.0 * i / 48));
  const Prediction p = Predict(h, 4.0, 1e6 + 2 * day, /*status_days=*/500);
  EXPECT_EQ(p.basis, "history");
  EXPECT_NEAR(p.days, 96, 0.5);  // the fine ring reaches a day back: 1%/day either way
  EXPECT_NEAR(p.end_of_life_unix, 1e6 + 2 * day + 96 * day, day);
  EXPECT_DOUBLE_EQ(p.percent_remaining, 96);
  // No wear in the window: the status's own figure.
  History flat("", {3600, 10000, 100});
  for (int i = 0; i <= 10; ++i) flat.Add(At(1e6 + i * 3600, 2.0));
  const Prediction q = Predict(flat, 2.0, 1e6 + 10 * 3600, 700);
  EXPECT_EQ(q.basis, "write-rate");
  EXPECT_DOUBLE_EQ(q.days, 700);
  // Nothing at all: no prediction.
  History none("", {});
  EXPECT_LT(Predict(none, 0, 1e6, -1).days, 0);
}

std::set<std::string> Names(const std::vector<Alert>& v) {
  std::set<std::string> s;
  for (const Alert& a : v) s.insert(a.name);
  return s;
}

TEST(AlertsTest, EachConditionRaisesItsAlert) {
  AlertConfig cfg;
  std::map<uint32_t, double> waits;
  EXPECT_TRUE(Evaluate(FakeStatus(), {}, cfg, waits).empty());
  EXPECT_EQ(Names(Evaluate(FakeStatus(74), {}, cfg, waits)), (std::set<std::string>{"temperature_warning"}));
  EXPECT_EQ(Names(Evaluate(FakeStatus(80), {}, cfg, waits)),
            (std::set<std::string>{"temperature_warning", "thermal_throttle"}));
  EXPECT_EQ(Names(Evaluate(FakeStatus(90), {}, cfg, waits)), (std::set<std::string>{"temperature_shutdown"}));
  EXPECT_EQ(Names(Evaluate(FakeStatus(40, 1, true, 5), {}, cfg, waits)),
            (std::set<std::string>{"die_failed", "reserve_low", "rebuild_running"}));
  cfg.temp_warn_c = 35;
  EXPECT_EQ(Names(Evaluate(FakeStatus(40), {}, cfg, waits)), (std::set<std::string>{"temperature_warning"}));
  cfg.temp_warn_c = 0;
  // The governor's waits: only growth since the last evaluation counts.
  waits.clear();
  EXPECT_TRUE(Evaluate(FakeStatus(40, 0, false, 0, 10), {}, cfg, waits).empty());
  EXPECT_EQ(Names(Evaluate(FakeStatus(40, 0, false, 0, 25), {}, cfg, waits)), (std::set<std::string>{"power_limited"}));
  EXPECT_TRUE(Evaluate(FakeStatus(40, 0, false, 0, 25), {}, cfg, waits).empty());
  Prediction soon;
  soon.days = 12;
  soon.percent_remaining = 3;
  EXPECT_EQ(Names(Evaluate(FakeStatus(), {soon}, cfg, waits)), (std::set<std::string>{"end_of_life"}));
  soon.days = 45;
  EXPECT_TRUE(Evaluate(FakeStatus(), {soon}, cfg, waits).empty());
}

TEST(AlertsTest, TheTrackerLogsRaisesAndClearsOnceAndRunsTheHook) {
  const std::string dir = TempDir();
  AlertConfig cfg;
  cfg.hook = "echo \"$VSL_ALERT $VSL_ALERT_STATE $VSL_ALERT_SEVERITY card=$VSL_ALERT_CARD lun=$VSL_ALERT_LUN\" >> " + dir +
             "/hook.log";
  {
    AlertTracker t(cfg);
    std::map<uint32_t, double> waits;
    t.Update(Evaluate(FakeStatus(40, 1), {}, cfg, waits), 100);
    t.Update(Evaluate(FakeStatus(40, 1, true), {}, cfg, waits), 110);  // die_failed stays
    ASSERT_EQ(t.active().size(), 2u);
    for (const Alert& a : t.active()) EXPECT_DOUBLE_EQ(a.since, a.name == "die_failed" ? 100 : 110);
    t.Update({}, 120);
    EXPECT_TRUE(t.active().empty());
    EXPECT_EQ(t.raised_total().at("die_failed"), 1u);
    EXPECT_EQ(t.raised_total().at("reserve_low"), 1u);
  }  // the destructor waits for the hooks
  // Hooks run in the background, concurrently: their lines may land in any order.
  std::istringstream in(ReadFile(dir + "/hook.log"));
  std::multiset<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.insert(l);
  EXPECT_EQ(lines, (std::multiset<std::string>{"die_failed raised critical card=0 lun=",
                                               "reserve_low raised warning card=0 lun=lun0",
                                               "die_failed cleared critical card=0 lun=",
                                               "reserve_low cleared warning card=0 lun=lun0"}));
  std::system(("rm -rf " + dir).c_str());
}

TEST(HttpTest, AddressesParseAndOnlyLoopbackIsLoopback) {
  EXPECT_EQ(*ParseListen("9110"), std::make_pair(std::string("127.0.0.1"), 9110));
  EXPECT_EQ(*ParseListen("0.0.0.0:80"), std::make_pair(std::string("0.0.0.0"), 80));
  EXPECT_EQ(*ParseListen("[::1]:0"), std::make_pair(std::string("::1"), 0));
  EXPECT_FALSE(ParseListen("[::1]").ok());
  EXPECT_FALSE(ParseListen("host:").ok());
  EXPECT_FALSE(ParseListen("70000").ok());
  EXPECT_FALSE(ParseListen("x:y").ok());
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.8.9.1"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("10.0.0.1"));
  EXPECT_FALSE(IsLoopback("::"));
  EXPECT_FALSE(IsLoopback("example.com"));
}

}  // namespace
}  // namespace vsl::monitor
