// The SQLite VFS on a LUN (vsl_sqlite.h): named files in fixed slots, each file's writes
// held until its next sync and then applied as one atomic vectored write.
//
// LUN layout (docs/formats/sqlite-vfs.md): LBA 0 the table header (VfsSuper); slot i
// (16 on a sparse LUN, else 4) spans slot_sectors sectors from (i + 1) * slot_sectors:
// its first sector a SlotHeader (name, size), the file's bytes from the next sector on.
#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vsl/core/crc.h"
#include "vsl/vsl_sqlite.h"

namespace {

constexpr uint64_t kSuperMagic = 0x314C515351535641ULL;  // "AVSQSQL1"
constexpr uint32_t kSlotMagic = 0x46514C53U;             // "SLQF"
constexpr uint32_t kMaxSlots = 16;  // on a sparse LUN; 4 otherwise (each a fifth of it)
constexpr uint32_t kMaxName = 255;

#pragma pack(push, 1)
struct VfsSuper {
  uint64_t magic;
  uint32_t version;  // 1
  uint32_t slots;
  uint64_t slot_sectors;
  uint32_t sector_bytes;
  uint32_t crc;  // CRC32C of the bytes before it
};
struct SlotHeader {
  uint32_t magic;
  uint32_t name_len;
  uint64_t size_bytes;
  char name[kMaxName + 1];
  uint32_t crc;  // CRC32C of the bytes before it
};
#pragma pack(pop)
static_assert(sizeof(VfsSuper) == 32, "VfsSuper size is part of the format");
static_assert(sizeof(SlotHeader) == 276, "SlotHeader size is part of the format");

struct Vfs;

// Per slot, shared by the handles open on it: name, committed size, locks.
struct Slot {
  bool used = false;
  std::string name;
  uint64_t size = 0;
  int opens = 0;
  int shared = 0;
  const void* reserved = nullptr;
  const void* pending = nullptr;
  const void* exclusive = nullptr;
};

struct VslFile {
  sqlite3_file base;
  Vfs* vfs;
  int slot;  // -1: a temporary file of the default VFS, held in `inner`
  int lock;
  bool delete_on_close;
  bool journal;  // a rollback journal: SQLite checks its own integrity, pieces are fine
  // Writes since the last sync: whole sectors by index, and the size they make.
  std::map<uint64_t, std::vector<uint8_t>>* pending;
  uint64_t pending_size;
  bool dirty;
  sqlite3_file* inner;  // temporary files: the default VFS's file (after this struct)
};

struct Vfs {
  sqlite3_vfs base;
  std::string name;
  vsl_dev* dev;
  vsl_caps caps;
  sqlite3_vfs* fallback;  // the default VFS: temp files, randomness, time
  uint64_t slot_sectors;
  std::mutex mu;  // guards slots
  uint32_t nslots = 0;
  Slot slots[kMaxSlots];
};

std::mutex g_mu;
std::map<std::string, std::unique_ptr<Vfs>> g_vfs;  // guarded by g_mu

uint64_t HeaderLba(const Vfs* v, int slot) { return (uint64_t(slot) + 1) * v->slot_sectors; }
uint64_t MaxFileBytes(const Vfs* v) { return (v->slot_sectors - 1) * v->caps.sector_bytes; }

int WriteSlotHeader(Vfs* v, int slot, const Slot& s, std::vector<uint8_t>* image) {
  const uint32_t sb = v->caps.sector_bytes;
  image->assign(sb, 0);
  SlotHeader h{};
  h.magic = kSlotMagic;
  h.name_len = static_cast<uint32_t>(s.name.size());
  h.size_bytes = s.size;
  std::memcpy(h.name, s.name.data(), s.name.size());
  h.crc = vsl::Crc32c(&h, offsetof(SlotHeader, crc));
  std::memcpy(image->data(), &h, sizeof(h));
  (void)slot;
  return 0;
}

// --- temporary files: forwarded to the default VFS ---
int TmpClose(sqlite3_file* f) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods ? x->inner->pMethods->xClose(x->inner) : SQLITE_OK;
}
int TmpRead(sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xRead(x->inner, b, n, o);
}
int TmpWrite(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xWrite(x->inner, b, n, o);
}
int TmpTruncate(sqlite3_file* f, sqlite3_int64 n) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xTruncate(x->inner, n);
}
int TmpSync(sqlite3_file* f, int fl) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xSync(x->inner, fl);
}
int TmpFileSize(sqlite3_file* f, sqlite3_int64* n) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xFileSize(x->inner, n);
}
int TmpLock(sqlite3_file* f, int l) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xLock(x->inner, l);
}
int TmpUnlock(sqlite3_file* f, int l) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xUnlock(x->inner, l);
}
int TmpCheckReserved(sqlite3_file* f, int* r) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xCheckReservedLock(x->inner, r);
}
int TmpFileControl(sqlite3_file* f, int op, void* a) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xFileControl(x->inner, op, a);
}
int TmpSectorSize(sqlite3_file* f) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xSectorSize(x->inner);
}
int TmpDeviceCharacteristics(sqlite3_file* f) {
  auto* x = reinterpret_cast<VslFile*>(f);
  return x->inner->pMethods->xDeviceCharacteristics(x->inner);
}
const sqlite3_io_methods kTmpMethods = {1, TmpClose, TmpRead, TmpWrite, TmpTruncate, TmpSync, TmpFileSize,
                                        TmpLock, TmpUnlock, TmpCheckReserved, TmpFileControl, TmpSectorSize,
                                        TmpDeviceCharacteristics, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        nullptr};

