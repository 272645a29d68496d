// What the NBD server serves: block exports, found by name in a catalog.
//
// Contract of a BlockExport (the server checks every request against it first, so an
// export sees only whole, in-range blocks): offsets and lengths are multiples of
// block_bytes() and inside size_bytes(); a buffer stays valid until its `done`. The calls
// may come from many threads at once and `done` may run on any thread (the engine of the
// LUN that served it). Flush covers every write acknowledged before it was called, on any
// connection (that is what makes CAN_MULTI_CONN true). Trim makes the range read as
// zeroes and is as durable as a write.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsl/core/engine.h"
#include "vsl/core/function.h"
#include "vsl/core/status.h"

namespace vsl::nbd {

class BlockExport {
 public:
  using Done = Function<void(Status)>;
  virtual ~BlockExport() = default;

  virtual uint64_t size_bytes() const = 0;
  virtual uint32_t block_bytes() const = 0;
  virtual void Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) = 0;
  virtual void Write(uint64_t offset, uint32_t length, const uint8_t* data, bool fua, Done done) = 0;
  virtual void Trim(uint64_t offset, uint64_t length, Done done) = 0;
  virtual void Flush(Done done) = 0;
  // The one engine every request of this export runs on, if there is one (a LUN's): a
  // session may then let that engine's thread read its connection (RealClock::FdSource).
  // Calls made on that engine's thread are posted to it, not run inside the call.
  virtual Engine* engine() { return nullptr; }

  // Allocation of [offset, offset + length) as extents in order: (bytes, mapped). An
  // unmapped extent reads as zeroes. May describe less than asked (at least one block).
  // Default: all mapped (an export that does not know).
  struct Extent {
    uint64_t bytes;
    bool mapped;
  };
  using ExtentsDone = Function<void(Status, std::vector<Extent>)>;
  virtual void Extents(uint64_t /*offset*/, uint64_t length, ExtentsDone done) {
    done(Status::Ok(), {{length, true}});
  }
};

struct ExportInfo {
  std::string name;
  std::string description;
};

// The set of exports. Open is called at NBD_OPT_GO / INFO / EXPORT_NAME; the export it
// returns lives as long as the connection holds it. NotFound for an unknown name,
// FailedPrecondition for one that exists but cannot serve now (a LUN offline).
class ExportCatalog {
 public:
  virtual ~ExportCatalog() = default;
  virtual std::vector<ExportInfo> List() = 0;
  // "" is the default export (the first listed).
  virtual Result<std::shared_ptr<BlockExport>> Open(const std::string& name) = 0;
};

// Writes zeroes over [offset, offset + length) (whole blocks) in writes of at most 1 MiB
// from one shared zero buffer, one after another; the last is FUA when `fua`. What NBD's
// WRITE_ZEROES with NO_HOLE and ublk's WRITE_ZEROES with NOUNMAP need (a trim would be
// faster but may leave a hole). `done` gets the first error.
void WriteZeroes(BlockExport& e, uint64_t offset, uint64_t length, bool fua, BlockExport::Done done);

// An export held in memory (tests, the fuzz target). Completes inline.
class MemoryExport : public BlockExport {
 public:
  MemoryExport(uint64_t size, uint32_t block) : data_(size), block_(block) {}
  uint64_t size_bytes() const override { return data_.size(); }
  uint32_t block_bytes() const override { return block_; }
  void Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) override;
  void Write(uint64_t offset, uint32_t length, const uint8_t* data, bool fua, Done done) override;
  void Trim(uint64_t offset, uint64_t length, Done done) override;
  void Flush(Done done) override { done(Status::Ok()); }
  const std::vector<uint8_t>& data() const { return data_; }

 private:
  std::vector<uint8_t> data_;
  uint32_t block_;
};

// A catalog of fixed exports (tests, the fuzz target).
class StaticCatalog : public ExportCatalog {
 public:
  void Add(ExportInfo info, std::shared_ptr<BlockExport> e) { entries_.push_back({std::move(info), std::move(e)}); }
  std::vector<ExportInfo> List() override;
  Result<std::shared_ptr<BlockExport>> Open(const std::string& name) override;

 private:
  struct Entry {
    ExportInfo info;
    std::shared_ptr<BlockExport> exp;
  };
  std::vector<Entry> entries_;
};

}  // namespace vsl::nbd
