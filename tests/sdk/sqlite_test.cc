// SQLite on the VFS (vsl_sqlite.h): transactions reach flash as one atomic write each, so
// with no rollback journal on the device a database stays consistent across power cuts
// (PRAGMA integrity_check after every cut) and holds exactly the committed transactions
// (plus, possibly, the one in flight at the cut).
#include <sqlite3.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "sdk/src/device.h"
#include "tests/sdk/sdk_fixture.h"
#include "vsl/card/card.h"
#include "vsl/vsl.h"
#include "vsl/vsl_sqlite.h"

namespace vsl::testing {
namespace {

int Exec(sqlite3* db, const std::string& sql) { return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr); }

std::string One(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  std::string out = "<error>";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(st, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(st);
  return out;
}

class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Sub("card");
    MakeFormattedCard(dir_, "duo-slc-small", 24, {});
  }
  TempDir tmp_;
  std::string dir_;
};

TEST_F(SqliteTest, TransactionsPersistAndChecksPass) {
  for (const char* mode : {"MEMORY", "DELETE"}) {
    vsl_dev* dev = nullptr;
    ASSERT_EQ(vsl_open_card(dir_.c_str(), mode[0] == 'M' ? 0 : 1, &dev), 0);
    ASSERT_EQ(vsl_sqlite_vfs_register(dev, "vsl", 0), 0);
    EXPECT_EQ(vsl_sqlite_vfs_register(dev, "vsl", 0), -EINVAL) << "name taken";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2("app.db", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "vsl"), SQLITE_OK);
    ASSERT_EQ(One(db, std::string("PRAGMA journal_mode=") + mode), mode[0] == 'M' ? "memory" : "delete");
    ASSERT_EQ(Exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, txn INT, body TEXT)"), SQLITE_OK);
    for (int txn = 0; txn < 50; ++txn) {
      ASSERT_EQ(Exec(db, "BEGIN"), SQLITE_OK);
      for (int r = 0; r < 40; ++r) {
        ASSERT_EQ(Exec(db, "INSERT INTO t(txn, body) VALUES(" + std::to_string(txn) + ", hex(randomblob(200)))"),
                  SQLITE_OK);
      }
      ASSERT_EQ(Exec(db, "COMMIT"), SQLITE_OK);
    }
    ASSERT_EQ(Exec(db, "DELETE FROM t WHERE txn % 3 = 0; CREATE INDEX ti ON t(txn)"), SQLITE_OK);
    ASSERT_EQ(sqlite3_close(db), SQLITE_OK);
    ASSERT_EQ(vsl_sqlite_vfs_unregister("vsl"), 0);
    ASSERT_EQ(vsl_close(dev), 0);
    // Reopen from flash.
    ASSERT_EQ(vsl_open_card(dir_.c_str(), mode[0] == 'M' ? 0 : 1, &dev), 0);
    ASSERT_EQ(vsl_sqlite_vfs_register(dev, "vsl", 0), 0);
    ASSERT_EQ(sqlite3_open_v2("app.db", &db, SQLITE_OPEN_READWRITE, "vsl"), SQLITE_OK);
    EXPECT_EQ(One(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(One(db, "SELECT count(*) FROM t"), std::to_string(33 * 40));
    EXPECT_EQ(One(db, "SELECT count(DISTINCT txn) FROM t"), "33");
    sqlite3_close(db);
    ASSERT_EQ(vsl_sqlite_vfs_unregister("vsl"), 0);
    EXPECT_EQ(vsl_sqlite_vfs_unregister("vsl"), -ENOENT);
    vsl_close(dev);
  }
}

// 512-byte sectors: SQLite's 4 KiB pages span eight, its journal header and partial
// writes are read-modify-write of sectors.
TEST_F(SqliteTest, FiveTwelveByteSectors) {
  const std::string dir = tmp_.Sub("card512");
  ftl::FormatOptions fo;
  fo.sector_bytes = 512;
  MakeFormattedCard(dir, "duo-slc-small", 24, fo);
  for (const char* mode : {"MEMORY", "DELETE"}) {
    vsl_dev* dev = nullptr;
    ASSERT_EQ(vsl_open_card(dir.c_str(), mode[0] == 'M' ? 0 : 1, &dev), 0);
    vsl_caps c{};
    ASSERT_EQ(vsl_get_caps(dev, &c), 0);
    ASSERT_EQ(c.sector_bytes, 512u);
    ASSERT_EQ(vsl_sqlite_vfs_register(dev, "vsl512", 0), 0);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2("s.db", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "vsl512"), SQLITE_OK);
    Exec(db, std::string("PRAGMA journal_mode=") + mode);
    ASSERT_EQ(Exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)"), SQLITE_OK);
    for (int i = 0; i < 30; ++i) {
      ASSERT_EQ(Exec(db, "BEGIN; INSERT INTO t(b) VALUES(hex(randomblob(700))); INSERT INTO t(b) "
                         "VALUES(hex(randomblob(90))); COMMIT"),
                SQLITE_OK);
    }
    sqlite3_close(db);
    ASSERT_EQ(sqlite3_open_v2("s.db", &db, SQLITE_OPEN_READWRITE, "vsl512"), SQLITE_OK);
    EXPECT_EQ(One(db, "PRAGMA integrity_check"), "ok") << mode;
    EXPECT_EQ(One(db, "SELECT count(*) FROM t"), "60") << mode;
    sqlite3_close(db);
    vsl_sqlite_vfs_unregister("vsl512");
    vsl_close(dev);
  }
}

