#include "vsl/daemon/exports.h"

#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "vsl/card/volume.h"
#include "vsl/core/free_list.h"

namespace vsl::daemon {
namespace {

using nbd::BlockExport;

// Runs each request on the LUN's engine (no lock: the engine owns the FTL); on the
// caller's thread when the engine is idle (Engine::RunHere), so `done` may run inline.
class LunExport : public BlockExport {
 public:
  LunExport(card::Lun* lun, uint64_t sectors, uint32_t sector_bytes)
      : lun_(lun), sectors_(sectors), sb_(sector_bytes) {}
  // No call is out when it goes: a session holds its export until its requests are
  // answered.
  uint64_t size_bytes() const override { return sectors_ * sb_; }
  uint32_t block_bytes() const override { return sb_; }

  void Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) override {
    OnEngine(Call::kRead, offset, length, out, false, std::move(done));
  }
  void Write(uint64_t offset, uint32_t length, const uint8_t* data, bool fua, Done done) override {
    OnEngine(Call::kWrite, offset, length, const_cast<uint8_t*>(data), fua, std::move(done));
  }
  void Trim(uint64_t offset, uint64_t length, Done done) override {
    OnEngine(Call::kTrim, offset, length, nullptr, false, std::move(done));
  }
  void Flush(Done done) override { OnEngine(Call::kFlush, 0, 0, nullptr, false, std::move(done)); }
  Engine* engine() override { return &lun_->engine(); }
  // From the FTL's map, on the engine (it owns the map).
  void Extents(uint64_t offset, uint64_t length, ExtentsDone done) override {
    auto task = [this, offset, length, done = std::move(done)]() mutable {
      ftl::Ftl* f = lun_->ftl();
      if (f == nullptr) return done(Status::IOError(fmt::format("{} is offline", lun_->name())), {});
      if (f->sectors() != sectors_ || f->sector_bytes() != sb_) {
        return done(Status::IOError(fmt::format("{} was reformatted: reconnect", lun_->name())), {});
      }
      std::vector<Extent> ex;
      for (uint64_t lba = offset / sb_, end = (offset + length) / sb_; lba < end; ++lba) {
        const bool mapped = f->Exists(lba);
        if (!ex.empty() && ex.back().mapped == mapped && ex.back().bytes + sb_ <= (uint64_t{1} << 31)) {
          ex.back().bytes += sb_;
        } else {
          ex.push_back({sb_, mapped});
        }
      }
      done(Status::Ok(), std::move(ex));
    };
    lun_->engine().RunHere(std::move(task));
  }

 private:
  // A request on its way to the LUN's engine. Records are reused (free list under
  // calls_mu_: sessions' threads take them, the engine gives them back), so the task
  // handed to the engine captures one pointer and no request allocates.
  struct Call {
    enum Kind : uint8_t { kRead, kWrite, kTrim, kFlush };
    Kind kind = kRead;
    bool fua = false;
    uint64_t offset = 0, length = 0;
    uint8_t* data = nullptr;
    Done done;
    void Recycle() { done.Reset(); }  // FreeList
  };
  void OnEngine(Call::Kind kind, uint64_t offset, uint64_t length, uint8_t* data, bool fua, Done done) {
    Call* c;
    {
      std::lock_guard<std::mutex> l(calls_mu_);
      c = free_calls_.Take();
    }
    c->kind = kind;
    c->fua = fua;
    c->offset = offset;
    c->length = length;
    c->data = data;
    c->done = std::move(done);
    lun_->engine().RunHere([this, c] { Run(c); });
  }
  // On the engine.
  void Run(Call* c) {
    const Call x{c->kind, c->fua, c->offset, c->length, c->data, {}};
    Done done = std::move(c->done);
    {
      std::lock_guard<std::mutex> l(calls_mu_);
      free_calls_.Give(c);
    }
    ftl::Ftl* f = lun_->ftl();
    if (f == nullptr) return done(Status::IOError(fmt::format("{} is offline", lun_->name())));
    if (f->sectors() != sectors_ || f->sector_bytes() != sb_) {
      return done(Status::IOError(fmt::format("{} was reformatted: reconnect", lun_->name())));
    }
    switch (x.kind) {
      case Call::kRead:
        return f->Read(x.offset / sb_, static_cast<uint32_t>(x.length / sb_), x.data, std::move(done));
      case Call::kWrite:
        return f->Write(x.offset / sb_, static_cast<uint32_t>(x.length / sb_), x.data, x.fua, std::move(done));
      case Call::kTrim:
        return f->Trim(x.offset / sb_, x.length / sb_, std::move(done));
      case Call::kFlush:
        return f->Flush(std::move(done));
    }
  }

