// vsl-bench: fio-like jobs through the native SDK (in-process or attached to vsld) or,
// for comparison in the same run, through NBD (libnbd) against vsld; and the key-value
// store's put/get rate. Reports IOPS, bandwidth and latency (average, percentiles, max,
// standard deviation) per run, as text or JSON.
//
//   vsl-bench --card SPEC [--lun N]          in-process (DIR, rtl:DIR, kernel:DIR...; not in use)
//             [--timing none]                zero-time simulated card (benchmarking mode)
//   vsl-bench --attach SOCKET [--lun lun0]   attached to vsld
//   vsl-bench --nbd URI                      NBD, e.g. nbd+unix:///lun0?socket=/run/vsld-nbd.sock
//   workload: --workload 4k-randread|4k-randwrite|8k-randrw-70|fileserver|webserver
//             or --rw randread|randwrite|randrw|read|write --bs 4k [--rwmixread 70]
//             [--bssplit 4k/60:64k/40]; --jobs N --iodepth N --runtime S --ramp S
//             --span SECTORS (working set from LBA 0; default the whole LUN, capped)
//             --atomic N (writes go as atomic batches of N vectors)
//   --kv --kv-value BYTES --kv-keys N: key-value puts, then gets (in-process / attached)
//   --precondition: write the span once first (unmeasured)
//   --fill-trim: before that, write the whole LUN twice over and trim it all (SDK;
//             unmeasured): every flash block has been programmed, as on a card in use
//   --json: one JSON object on stdout
//
// Exit codes: 0 done; 1 I/O errors during the run; 2 bad usage or cannot open.
#include <libnbd.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/latency_summary.h"
#include "vsl/core/free_list.h"
#include "vsl/core/random.h"
#include "vsl/vsl.h"
#include "vsl/vsl_kv.h"

namespace {

using Clock = std::chrono::steady_clock;

struct SizeShare {
  uint64_t bytes;
  double share;
};

struct Workload {
  std::string name;
  bool random = true;
  double read_share = 1.0;
  std::vector<SizeShare> sizes;
};

uint64_t ParseSize(const std::string& s) {
  const char u = s.empty() ? 0 : static_cast<char>(std::tolower(s.back()));
  const uint64_t mult = u == 'k' ? 1024 : u == 'm' ? 1 << 20 : 1;
  return std::stoull(mult == 1 ? s : s.substr(0, s.size() - 1)) * mult;
}

Workload Named(const std::string& n) {
  Workload w;
  w.name = n;
  if (n == "4k-randread") {
    w.sizes = {{4096, 1}};
  } else if (n == "4k-randwrite") {
    w.read_share = 0;
    w.sizes = {{4096, 1}};
  } else if (n == "8k-randrw-70") {
    w.read_share = 0.7;
    w.sizes = {{8192, 1}};
  } else if (n == "fileserver") {
    w.read_share = 0.8;
    w.sizes = {{512, .10}, {1024, .05}, {2048, .05}, {4096, .60}, {8192, .02}, {16384, .04}, {32768, .04}, {65536, .10}};
  } else if (n == "webserver") {
    w.sizes = {{512, .22}, {1024, .15}, {2048, .08}, {4096, .23}, {8192, .15}, {16384, .02},
               {32768, .06}, {65536, .07}, {131072, .01}, {524288, .01}};
  } else {
    throw CLI::ValidationError("--workload", "unknown workload " + n);
  }
  return w;
}

// One I/O path: SDK device or NBD connection.
class Target {
 public:
  virtual ~Target() = default;
  virtual uint32_t sector_bytes() const = 0;
  virtual uint64_t sectors() const = 0;
  // Submits; `fn(arg, result)` runs in a later Poll of the same thread (or another's, for
  // the SDK's shared queue). A plain callback: the generator allocates nothing per I/O,
  // so the in-process rows' CPU per I/O is the stack's.
  using DoneFn = void (*)(void* arg, int result);
  virtual int Submit(bool read, uint64_t lba, uint32_t count, uint8_t* buf, uint32_t atomic_vectors,
                     DoneFn fn, void* arg) = 0;
  virtual void Poll() = 0;
  virtual uint8_t* Alloc(std::size_t bytes) = 0;
  virtual void Free(uint8_t* p) = 0;
};

class SdkTarget : public Target {
 public:
  explicit SdkTarget(vsl_dev* d) : d_(d) { vsl_get_caps(d_, &caps_); }
  ~SdkTarget() override { vsl_close(d_); }
  uint32_t sector_bytes() const override { return caps_.sector_bytes; }
  uint64_t sectors() const override { return caps_.sectors; }
  vsl_dev* dev() { return d_; }
  int Submit(bool read, uint64_t lba, uint32_t count, uint8_t* buf, uint32_t atomic_vectors,
             DoneFn fn, void* cb) override {
    int r;
    if (read) {
      r = vsl_read_async(d_, lba, count, buf, fn, cb);
    } else if (atomic_vectors > 1) {
      // The I/O's sectors spread over `atomic_vectors` places 64 sectors apart.
      std::vector<vsl_vec> v;
      const uint32_t per = std::max<uint32_t>(1, count / atomic_vectors);
      for (uint32_t i = 0; i < count; i += per) {
        v.push_back({lba + uint64_t{i} * 64 % (caps_.sectors - lba - per), std::min(per, count - i),
                     buf + uint64_t{i} * caps_.sector_bytes, VSL_VEC_WRITE, 0});
      }
      r = vsl_write_atomic_async(d_, v.data(), static_cast<uint32_t>(v.size()), 0, fn, cb);
    } else {
      r = vsl_write_async(d_, lba, count, buf, 0, fn, cb);
    }
    return r;
  }
  void Poll() override { vsl_poll(d_, 1, 0, 10); }
  uint8_t* Alloc(std::size_t bytes) override { return static_cast<uint8_t*>(vsl_buf_alloc(d_, bytes)); }
  void Free(uint8_t* p) override { vsl_buf_free(d_, p); }