// --- files on the LUN ---
uint64_t FileSize(VslFile* x) {
  if (x->dirty) return x->pending_size;
  std::lock_guard<std::mutex> l(x->vfs->mu);
  return x->vfs->slots[x->slot].size;
}

// The current image of sector `i` of the file: pending, else from the LUN (zeroes past
// the end). Returns 0 or -errno.
int SectorImage(VslFile* x, uint64_t i, uint8_t* out) {
  const uint32_t sb = x->vfs->caps.sector_bytes;
  auto it = x->pending->find(i);
  if (it != x->pending->end()) {
    std::memcpy(out, it->second.data(), sb);
    return 0;
  }
  return vsl_read(x->vfs->dev, HeaderLba(x->vfs, x->slot) + 1 + i, 1, out);
}

int FindSlot(Vfs* v, const std::string& name);

bool FitsOneAtomicWrite(const Vfs* v, const std::vector<vsl_vec>& vecs) {
  uint64_t sectors = 0;
  uint32_t trims = 0;
  for (const vsl_vec& e : vecs) {
    if (e.op == VSL_VEC_TRIM) ++trims;
    else sectors += e.count;
  }
  return vecs.size() <= v->caps.atomic_max_vectors && trims <= v->caps.atomic_max_trims &&
         sectors <= v->caps.atomic_max_sectors;
}

// Whether `slot`'s rollback journal ("<name>-journal") holds a journal SQLite has synced.
bool HotJournal(Vfs* v, int slot) {
  std::lock_guard<std::mutex> l(v->mu);
  const std::string j = v->slots[slot].name + "-journal";
  const int js = FindSlot(v, j);
  return js >= 0 && v->slots[js].size > 0;
}

// Applies `vecs` as several atomic writes, each within the limits; the last vector (the
// header, when the size changed) goes last.
int ApplyInPieces(Vfs* v, const std::vector<vsl_vec>& vecs) {
  std::vector<vsl_vec> piece;
  uint64_t sectors = 0;
  uint32_t trims = 0;
  auto flush = [&]() {
    int r = piece.empty() ? 0 : vsl_write_atomic(v->dev, piece.data(), static_cast<uint32_t>(piece.size()), 0);
    piece.clear();
    sectors = 0;
    trims = 0;
    return r;
  };
  for (const vsl_vec& e0 : vecs) {
    vsl_vec e = e0;
    // A long run of sectors is split to fit.
    while (e.op == VSL_VEC_WRITE && e.count > 0) {
      const uint64_t room = v->caps.atomic_max_sectors - sectors;
      if (room == 0 || piece.size() == v->caps.atomic_max_vectors) {
        if (int r = flush(); r != 0) return r;
        continue;
      }
      const uint64_t n = std::min(room, e.count);
      piece.push_back({e.lba, n, e.buf, VSL_VEC_WRITE, 0});
      sectors += n;
      e.lba += n;
      e.buf = static_cast<const uint8_t*>(e.buf) + n * v->caps.sector_bytes;
      e.count -= n;
    }
    if (e.op == VSL_VEC_TRIM) {
      if (trims == v->caps.atomic_max_trims || piece.size() == v->caps.atomic_max_vectors) {
        if (int r = flush(); r != 0) return r;
      }
      piece.push_back(e);
      ++trims;
    }
  }
  return flush();
}