  card::Lun* const lun_;
  const uint64_t sectors_;
  const uint32_t sb_;
  std::mutex calls_mu_;
  FreeList<Call> free_calls_;  // (calls_mu_)
};

class VolumeExport : public BlockExport {
 public:
  explicit VolumeExport(std::unique_ptr<card::CardVolume> v) : v_(std::move(v)) {}
  uint64_t size_bytes() const override { return v_->sectors() * v_->sector_bytes(); }
  uint32_t block_bytes() const override { return v_->sector_bytes(); }
  void Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) override {
    v_->Read(offset / block_bytes(), length / block_bytes(), out, std::move(done));
  }
  void Write(uint64_t offset, uint32_t length, const uint8_t* data, bool fua, Done done) override {
    v_->Write(offset / block_bytes(), length / block_bytes(), data, fua, std::move(done));
  }
  void Trim(uint64_t offset, uint64_t length, Done done) override {
    v_->Trim(offset / block_bytes(), length / block_bytes(), std::move(done));
  }
  void Flush(Done done) override { v_->Flush(std::move(done)); }

 private:
  std::unique_ptr<card::CardVolume> v_;
};

}  // namespace

std::string CardCatalog::Prefix(std::size_t card) const {
  return card == 0 ? std::string() : fmt::format("card{}/", card);
}

std::vector<nbd::ExportInfo> CardCatalog::List() {
  std::vector<nbd::ExportInfo> v;
  for (std::size_t k = 0; k < cards_.size(); ++k) {
    card::Card& c = *cards_[k];
    const std::string serial = c.backend().identity(0).serial;
    if (chunk_ == 0) {
      for (card::Lun* l : c.luns()) {
        v.push_back({Prefix(k) + l->name(), fmt::format("OpenVSL card {} {} ({})", serial, l->name(),
                                                        l->state() == card::LunState::kOnline ? "online" : "offline")});
      }
    } else {
      v.push_back({Prefix(k) + "volume",
                   fmt::format("OpenVSL card {} volume: RAID 0 over {} LUNs, {} KiB chunks", serial, c.luns().size(),
                               chunk_ / 1024)});
    }
  }
  return v;
}

Result<std::shared_ptr<nbd::BlockExport>> CardCatalog::Open(const std::string& name) {
  for (std::size_t k = 0; k < cards_.size(); ++k) {
    card::Card& c = *cards_[k];
    if (chunk_ != 0 && name == Prefix(k) + "volume") {
      auto v = card::CardVolume::Create(c.luns(), chunk_);
      if (!v.ok()) return Status::FailedPrecondition(v.status().message());
      return std::shared_ptr<BlockExport>(new VolumeExport(std::move(v).value()));
    }
    if (chunk_ != 0 && name.empty() && k == 0) return Open(Prefix(k) + "volume");
    for (card::Lun* l : c.luns()) {
      if (!(name == Prefix(k) + l->name() || (name.empty() && k == 0 && l == c.luns().front()))) continue;
      if (chunk_ != 0) {
        return Status::FailedPrecondition(fmt::format(
            "{} is striped into the card volume: export '{}volume' instead", l->name(), Prefix(k)));
      }
      uint64_t sectors = 0;
      uint32_t sb = 0;
      Status s = l->Call([l, &sectors, &sb](Function<void(Status)> done) {
        ftl::Ftl* f = l->ftl();
        if (f == nullptr) return done(Status::FailedPrecondition(fmt::format("{} is offline", l->name())));
        sectors = f->sectors();
        sb = f->sector_bytes();
        done(Status::Ok());
      });
      if (!s.ok()) return s;
      return std::shared_ptr<BlockExport>(new LunExport(l, sectors, sb));
    }
  }
  return Status::NotFound(fmt::format("no export named '{}' (NBD_OPT_LIST lists them)", name));
}

}  // namespace vsl::daemon