 private:
  vsl_dev* d_;
  vsl_caps caps_{};
};

// NBD through libnbd: one connection per job (the jobs each make their own).
class NbdTarget : public Target {
 public:
  static std::unique_ptr<NbdTarget> Connect(const std::string& uri) {
    auto t = std::make_unique<NbdTarget>();
    t->h_ = nbd_create();
    if (t->h_ == nullptr || nbd_connect_uri(t->h_, uri.c_str()) != 0) {
      std::fprintf(stderr, "vsl-bench: NBD %s: %s\n", uri.c_str(), nbd_get_error());
      return nullptr;
    }
    t->size_ = static_cast<uint64_t>(nbd_get_size(t->h_));
    const int64_t bs = nbd_get_block_size(t->h_, LIBNBD_SIZE_PREFERRED);
    t->sb_ = bs > 0 ? static_cast<uint32_t>(std::min<int64_t>(bs, 4096)) : 4096;
    return t;
  }
  ~NbdTarget() override {
    if (h_) nbd_close(h_);
  }
  uint32_t sector_bytes() const override { return sb_; }
  uint64_t sectors() const override { return size_ / sb_; }
  int Submit(bool read, uint64_t lba, uint32_t count, uint8_t* buf, uint32_t, DoneFn fn, void* arg) override {
    // libnbd's callback has one user pointer: the submission's (fn, arg) ride in a record
    // of this connection's free list (a connection is one job's, one thread's).
    Pending* p = pending_.Take();
    *p = {this, fn, arg};
    nbd_completion_callback c{
        [](void* a, int* err) {
          auto* q = static_cast<Pending*>(a);
          const Pending v = *q;
          v.self->pending_.Give(q);
          v.fn(v.arg, *err == 0 ? 0 : -*err);
          return 1;
        },
        p, nullptr};
    const uint64_t off = lba * sb_, len = uint64_t{count} * sb_;
    const int64_t r = read ? nbd_aio_pread(h_, buf, len, off, c, 0) : nbd_aio_pwrite(h_, buf, len, off, c, 0);
    if (r < 0) {
      pending_.Give(p);
      return -EIO;
    }
    return 0;
  }
  void Poll() override { nbd_poll(h_, 10); }
  uint8_t* Alloc(std::size_t bytes) override { return static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)); }
  void Free(uint8_t* p) override { std::free(p); }

 private:
  struct Pending {
    NbdTarget* self;
    DoneFn fn;
    void* arg;
  };
  nbd_handle* h_ = nullptr;
  vsl::RecordPool<Pending> pending_;
  uint64_t size_ = 0;
  uint32_t sb_ = 4096;
};