// Applies the pending writes as one atomic write: data sectors, the header if the size
// changed, a trim of what a shrink leaves. On failure nothing is applied and the pending
// state is dropped (SQLite rolls the transaction back). Larger than one atomic write:
// applied in pieces if SQLite's rollback journal for the file is on the LUN (it covers
// a torn write, as on any device), refused otherwise (journal in memory).
int Apply(VslFile* x) {
  if (!x->dirty) return SQLITE_OK;
  Vfs* v = x->vfs;
  const uint32_t sb = v->caps.sector_bytes;
  const uint64_t base = HeaderLba(v, x->slot) + 1;
  std::vector<vsl_vec> vecs;
  std::vector<std::vector<uint8_t>> runs;
  uint64_t sectors = 0;
  uint64_t old_size;
  {
    std::lock_guard<std::mutex> l(v->mu);
    old_size = v->slots[x->slot].size;
  }
  const uint64_t new_sectors = (x->pending_size + sb - 1) / sb;
  for (auto it = x->pending->begin(); it != x->pending->end();) {
    if (it->first >= new_sectors) break;  // truncated away
    std::vector<uint8_t> run;
    const uint64_t first = it->first;
    uint64_t next = first;
    while (it != x->pending->end() && it->first == next && it->first < new_sectors) {
      run.insert(run.end(), it->second.begin(), it->second.end());
      ++next;
      ++it;
    }
    sectors += next - first;
    runs.push_back(std::move(run));
    vecs.push_back({base + first, next - first, nullptr, VSL_VEC_WRITE, 0});
  }
  for (std::size_t i = 0, w = 0; i < vecs.size(); ++i) vecs[i].buf = runs[w++].data();
  const uint64_t old_sectors = (old_size + sb - 1) / sb;
  if (new_sectors < old_sectors) {
    vecs.push_back({base + new_sectors, old_sectors - new_sectors, nullptr, VSL_VEC_TRIM, 0});
  }
  std::vector<uint8_t> header;
  if (x->pending_size != old_size) {
    Slot s;
    {
      std::lock_guard<std::mutex> l(v->mu);
      s = v->slots[x->slot];
    }
    s.size = x->pending_size;
    WriteSlotHeader(v, x->slot, s, &header);
    vecs.push_back({base - 1, 1, header.data(), VSL_VEC_WRITE, 0});
    ++sectors;
  }
  int r = 0;
  if (FitsOneAtomicWrite(v, vecs)) {
    if (!vecs.empty()) r = vsl_write_atomic(v->dev, vecs.data(), static_cast<uint32_t>(vecs.size()), 0);
  } else if (x->journal || HotJournal(v, x->slot)) {
    // Too large for one atomic write, but SQLite's rollback journal for this file is on
    // the LUN and synced: it covers a torn write, as on any device. Apply in pieces,
    // the header (the new size) last.
    r = ApplyInPieces(v, vecs);
  } else {
    r = -E2BIG;  // no journal to fall back on: refuse, nothing applied
  }
  x->pending->clear();
  x->dirty = false;
  if (r != 0) return SQLITE_IOERR_WRITE;
  std::lock_guard<std::mutex> l(v->mu);
  v->slots[x->slot].size = x->pending_size;
  return SQLITE_OK;
}

void Discard(VslFile* x) {
  x->pending->clear();
  x->dirty = false;
}

