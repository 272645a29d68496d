// sqlite_bench: SQLite transaction rate on the SDK's VFS (each commit one atomic write,
// journal in memory) or on an ordinary file (SQLite's default VFS; rollback journal or
// WAL, synchronous=FULL), so the two can run on the same LUN (bench/sqlite_bench.sh puts
// ext4 on it through NBD for the file runs).
//
//   sqlite_bench --card DIR [--lun N] [--trim-first]   VFS, in-process
//   sqlite_bench --attach SOCKET [--lun lun0]           VFS, attached to vsld
//   sqlite_bench --file PATH --journal delete|wal       default VFS
//   --txns N --rows R (rows per transaction, ~120 B each, one index)  --json
//
// Prints transactions per second and commit latency percentiles; exit 1 on an error.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "vsl/vsl.h"
#include "vsl/vsl_sqlite.h"

namespace {

int Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::fprintf(stderr, "sqlite_bench: %s: %s\n", sql.c_str(), err ? err : "?");
    sqlite3_free(err);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SQLite transaction rate: OpenVSL VFS vs an ordinary file"};
  std::string card, attach, file, journal = "delete", lun = "0";
  uint32_t txns = 2000, rows = 10;
  bool json = false, trim_first = false;
  app.add_option("--card", card, "VFS in-process on this card");
  app.add_option("--attach", attach, "VFS attached to vsld's SDK socket");
  app.add_option("--lun", lun, "LUN (index in-process, name attached)");
  app.add_flag("--trim-first", trim_first, "trim the whole LUN first (it held a filesystem)");
  app.add_option("--file", file, "default VFS on this file path");
  app.add_option("--journal", journal, "delete or wal (with --file)");
  app.add_option("--txns", txns, "transactions");
  app.add_option("--rows", rows, "rows per transaction");
  app.add_flag("--json", json, "JSON on stdout");
  CLI11_PARSE(app, argc, argv);
  vsl_dev* dev = nullptr;
  std::string mode, path, vfs;
  if (!card.empty() || !attach.empty()) {
    const int r = !card.empty() ? vsl_open_card(card.c_str(), static_cast<uint32_t>(std::stoul(lun)), &dev)
                                : vsl_attach(attach.c_str(), lun == "0" ? "lun0" : lun.c_str(), &dev);
    if (r != 0) {
      std::fprintf(stderr, "sqlite_bench: open: %s\n", vsl_strerror(r));
      return 2;
    }
    if (trim_first) {
      vsl_caps c{};
      vsl_get_caps(dev, &c);
      if (vsl_trim(dev, 0, c.sectors) != 0) return 2;
    }
    if (vsl_sqlite_vfs_register(dev, "openvsl", 0) != 0) {
      std::fprintf(stderr, "sqlite_bench: the LUN holds something else (use --trim-first)\n");
      return 2;
    }
    vfs = "openvsl";
    mode = !card.empty() ? "vfs-in-process" : "vfs-attached";
    path = mode + ".db";  // a fresh database per mode (the LUN keeps the other's)
    journal = "memory";
  } else if (!file.empty()) {
    path = file;
    mode = "file";
    if (journal != "delete" && journal != "wal") {
      std::fprintf(stderr, "sqlite_bench: --journal delete or wal\n");
      return 2;
    }
  } else {
    std::fprintf(stderr, "sqlite_bench: give --card, --attach or --file\n");
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      vfs.empty() ? nullptr : vfs.c_str()) != SQLITE_OK) {
    std::fprintf(stderr, "sqlite_bench: open %s: %s\n", path.c_str(), sqlite3_errmsg(db));
    return 2;
  }
  if (Exec(db, "PRAGMA journal_mode=" + journal) != SQLITE_OK || Exec(db, "PRAGMA synchronous=FULL") != SQLITE_OK ||
      Exec(db, "DROP TABLE IF EXISTS t; CREATE TABLE t(id INTEGER PRIMARY KEY, k INT, v TEXT); "
               "CREATE INDEX tk ON t(k)") != SQLITE_OK) {
    return 1;
  }
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO t(k, v) VALUES(?, hex(randomblob(50)))", -1, &ins, nullptr);
  std::vector<double> lat_us;
  lat_us.reserve(txns);
  uint64_t errors = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < txns; ++i) {
    const auto a = std::chrono::steady_clock::now();
    bool ok = Exec(db, "BEGIN") == SQLITE_OK;
    for (uint32_t r = 0; r < rows && ok; ++r) {
      sqlite3_bind_int64(ins, 1, static_cast<sqlite3_int64>((uint64_t{i} * 7919 + r * 104729) % 1000003));
      ok = sqlite3_step(ins) == SQLITE_DONE;
      sqlite3_reset(ins);
    }
    ok = ok && Exec(db, "COMMIT") == SQLITE_OK;
    errors += !ok;
    lat_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sqlite3_finalize(ins);
  const std::string check = [&] {
    sqlite3_stmt* st = nullptr;
    std::string out;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr);
    if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }();
  sqlite3_close(db);
  if (dev != nullptr) {
    vsl_sqlite_vfs_unregister("openvsl");
    vsl_close(dev);
  }
  std::sort(lat_us.begin(), lat_us.end());
  auto pct = [&](double p) { return lat_us[std::min(lat_us.size() - 1, static_cast<std::size_t>(p * lat_us.size()))]; };
  nlohmann::json j{{"mode", mode},       {"journal", journal},          {"txns", txns},
                   {"rows_per_txn", rows}, {"txn_per_s", txns / secs},   {"p50_us", pct(0.5)},
                   {"p99_us", pct(0.99)}, {"errors", errors},            {"integrity", check}};
  if (json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s journal=%s: %.0f txn/s, commit p50 %.0f us p99 %.0f us, integrity %s, errors %llu\n",
                mode.c_str(), journal.c_str(), txns / secs, pct(0.5), pct(0.99), check.c_str(),
                static_cast<unsigned long long>(errors));
  }
  return errors == 0 && check == "ok" ? 0 : 1;
}