struct JobStats {
  std::mutex mu;
  std::vector<uint32_t> lat_ns;  // measured I/Os (after the ramp)
  uint64_t bytes = 0, errors = 0, reads = 0, writes = 0;
};

struct Options {
  Workload w;
  uint32_t jobs = 1, iodepth = 32, atomic = 0;
  double runtime_s = 5, ramp_s = 1;
  uint64_t span = 0;
};

void RunJob(Target& t, const Options& o, uint64_t seed, JobStats& st, Clock::time_point start, Clock::time_point end,
            Clock::time_point measure_from) {
  vsl::Rng rng(seed);
  const uint32_t sb = t.sector_bytes();
  uint64_t max_bytes = 0;
  for (auto& s : o.w.sizes) max_bytes = std::max(max_bytes, s.bytes);
  const uint64_t max_sectors = (max_bytes + sb - 1) / sb;
  std::vector<uint8_t*> bufs(o.iodepth);
  for (auto& b : bufs) {
    b = t.Alloc(max_sectors * sb);
    rng.Fill(b, max_sectors * sb);
  }
  std::vector<uint32_t> free_bufs;
  for (uint32_t i = 0; i < o.iodepth; ++i) free_bufs.push_back(i);
  std::mutex fmu;
  std::atomic<uint32_t> inflight{0};
  // One record per slot (one I/O in flight each): the completion's context.
  struct Io {
    uint32_t slot, count;
    bool read;
    Clock::time_point t0;
    JobStats* st;
    std::mutex* fmu;
    std::vector<uint32_t>* free_bufs;
    std::atomic<uint32_t>* inflight;
    Clock::time_point measure_from;
    uint32_t sb;
    static void Done(void* arg, int res) {
      auto& io = *static_cast<Io*>(arg);
      const auto t1 = Clock::now();
      if (t1 >= io.measure_from) {
        std::lock_guard<std::mutex> l(io.st->mu);
        io.st->lat_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - io.t0).count(), UINT32_MAX)));
        io.st->bytes += uint64_t{io.count} * io.sb;
        (io.read ? io.st->reads : io.st->writes)++;
        io.st->errors += res != 0;
      }
      std::lock_guard<std::mutex> l(*io.fmu);
      io.free_bufs->push_back(io.slot);
      --*io.inflight;
    }
  };
  std::vector<Io> ios(o.iodepth);
  for (uint32_t i = 0; i < o.iodepth; ++i) {
    ios[i] = Io{i, 0, false, {}, &st, &fmu, &free_bufs, &inflight, measure_from, sb};
  }
  uint64_t seq_lba = 0;
  const uint64_t span = std::min(o.span ? o.span : t.sectors(), t.sectors());
  (void)start;
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    uint32_t slot = UINT32_MAX;
    {
      std::lock_guard<std::mutex> l(fmu);
      if (!free_bufs.empty()) {
        slot = free_bufs.back();
        free_bufs.pop_back();
      }
    }
    if (slot == UINT32_MAX) {
      t.Poll();
      continue;
    }
    double pick = rng.Uniform();
    uint64_t bytes = o.w.sizes.back().bytes;
    for (auto& s : o.w.sizes) {
      if (pick < s.share) {
        bytes = s.bytes;
        break;
      }
      pick -= s.share;
    }
    const uint32_t count = static_cast<uint32_t>((bytes + sb - 1) / sb);
    uint64_t lba;
    if (o.w.random) {
      lba = rng.Below(span - count) / count * count;
    } else {
      lba = seq_lba;
      seq_lba = (seq_lba + count) % (span - count);
    }
    const bool read = rng.Uniform() < o.w.read_share;
    Io& io = ios[slot];
    io.t0 = Clock::now();
    io.read = read;
    io.count = count;
    ++inflight;
    const int r = t.Submit(read, lba, count, bufs[slot], o.atomic, &Io::Done, &io);
    if (r != 0) {
      --inflight;
      std::lock_guard<std::mutex> l(fmu);
      free_bufs.push_back(slot);
      if (r != -EAGAIN) {
        std::lock_guard<std::mutex> l2(st.mu);
        ++st.errors;
      }
      t.Poll();
    }
  }
  while (inflight.load() != 0) t.Poll();
  for (uint8_t* b : bufs) t.Free(b);
}