int FClose(sqlite3_file* f) {
  auto* x = reinterpret_cast<VslFile*>(f);
  int rc = Apply(x);
  Vfs* v = x->vfs;
  bool drop = false;
  {
    std::lock_guard<std::mutex> l(v->mu);
    Slot& s = v->slots[x->slot];
    --s.opens;
    drop = x->delete_on_close && s.opens == 0;
  }
  if (drop) rc = v->base.xDelete(&v->base, v->slots[x->slot].name.c_str(), 0);
  delete x->pending;
  x->pending = nullptr;
  return rc;
}

int FRead(sqlite3_file* f, void* buf, int amount, sqlite3_int64 offset) {
  auto* x = reinterpret_cast<VslFile*>(f);
  const uint32_t sb = x->vfs->caps.sector_bytes;
  const uint64_t size = FileSize(x);
  auto* out = static_cast<uint8_t*>(buf);
  const uint64_t off = static_cast<uint64_t>(offset);
  const uint64_t end = std::min<uint64_t>(size, off + static_cast<uint64_t>(amount));
  const uint64_t have = end > off ? end - off : 0;
  if (have < static_cast<uint64_t>(amount)) std::memset(out + have, 0, static_cast<uint64_t>(amount) - have);
  std::vector<uint8_t> sector(sb);
  uint64_t pos = off;
  while (pos < end) {
    const uint64_t i = pos / sb;
    const uint64_t in = pos % sb;
    const uint64_t n = std::min<uint64_t>(sb - in, end - pos);
    // Whole aligned runs without pending sectors are read straight into the buffer.
    if (in == 0 && x->pending->empty() && end - pos >= sb) {
      const uint64_t whole = (end - pos) / sb;
      const uint32_t cnt = static_cast<uint32_t>(std::min<uint64_t>(whole, x->vfs->caps.max_io_sectors));
      if (vsl_read(x->vfs->dev, HeaderLba(x->vfs, x->slot) + 1 + i, cnt, out + (pos - off)) != 0) {
        return SQLITE_IOERR_READ;
      }
      pos += uint64_t{cnt} * sb;
      continue;
    }
    if (SectorImage(x, i, sector.data()) != 0) return SQLITE_IOERR_READ;
    std::memcpy(out + (pos - off), sector.data() + in, n);
    pos += n;
  }
  return have < static_cast<uint64_t>(amount) ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

int FWrite(sqlite3_file* f, const void* buf, int amount, sqlite3_int64 offset) {
  auto* x = reinterpret_cast<VslFile*>(f);
  const uint32_t sb = x->vfs->caps.sector_bytes;
  const uint64_t off = static_cast<uint64_t>(offset);
  const uint64_t end = off + static_cast<uint64_t>(amount);
  if (end > MaxFileBytes(x->vfs)) return SQLITE_FULL;
  const uint64_t size = FileSize(x);
  const auto* in = static_cast<const uint8_t*>(buf);
  for (uint64_t pos = off; pos < end;) {
    const uint64_t i = pos / sb;
    const uint64_t o = pos % sb;
    const uint64_t n = std::min<uint64_t>(sb - o, end - pos);
    auto& img = (*x->pending)[i];
    if (img.empty()) {
      img.assign(sb, 0);
      // A partial sector keeps the rest of what is there (nothing past the end).
      if ((o != 0 || n != sb) && i * sb < size && SectorImage(x, i, img.data()) != 0) {
        x->pending->erase(i);
        return SQLITE_IOERR_WRITE;
      }
    }
    std::memcpy(img.data() + o, in + (pos - off), n);
    pos += n;
  }
  x->pending_size = std::max(size, end);
  x->dirty = true;
  return SQLITE_OK;
}

int FTruncate(sqlite3_file* f, sqlite3_int64 size) {
  auto* x = reinterpret_cast<VslFile*>(f);
  const uint32_t sb = x->vfs->caps.sector_bytes;
  const uint64_t n = static_cast<uint64_t>(size);
  const uint64_t cur = FileSize(x);
  if (n >= cur) return SQLITE_OK;
  if (n % sb != 0) {
    // The kept part of the last sector stays; the rest of it reads as zeroes.
    auto& img = (*x->pending)[n / sb];
    if (img.empty()) {
      img.assign(sb, 0);
      if (SectorImage(x, n / sb, img.data()) != 0) return SQLITE_IOERR_TRUNCATE;
    }
    std::memset(img.data() + n % sb, 0, sb - n % sb);
  }
  x->pending_size = n;
  x->dirty = true;
  return SQLITE_OK;
}

int FSync(sqlite3_file* f, int) { return Apply(reinterpret_cast<VslFile*>(f)); }

int FFileSize(sqlite3_file* f, sqlite3_int64* size) {
  *size = static_cast<sqlite3_int64>(FileSize(reinterpret_cast<VslFile*>(f)));
  return SQLITE_OK;
}

int FLock(sqlite3_file* f, int level) {
  auto* x = reinterpret_cast<VslFile*>(f);
  if (x->lock >= level) return SQLITE_OK;
  std::lock_guard<std::mutex> l(x->vfs->mu);
  Slot& s = x->vfs->slots[x->slot];
  if (level == SQLITE_LOCK_SHARED) {
    if ((s.exclusive && s.exclusive != x) || (s.pending && s.pending != x)) return SQLITE_BUSY;
    ++s.shared;
  } else if (level == SQLITE_LOCK_RESERVED) {
    if (s.reserved && s.reserved != x) return SQLITE_BUSY;
    s.reserved = x;
  } else if (level == SQLITE_LOCK_EXCLUSIVE || level == SQLITE_LOCK_PENDING) {
    if ((s.pending && s.pending != x) || (s.exclusive && s.exclusive != x)) return SQLITE_BUSY;
    s.pending = x;
    if (level == SQLITE_LOCK_PENDING) {
      x->lock = level;
      return SQLITE_OK;
    }
    if (s.shared > 1) {
      x->lock = SQLITE_LOCK_PENDING;
      return SQLITE_BUSY;  // readers still in: SQLite retries
    }
    s.exclusive = x;
  }
  x->lock = level;
  return SQLITE_OK;
}

int FUnlock(sqlite3_file* f, int level) {
  auto* x = reinterpret_cast<VslFile*>(f);
  if (x->lock <= level) return SQLITE_OK;
  // A transaction ends: what it wrote goes to flash now if no sync did (synchronous=OFF).
  int rc = SQLITE_OK;
  if (level <= SQLITE_LOCK_SHARED) rc = Apply(x);
  std::lock_guard<std::mutex> l(x->vfs->mu);
  Slot& s = x->vfs->slots[x->slot];
  if (s.exclusive == x) s.exclusive = nullptr;
  if (s.pending == x) s.pending = nullptr;
  if (level < SQLITE_LOCK_RESERVED && s.reserved == x) s.reserved = nullptr;
  if (level < SQLITE_LOCK_SHARED && x->lock >= SQLITE_LOCK_SHARED) --s.shared;
  x->lock = level;
  return rc;
}

int FCheckReserved(sqlite3_file* f, int* out) {
  auto* x = reinterpret_cast<VslFile*>(f);
  std::lock_guard<std::mutex> l(x->vfs->mu);
  const Slot& s = x->vfs->slots[x->slot];
  *out = (s.reserved && s.reserved != x) || (s.exclusive && s.exclusive != x);
  return SQLITE_OK;
}

int FFileControl(sqlite3_file* f, int op, void*) {
  auto* x = reinterpret_cast<VslFile*>(f);
  switch (op) {
    case SQLITE_FCNTL_BEGIN_ATOMIC_WRITE:
      return SQLITE_OK;  // writes are held until the commit anyway
    case SQLITE_FCNTL_COMMIT_ATOMIC_WRITE:
      return Apply(x);
    case SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE:
      Discard(x);
      return SQLITE_OK;
    default:
      return SQLITE_NOTFOUND;
  }
}

int FSectorSize(sqlite3_file* f) { return static_cast<int>(reinterpret_cast<VslFile*>(f)->vfs->caps.sector_bytes); }

// Not SEQUENTIAL: each file's writes wait for its own sync, so a journal must be synced
// before the database's writes are (SQLite then does so).
int FDeviceCharacteristics(sqlite3_file*) {
  return SQLITE_IOCAP_BATCH_ATOMIC | SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_SAFE_APPEND;
}

const sqlite3_io_methods kMethods = {1, FClose, FRead, FWrite, FTruncate, FSync, FFileSize, FLock, FUnlock,
                                     FCheckReserved, FFileControl, FSectorSize, FDeviceCharacteristics,
                                     nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

// Finds the slot named `name`, or -1.
int FindSlot(Vfs* v, const std::string& name) {
  for (uint32_t i = 0; i < v->nslots; ++i) {
    if (v->slots[i].used && v->slots[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int VOpen(sqlite3_vfs* vfs, const char* zname, sqlite3_file* file, int flags, int* out_flags) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  auto* x = reinterpret_cast<VslFile*>(file);
  std::memset(x, 0, sizeof(VslFile));
  x->vfs = v;
  if (zname == nullptr || (flags & (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL |
                                    SQLITE_OPEN_TRANSIENT_DB)) != 0) {
    x->slot = -1;
    x->inner = reinterpret_cast<sqlite3_file*>(reinterpret_cast<uint8_t*>(x) + sizeof(VslFile));
    const int rc = v->fallback->xOpen(v->fallback, zname, x->inner, flags, out_flags);
    if (rc == SQLITE_OK) x->base.pMethods = &kTmpMethods;
    return rc;
  }
  const std::string name(zname);
  if (name.size() > kMaxName) return SQLITE_CANTOPEN;
  std::lock_guard<std::mutex> l(v->mu);
  int slot = FindSlot(v, name);
  if (slot < 0) {
    if ((flags & SQLITE_OPEN_CREATE) == 0) return SQLITE_CANTOPEN;
    for (uint32_t i = 0; i < v->nslots && slot < 0; ++i) {
      if (!v->slots[i].used) slot = static_cast<int>(i);
    }
    if (slot < 0) return SQLITE_CANTOPEN;  // every slot taken
    Slot s;
    s.used = true;
    s.name = name;
    std::vector<uint8_t> header;
    WriteSlotHeader(v, slot, s, &header);
    if (vsl_write(v->dev, HeaderLba(v, slot), 1, header.data(), 0) != 0) return SQLITE_CANTOPEN;
    v->slots[slot] = s;
  }
  ++v->slots[slot].opens;
  x->slot = slot;
  x->delete_on_close = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
  x->journal = (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL)) != 0;
  x->pending = new std::map<uint64_t, std::vector<uint8_t>>();
  x->base.pMethods = &kMethods;
  if (out_flags != nullptr) *out_flags = flags;
  return SQLITE_OK;
}

int VDelete(sqlite3_vfs* vfs, const char* zname, int) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  std::lock_guard<std::mutex> l(v->mu);
  const int slot = FindSlot(v, zname);
  if (slot < 0) return SQLITE_IOERR_DELETE_NOENT;
  const uint32_t sb = v->caps.sector_bytes;
  const uint64_t used = 1 + (v->slots[slot].size + sb - 1) / sb;
  // Header and data go in one atomic trim: the file is there whole or gone.
  vsl_vec t{HeaderLba(v, slot), used, nullptr, VSL_VEC_TRIM, 0};
  if (vsl_write_atomic(v->dev, &t, 1, 0) != 0) return SQLITE_IOERR_DELETE;
  v->slots[slot] = Slot{};
  return SQLITE_OK;
}

int VAccess(sqlite3_vfs* vfs, const char* zname, int, int* out) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  std::lock_guard<std::mutex> l(v->mu);
  const int slot = FindSlot(v, zname);
  *out = slot >= 0 && v->slots[slot].size > 0;
  return SQLITE_OK;
}

int VFullPathname(sqlite3_vfs*, const char* zname, int n, char* out) {
  sqlite3_snprintf(n, out, "%s", zname);
  return SQLITE_OK;
}

int VRandomness(sqlite3_vfs* vfs, int n, char* out) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  return v->fallback->xRandomness(v->fallback, n, out);
}
int VSleep(sqlite3_vfs* vfs, int us) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  return v->fallback->xSleep(v->fallback, us);
}
int VCurrentTime(sqlite3_vfs* vfs, double* t) {
  auto* v = static_cast<Vfs*>(vfs->pAppData);
  return v->fallback->xCurrentTime(v->fallback, t);
}
int VGetLastError(sqlite3_vfs*, int, char*) { return 0; }

