// AxiPort: one AXI4 slave port (64-bit address and data, INCR bursts) on a DeviceMemory
// shared by several ports: the card memory (HBM/DDR) of the co-simulated Alveo kernel,
// whose masters each reach it through a port of their own. One read and one write burst
// at a time per port; the first read beat `latency` cycles after the address; a burst
// touching a failing range (or outside the memory) answers SLVERR and writes nothing.
// C++17 (testbench).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include <systemc.h>

namespace vsl::tb {

// Memory bytes: anonymous (assign) or a file mapped shared (Map), so what the device wrote
// is in the file the moment it is written, and a killed process loses none of it.
class Bytes {
 public:
  Bytes() = default;
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() { Release(); }
  void assign(std::size_t n, uint8_t v) {
    Release();
    owned_.assign(n, v);
    p_ = owned_.data();
    n_ = n;
  }
  // Maps `path` (created, or grown to `n` bytes, if shorter); false on an error. *fresh:
  // the file was new.
  bool Map(const char* path, std::size_t n, bool* fresh) {
    Release();
    const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    struct stat st {};
    ::fstat(fd, &st);
    *fresh = st.st_size == 0;
    if (static_cast<std::size_t>(st.st_size) < n && ::ftruncate(fd, static_cast<off_t>(n)) != 0) {
      ::close(fd);
      return false;
    }
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) return false;
    p_ = static_cast<uint8_t*>(m);
    n_ = n;
    mapped_ = true;
    return true;
  }
  uint8_t& operator[](std::size_t i) { return p_[i]; }
  const uint8_t& operator[](std::size_t i) const { return p_[i]; }
  std::size_t size() const { return n_; }
  uint8_t* data() { return p_; }

 private:
  void Release() {
    if (mapped_) ::munmap(p_, n_);
    mapped_ = false;
    owned_.clear();
    p_ = nullptr;
    n_ = 0;
  }
  std::vector<uint8_t> owned_;
  uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
  bool mapped_ = false;
};

struct DeviceMemory {
  uint64_t base = 0;
  Bytes bytes;
  std::vector<std::pair<uint64_t, uint64_t>> failing;  // [addr, addr + len) answer SLVERR

  bool Fails(uint64_t a, uint64_t len) const {
    for (const auto& [fa, fl] : failing) {
      if (a < fa + fl && fa < a + len) return true;
    }
    return a < base || a + len > base + bytes.size();
  }
  bool Contains(uint64_t a, uint64_t len) const { return a >= base && a + len <= base + bytes.size(); }
  uint64_t Word(uint64_t a) const {
    uint64_t v = 0;
    if (Contains(a, 8)) std::memcpy(&v, &bytes[a - base], 8);
    return v;
  }
  // The host's copies (RegMemPort::WriteMem/ReadMem): outside the memory is a bug in the
  // host code under test, reported and fatal.
  void Write(uint64_t a, const void* src, std::size_t len) {
    Check(a, len, "WriteMem");
    std::memcpy(&bytes[a - base], src, len);
  }
  void Read(uint64_t a, void* dst, std::size_t len) const {
    Check(a, len, "ReadMem");
    std::memcpy(dst, &bytes[a - base], len);
  }

 private:
  void Check(uint64_t a, std::size_t len, const char* what) const {
    if (Contains(a, len)) return;
    std::fprintf(stderr, "%s outside device memory: %#llx + %zu\n", what, static_cast<unsigned long long>(a), len);
    std::abort();
  }
};

SC_MODULE(AxiPort) {
  sc_in<bool> clk;
  sc_in<uint64_t> awaddr, wdata, araddr;
  sc_in<uint32_t> awlen, wstrb, arlen;
  sc_in<bool> awvalid, wlast, wvalid, bready, arvalid, rready;
  sc_out<bool> awready, wready, bvalid, arready, rlast, rvalid;
  sc_out<uint32_t> bresp, rresp;
  sc_out<uint64_t> rdata;

  DeviceMemory* mem = nullptr;
  uint32_t latency = 8;
  uint64_t read_beats = 0, write_beats = 0;

  SC_CTOR(AxiPort) {
    SC_METHOD(Tick);
    sensitive << clk.pos();
    dont_initialize();
  }

 private:
  bool r_active_ = false, w_active_ = false;
  uint64_t r_addr_ = 0, w_addr_ = 0;
  uint32_t r_left_ = 0, r_wait_ = 0;
  bool r_err_ = false, w_err_ = false;
  bool rvalid_ = false, awready_ = true, arready_ = true, wready_ = false, bvalid_ = false, rlast_ = false;
  uint64_t rdata_ = 0;

  // Handshakes seen at this edge use the values driven before it.
  void Tick() {
    if (arready_ && arvalid.read()) {
      r_active_ = true;
      arready_ = false;
      r_addr_ = araddr.read();
      r_left_ = (arlen.read() & 0xFF) + 1;
      r_wait_ = latency;
      r_err_ = mem->Fails(r_addr_, uint64_t{r_left_} * 8);
    } else if (rvalid_ && rready.read()) {
      rvalid_ = false;
      r_addr_ += 8;
      ++read_beats;
      if (--r_left_ == 0) {
        r_active_ = false;
        arready_ = true;
      }
    }
    if (r_active_ && !rvalid_) {
      if (r_wait_ > 0) {
        --r_wait_;
      } else {
        rvalid_ = true;
        rdata_ = r_err_ ? 0 : mem->Word(r_addr_);
        rlast_ = r_left_ == 1;
      }
    }
    if (awready_ && awvalid.read()) {
      w_active_ = true;
      awready_ = false;
      wready_ = true;
      w_addr_ = awaddr.read();
      w_err_ = mem->Fails(w_addr_, uint64_t{(awlen.read() & 0xFF) + 1} * 8);
    } else if (wready_ && wvalid.read()) {
      if (!w_err_) {
        const uint64_t d = wdata.read();
        const uint32_t strb = wstrb.read() & 0xFF;
        for (int b = 0; b < 8; ++b) {
          if (strb & (1u << b)) mem->bytes[w_addr_ - mem->base + b] = static_cast<uint8_t>(d >> (8 * b));
        }
      }
      w_addr_ += 8;
      ++write_beats;
      if (wlast.read()) {
        wready_ = false;
        bvalid_ = true;
      }
    } else if (bvalid_ && bready.read()) {
      bvalid_ = false;
      w_active_ = false;
      awready_ = true;
    }
    awready.write(awready_), wready.write(wready_), bvalid.write(bvalid_), bresp.write(w_err_ ? 2u : 0u);
    arready.write(arready_), rvalid.write(rvalid_), rlast.write(rlast_), rresp.write(r_err_ ? 2u : 0u);
    rdata.write(rdata_);
  }
};

}  // namespace vsl::tb