TEST_F(SqliteTest, ATransactionTooLargeForOneAtomicWrite) {
  vsl_dev* dev = nullptr;
  ASSERT_EQ(vsl_open_card(dir_.c_str(), 0, &dev), 0);
  vsl_caps c{};
  ASSERT_EQ(vsl_get_caps(dev, &c), 0);
  ASSERT_EQ(vsl_sqlite_vfs_register(dev, "vsl", 0), 0);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2("big.db", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "vsl"), SQLITE_OK);
  ASSERT_EQ(One(db, "PRAGMA journal_mode=MEMORY"), "memory");
  ASSERT_EQ(Exec(db, "CREATE TABLE t(b BLOB); INSERT INTO t VALUES(zeroblob(1000))"), SQLITE_OK);
  // Far more pages than one atomic write holds.
  const uint64_t bytes = (c.atomic_max_sectors + 64) * c.sector_bytes;
  const int rc = Exec(db, "INSERT INTO t VALUES(randomblob(" + std::to_string(bytes) + "))");
  EXPECT_NE(rc, SQLITE_OK);
  EXPECT_EQ(sqlite3_extended_errcode(db) & 0xFF, SQLITE_IOERR) << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_EQ(sqlite3_open_v2("big.db", &db, SQLITE_OPEN_READWRITE, "vsl"), SQLITE_OK);
  EXPECT_EQ(One(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(One(db, "SELECT count(*) FROM t"), "1") << "nothing of the failed transaction";
  ASSERT_EQ(Exec(db, "INSERT INTO t VALUES(randomblob(10000))"), SQLITE_OK) << "and the database goes on";
  // With the rollback journal on the LUN the same transaction goes through, in pieces
  // covered by SQLite's journal.
  ASSERT_EQ(One(db, "PRAGMA journal_mode=DELETE"), "delete");
  ASSERT_EQ(Exec(db, "INSERT INTO t VALUES(randomblob(" + std::to_string(bytes) + "))"), SQLITE_OK)
      << sqlite3_errmsg(db);
  EXPECT_EQ(One(db, "SELECT count(*) FROM t"), "3");
  EXPECT_EQ(One(db, "PRAGMA integrity_check"), "ok");
  ASSERT_EQ(Exec(db, "DELETE FROM t"), SQLITE_OK) << "a large delete (secure_delete rewrites every page)";
  sqlite3_close(db);
  ASSERT_EQ(sqlite3_open_v2("big.db", &db, SQLITE_OPEN_READWRITE, "vsl"), SQLITE_OK);
  EXPECT_EQ(One(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(One(db, "SELECT count(*) FROM t"), "0");
  sqlite3_close(db);
  vsl_sqlite_vfs_unregister("vsl");
  vsl_close(dev);
}

// Power cuts at random instants while transactions commit, in virtual time. After each
// cut: integrity_check is ok and the database holds every committed transaction and at
// most the one in flight, whole.
TEST_F(SqliteTest, IntegrityAfterPowerCuts) {
  for (const char* mode : {"MEMORY", "DELETE"}) {
    VirtualClock clock(11);
    Rng rng(11);
    const std::string dir = tmp_.Sub(std::string("cut-") + mode);
    MakeFormattedCard(dir, "duo-slc-small", 24, {});
    int committed = 0, cuts = 0, landed = 0, bigs = 0;
    constexpr int kBig = 6;
    for (int round = 0; round < 6; ++round) {
      card::Card* card = nullptr;
      vsl_dev* dev = nullptr;
      ASSERT_EQ(OpenVirtual(dir, 0, clock, 11, &card, &dev), 0);
      ASSERT_EQ(vsl_sqlite_vfs_register(dev, "vslv", 0), 0);
      vsl_caps caps{};
      ASSERT_EQ(vsl_get_caps(dev, &caps), 0);
      const uint64_t big_bytes = (caps.atomic_max_sectors + 64) * caps.sector_bytes;
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open_v2("cut.db", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "vslv"), SQLITE_OK);
      Exec(db, std::string("PRAGMA journal_mode=") + mode);
      ASSERT_EQ(One(db, "PRAGMA integrity_check"), "ok") << mode << " round " << round << ": "
                                                         << One(db, "PRAGMA integrity_check");
      if (round == 0) {
        ASSERT_EQ(Exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, txn INT, body BLOB)"), SQLITE_OK);
      }
      const int have = std::stoi(One(db, "SELECT count(DISTINCT txn) FROM t"));
      ASSERT_TRUE(have == committed || have == committed + 1)
          << mode << " round " << round << ": " << have << " transactions, " << committed << " committed";
      if (have == committed + 1) ++landed;
      committed = have;
      ASSERT_EQ(One(db, "SELECT count(*) FROM t"), std::to_string(committed * 20)) << "whole transactions only";
      clock.At(clock.Now() + static_cast<TimeNs>(rng.Range(2 * kMs, 60 * kMs)), [card] { vsl::testing::SimOf(*card).PowerCut(); });
      for (;;) {
        bool ok = Exec(db, "BEGIN") == SQLITE_OK;
        for (int r = 0; r < 20 && ok; ++r) {
          // With the journal on the LUN, now and then a transaction larger than one
          // atomic write (applied in pieces under SQLite's journal).
          // (At most kBig of them: the file only grows, and its slot on the LUN is a fifth
          // of it; how many rounds a run gets depends on the card's timing.)
          const bool big = std::string(mode) == "DELETE" && r == 0 && rng.Bernoulli(0.1) && bigs < kBig;
          bigs += big;
          const uint64_t len = big ? big_bytes : 100 + rng.Below(3000);
          ok = Exec(db, "INSERT INTO t(txn, body) VALUES(" + std::to_string(committed) + ", randomblob(" +
                            std::to_string(len) + "))") == SQLITE_OK;
        }
        if (ok && Exec(db, "COMMIT") == SQLITE_OK) {
          ++committed;
          continue;
        }
        ++cuts;
        // Only the cut may end a round (an I/O error), nothing else (a full file, busy).
        EXPECT_EQ(sqlite3_extended_errcode(db) & 0xFF, SQLITE_IOERR) << mode << ": " << sqlite3_errmsg(db);
        break;
      }
      sqlite3_close(db);
      vsl_sqlite_vfs_unregister("vslv");
      clock.RunUntilIdle();
      vsl_close(dev);
    }
    std::printf("journal_mode=%s: %d transactions committed, %d cuts, %d in-flight transactions landed\n", mode,
                committed, cuts, landed);
    EXPECT_EQ(cuts, 6);
    EXPECT_GT(committed, 20);
  }
}

}  // namespace
}  // namespace vsl::testing