// Loads (or makes) the file table.
int LoadTable(Vfs* v) {
  const uint32_t sb = v->caps.sector_bytes;
  std::vector<uint8_t> sector(sb);
  if (int r = vsl_read(v->dev, 0, 1, sector.data()); r != 0) return r;
  VfsSuper s{};
  std::memcpy(&s, sector.data(), sizeof(s));
  if (std::all_of(sector.begin(), sector.end(), [](uint8_t c) { return c == 0; })) {
    s.magic = kSuperMagic;
    s.version = 1;
    s.slots = (v->caps.flags & VSL_CAP_SPARSE) ? kMaxSlots : 4;
    s.slot_sectors = std::min<uint64_t>(v->caps.sectors / (s.slots + 1), uint64_t{1} << 32);
    s.sector_bytes = sb;
    s.crc = vsl::Crc32c(&s, offsetof(VfsSuper, crc));
    if (s.slot_sectors < 16) return -ENOSPC;
    std::memcpy(sector.data(), &s, sizeof(s));
    if (int r = vsl_write(v->dev, 0, 1, sector.data(), VSL_FUA); r != 0) return r;
  } else if (s.magic != kSuperMagic || s.version != 1 || s.slots == 0 || s.slots > kMaxSlots || s.sector_bytes != sb ||
             s.crc != vsl::Crc32c(&s, offsetof(VfsSuper, crc))) {
    return -EINVAL;
  }
  v->slot_sectors = s.slot_sectors;
  v->nslots = s.slots;
  for (uint32_t i = 0; i < v->nslots; ++i) {
    if (int r = vsl_read(v->dev, HeaderLba(v, static_cast<int>(i)), 1, sector.data()); r != 0) return r;
    SlotHeader h{};
    std::memcpy(&h, sector.data(), sizeof(h));
    if (h.magic != kSlotMagic || h.name_len > kMaxName || h.crc != vsl::Crc32c(&h, offsetof(SlotHeader, crc))) {
      continue;  // free (never written, or trimmed by a delete)
    }
    v->slots[i].used = true;
    v->slots[i].name.assign(h.name, h.name_len);
    v->slots[i].size = h.size_bytes;
  }
  return 0;
}

}  // namespace