// operator new calls of every thread (this binary's replacement counts them).
std::atomic<uint64_t> g_allocs{0};

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

nlohmann::json Report(std::vector<JobStats>& stats, double seconds) {
  std::vector<uint32_t> all;
  uint64_t bytes = 0, errors = 0, reads = 0, writes = 0;
  for (auto& s : stats) {
    all.insert(all.end(), s.lat_ns.begin(), s.lat_ns.end());
    bytes += s.bytes;
    errors += s.errors;
    reads += s.reads;
    writes += s.writes;
  }
  const vsl::bench::LatencySummary l = vsl::bench::SummarizeLatency(all);
  const double n = static_cast<double>(all.size());
  nlohmann::json j;
  j["ios"] = all.size();
  j["reads"] = reads;
  j["writes"] = writes;
  j["errors"] = errors;
  j["seconds"] = seconds;
  j["iops"] = n / seconds;
  j["mib_per_s"] = static_cast<double>(bytes) / seconds / (1 << 20);
  j["lat_us"] = {{"avg", l.avg_us}, {"p50", l.p50_us}, {"p99", l.p99_us},
                 {"p999", l.p999_us}, {"max", l.max_us}, {"stddev", l.stddev_us}};
  return j;
}

// Writes every sector of the device twice over, sequentially, 1 MiB at a time (at most
// the device's largest I/O), 8 in flight, then trims it all. Twice, because one pass
// fills only the user space: the second runs the log through the over-provisioned
// blocks too (the allocator prefers the least-erased blocks, which would otherwise be the
// never-written ones), so every block has been programmed and later writes land on pages
// programmed before, as on any card in use (and, on the simulated card, on image pages
// this process has touched: the memory virtualization's first-touch cost,
// docs/performance.md, is paid here and not in the measured window). Returns 0 or the
// first error.
int FillAndTrim(vsl_dev* dev) {
  vsl_caps caps{};
  if (int r = vsl_get_caps(dev, &caps); r != 0) return r;
  const uint32_t per = std::max<uint32_t>(1, std::min<uint32_t>(caps.max_io_sectors, (1u << 20) / caps.sector_bytes));
  constexpr uint32_t kDepth = 8;
  uint8_t* buf = static_cast<uint8_t*>(vsl_buf_alloc(dev, uint64_t{per} * caps.sector_bytes));
  if (buf == nullptr) return -ENOMEM;
  vsl::Rng(3).Fill(buf, uint64_t{per} * caps.sector_bytes);
  struct State {
    uint32_t inflight = 0;
    int error = 0;
  } st;
  auto done = [](void* a, int r) {
    auto* s = static_cast<State*>(a);
    --s->inflight;
    if (r != 0 && s->error == 0) s->error = r;
  };
  uint64_t lba = 0;
  const uint64_t total = 2 * caps.sectors;
  while ((lba < total || st.inflight > 0) && st.error == 0) {
    // Every write sends the same buffer: the data only has to reach flash, not differ.
    while (lba < total && st.inflight < kDepth) {
      const uint64_t at = lba % caps.sectors;
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(per, caps.sectors - at));
      ++st.inflight;
      if (int r = vsl_write_async(dev, at, n, buf, 0, done, &st); r != 0) {
        --st.inflight;
        if (r != -EAGAIN) st.error = r;
        break;
      }
      lba += n;
    }
    vsl_poll(dev, 1, 0, 10);
  }
  while (st.inflight > 0) vsl_poll(dev, 1, 0, 10);
  vsl_buf_free(dev, buf);
  if (st.error != 0) return st.error;
  return vsl_trim(dev, 0, caps.sectors);
}

int RunKv(vsl_dev* dev, uint32_t value_bytes, uint64_t keys, nlohmann::json& out) {
  vsl_kv* kv = nullptr;
  // One pool with values of this size: the most buckets the LUN's address space allows.
  vsl_kv_opts ko{};
  ko.max_pools = 1;
  ko.max_value_bytes = value_bytes;
  if (int r = vsl_kv_open(dev, &ko, &kv); r != 0) {
    std::fprintf(stderr, "vsl-bench: kv open: %s\n", vsl_strerror(r));
    return 2;
  }
  std::vector<uint8_t> v(value_bytes);
  vsl::Rng(1).Fill(v.data(), v.size());
  char key[32];
  auto t0 = Clock::now();
  uint64_t errors = 0;
  int first_error = 0;
  for (uint64_t i = 0; i < keys; ++i) {
    const int kl = std::snprintf(key, sizeof(key), "key-%llu", static_cast<unsigned long long>(i));
    const int r = vsl_kv_put(kv, 0, key, static_cast<uint32_t>(kl), v.data(), value_bytes, 0);
    if (r != 0 && first_error == 0) first_error = r;
    errors += r != 0;
  }
  const double put_s = std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  for (uint64_t i = 0; i < keys; ++i) {
    const int kl = std::snprintf(key, sizeof(key), "key-%llu", static_cast<unsigned long long>(i));
    const int64_t r = vsl_kv_get(kv, 0, key, static_cast<uint32_t>(kl), v.data(), value_bytes);
    if (r != value_bytes && first_error == 0) first_error = static_cast<int>(r);
    errors += r != value_bytes;
  }
  if (first_error != 0) std::fprintf(stderr, "vsl-bench: kv: first error %s\n", vsl_strerror(first_error));
  const double get_s = std::chrono::duration<double>(Clock::now() - t0).count();
  vsl_kv_close(kv);
  out["kv"] = {{"keys", keys}, {"value_bytes", value_bytes}, {"puts_per_s", keys / put_s},
               {"gets_per_s", keys / get_s}, {"errors", errors}};
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vsl-bench: fio-like jobs through the OpenVSL SDK or NBD"};
  std::string card, attach, nbd_uri, lun = "0", workload, rw, bs = "4k", bssplit, timing;
  uint32_t rwmixread = 70, kv_value = 4096;
  uint64_t kv_keys = 20000;
  bool kv = false, json = false, fill_trim = false;
  Options o;
  app.add_option("--card", card, "in-process: the card spec (DIR, sim:DIR, rtl:DIR, kernel:DIR; docs/backends.md)");
  app.add_option("--timing", timing,
                 "in-process: model (default) or none (zero-time card, a benchmarking mode; for vsld "
                 "give vsld --timing none)");
  app.add_option("--attach", attach, "attached: vsld's SDK socket");
  app.add_option("--nbd", nbd_uri, "NBD URI (libnbd)");
  app.add_option("--lun", lun, "LUN: index in-process, name attached (default 0 / lun0)");
  app.add_option("--workload", workload, "4k-randread, 4k-randwrite, 8k-randrw-70, fileserver, webserver");
  app.add_option("--rw", rw, "randread, randwrite, randrw, read, write");
  app.add_option("--bs", bs, "block size (default 4k)");
  app.add_option("--bssplit", bssplit, "size/percent list, e.g. 4k/60:64k/40");
  app.add_option("--rwmixread", rwmixread, "read percent for randrw (default 70)");
  app.add_option("--jobs", o.jobs, "jobs (threads; NBD: a connection each)");
  app.add_option("--iodepth", o.iodepth, "I/Os in flight per job");
  app.add_option("--runtime", o.runtime_s, "measured seconds");
  app.add_option("--ramp", o.ramp_s, "seconds before measuring");
  app.add_option("--span", o.span, "working set in sectors from LBA 0");
  app.add_option("--atomic", o.atomic, "writes as atomic batches of this many vectors (SDK)");
  bool precondition = false;
  app.add_flag("--precondition", precondition, "write the span once first (unmeasured), so reads hit flash");
  app.add_flag("--fill-trim", fill_trim,
               "first write the whole LUN twice over and trim it all (SDK targets; unmeasured), as on a card in use");
  app.add_flag("--kv", kv, "key-value put/get rate instead");
  app.add_option("--kv-value", kv_value, "value bytes");
  app.add_option("--kv-keys", kv_keys, "keys");
  app.add_flag("--json", json, "JSON on stdout");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!workload.empty()) {
      o.w = Named(workload);
    } else {
      o.w.name = rw.empty() ? "randread" : rw;
      o.w.random = rw.rfind("rand", 0) == 0 || rw.empty();
      o.w.read_share = rw == "randwrite" || rw == "write" ? 0.0 : rw == "randrw" ? rwmixread / 100.0 : 1.0;
      if (!bssplit.empty()) {
        std::size_t p = 0;
        while (p < bssplit.size()) {
          const std::size_t q = bssplit.find(':', p);
          const std::string part = bssplit.substr(p, q == std::string::npos ? std::string::npos : q - p);
          const std::size_t slash = part.find('/');
          o.w.sizes.push_back({ParseSize(part.substr(0, slash)), std::stod(part.substr(slash + 1)) / 100.0});
          p = q == std::string::npos ? bssplit.size() : q + 1;
        }
      } else {
        o.w.sizes = {{ParseSize(bs), 1.0}};
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vsl-bench: %s\n", e.what());
    return 2;
  }
  if (!timing.empty() && timing != "model" && timing != "none") {
    std::fprintf(stderr, "vsl-bench: --timing must be model or none\n");
    return 2;
  }
  if (!timing.empty() && card.empty()) {
    std::fprintf(stderr, "vsl-bench: --timing is for --card (in-process); vsld takes its own --timing\n");
    return 2;
  }
  if ((card.empty() + attach.empty() + nbd_uri.empty()) != 2) {
    std::fprintf(stderr, "vsl-bench: give exactly one of --card, --attach, --nbd\n");
    return 2;
  }
  std::vector<std::unique_ptr<Target>> targets;
  std::string mode;
  if (!nbd_uri.empty()) {
    mode = "nbd";
    for (uint32_t i = 0; i < o.jobs; ++i) {
      auto t = NbdTarget::Connect(nbd_uri);
      if (!t) return 2;
      targets.push_back(std::move(t));
    }
  } else {
    vsl_dev* d = nullptr;
    int r;
    if (!card.empty()) {
      mode = "in-process";
      vsl_open_opts oo{};
      oo.size = sizeof oo;
      oo.timing = timing == "none" ? VSL_TIMING_NONE : VSL_TIMING_MODEL;
      r = vsl_open_card_opts(card.c_str(), static_cast<uint32_t>(std::stoul(lun)), &oo, &d);
    } else {
      mode = "attached";
      r = vsl_attach(attach.c_str(), lun == "0" ? "lun0" : lun.c_str(), &d);
    }
    if (r != 0) {
      std::fprintf(stderr, "vsl-bench: open: %s\n", vsl_strerror(r));
      return 2;
    }
    targets.push_back(std::make_unique<SdkTarget>(d));
  }
  nlohmann::json out;
  out["mode"] = mode;
  int rc = 0;
  if (kv) {
    if (mode == "nbd") {
      std::fprintf(stderr, "vsl-bench: --kv needs the SDK (--card or --attach)\n");
      return 2;
    }
    rc = RunKv(static_cast<SdkTarget&>(*targets[0]).dev(), kv_value, kv_keys, out);
  } else {
    if (fill_trim) {
      if (mode == "nbd") {
        std::fprintf(stderr, "vsl-bench: --fill-trim needs the SDK (--card or --attach)\n");
        return 2;
      }
      if (int r = FillAndTrim(static_cast<SdkTarget&>(*targets[0]).dev()); r != 0) {
        std::fprintf(stderr, "vsl-bench: fill and trim: %s\n", vsl_strerror(r));
        return 1;
      }
    }
    if (precondition) {
      // Sequential 128 KiB writes over the span, QD16, not measured.
      Options p = o;
      p.w.random = false;
      p.w.read_share = 0;
      p.w.sizes = {{128 * 1024, 1}};
      p.jobs = 1;
      p.iodepth = 16;
      p.atomic = 0;
      const uint64_t span = std::min(o.span ? o.span : targets[0]->sectors(), targets[0]->sectors());
      const double mib = static_cast<double>(span) * targets[0]->sector_bytes() / (1 << 20);
      JobStats ps;
      const auto s0 = Clock::now();
      // Long enough to cover the span at ~100 MiB/s; the sequential cursor wraps after.
      const auto s1 = s0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(mib / 100.0 + 0.5));
      RunJob(*targets[0], p, 7, ps, s0, s1, s0);
      if (ps.errors != 0) {
        std::fprintf(stderr, "vsl-bench: precondition: %llu errors\n", static_cast<unsigned long long>(ps.errors));
        return 1;
      }
    }
    std::vector<JobStats> stats(o.jobs);
    const auto start = Clock::now();
    const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.ramp_s));
    const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.runtime_s));
    std::vector<std::thread> ts;
    for (uint32_t j = 0; j < o.jobs; ++j) {
      Target& t = *targets[targets.size() == 1 ? 0 : j];
      ts.emplace_back([&, j] { RunJob(t, o, 1000 + j, stats[j], start, end, measure_from); });
    }
    // This process's CPU over the measured window (every thread: in-process that is the
    // FTL, the card model and the SDK; attached or NBD, the client alone).
    double cpu_s = 0;
    uint64_t allocs = 0;
    std::thread cpu_probe([&] {
      std::this_thread::sleep_until(measure_from);
      const double c0 = ProcessCpuSeconds();
      const uint64_t a0 = g_allocs.load(std::memory_order_relaxed);
      std::this_thread::sleep_until(end);
      cpu_s = ProcessCpuSeconds() - c0;
      allocs = g_allocs.load(std::memory_order_relaxed) - a0;
    });
    for (auto& t : ts) t.join();
    cpu_probe.join();
    out["workload"] = o.w.name;
    out["jobs"] = o.jobs;
    out["iodepth"] = o.iodepth;
    out["atomic"] = o.atomic;
    out["result"] = Report(stats, o.runtime_s);
    out["result"]["cpu_s"] = cpu_s;
    const uint64_t ios = out["result"]["ios"].get<uint64_t>();
    out["result"]["cpu_us_per_io"] = ios ? cpu_s * 1e6 / static_cast<double>(ios) : 0.0;
    // Heap allocations of the whole process over the same window, per I/O (in-process:
    // the stack's; attached or NBD: the client's).
    out["result"]["allocs_per_io"] = ios ? static_cast<double>(allocs) / static_cast<double>(ios) : 0.0;
    rc = out["result"]["errors"].get<uint64_t>() ? 1 : 0;
  }
  targets.clear();
  if (json) {
    std::printf("%s\n", out.dump().c_str());
  } else if (kv) {
    const auto& k = out["kv"];
    std::printf("%s kv: %llu keys of %u B: %.0f puts/s, %.0f gets/s\n", mode.c_str(),
                static_cast<unsigned long long>(kv_keys), kv_value, k["puts_per_s"].get<double>(),
                k["gets_per_s"].get<double>());
  } else {
    const auto& r = out["result"];
    std::printf("%s %s jobs=%u qd=%u: %.0f IOPS, %.1f MiB/s, lat us avg %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f "
                "sd %.1f, errors %llu\n",
                mode.c_str(), o.w.name.c_str(), o.jobs, o.iodepth, r["iops"].get<double>(), r["mib_per_s"].get<double>(),
                r["lat_us"]["avg"].get<double>(), r["lat_us"]["p50"].get<double>(), r["lat_us"]["p99"].get<double>(),
                r["lat_us"]["p999"].get<double>(), r["lat_us"]["max"].get<double>(),
                r["lat_us"]["stddev"].get<double>(), static_cast<unsigned long long>(r["errors"].get<uint64_t>()));
  }
  return rc;
}

// Counted allocation for allocs_per_io (the aligned forms are left to the library).
// GCC cannot tell that these replace the global pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