extern "C" int vsl_sqlite_vfs_register(vsl_dev* dev, const char* name, int make_default) {
  if (name == nullptr || *name == '\0') return -EINVAL;
  auto v = std::make_unique<Vfs>();
  v->name = name;
  v->dev = dev;
  if (int r = vsl_get_caps(dev, &v->caps); r != 0) return r;
  v->fallback = sqlite3_vfs_find(nullptr);
  if (v->fallback == nullptr) return -ENOENT;
  if (int r = LoadTable(v.get()); r != 0) return r;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_vfs.count(name) != 0 || sqlite3_vfs_find(name) != nullptr) return -EINVAL;
  sqlite3_vfs& b = v->base;
  b.iVersion = 1;
  b.szOsFile = static_cast<int>(sizeof(VslFile)) + v->fallback->szOsFile;
  b.mxPathname = static_cast<int>(kMaxName);
  b.zName = v->name.c_str();
  b.pAppData = v.get();
  b.xOpen = VOpen;
  b.xDelete = VDelete;
  b.xAccess = VAccess;
  b.xFullPathname = VFullPathname;
  b.xRandomness = VRandomness;
  b.xSleep = VSleep;
  b.xCurrentTime = VCurrentTime;
  b.xGetLastError = VGetLastError;
  if (sqlite3_vfs_register(&b, make_default) != SQLITE_OK) return -ENOMEM;
  g_vfs.emplace(name, std::move(v));
  return 0;
}

extern "C" int vsl_sqlite_vfs_unregister(const char* name) {
  if (name == nullptr) return -EINVAL;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_vfs.find(name);
  if (it == g_vfs.end()) return -ENOENT;
  sqlite3_vfs_unregister(&it->second->base);
  g_vfs.erase(it);
  return 0;
}
