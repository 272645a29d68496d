// Project-owned stand-in for Xilinx's hls_stream.h: hls::stream<T, Depth>, a FIFO between
// the functions of a DATAFLOW region. Unlike the vendor's C-simulation model (unbounded),
// this one is bounded and depth-checked: a write to a full stream or a read from an empty
// one is a design error that would deadlock the hardware, so it stops the simulation with
// the stream's name and depth instead of passing silently. Because C-simulation runs a
// DATAFLOW region's functions one after another, a stream there must be deep enough for
// everything its producer writes in one call; the check is what sizes them.
// max_occupancy() reports the deepest the stream ever was, for sizing.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hls {

template <typename T, std::size_t Depth = 2>
class stream {
  static_assert(Depth >= 1, "a stream holds at least one element");

 public:
  stream() : name_("(unnamed)") {}
  explicit stream(const char* name) : name_(name) {}
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  static constexpr std::size_t depth() { return Depth; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == Depth; }
  std::size_t size() const { return count_; }
  std::size_t max_occupancy() const { return max_; }
  const std::string& name() const { return name_; }

  void write(const T& v) {
    if (full()) Fail("write to a full stream");
    buf_[(head_ + count_) % Depth] = v;
    ++count_;
    if (count_ > max_) max_ = count_;
  }
  T read() {
    if (empty()) Fail("read from an empty stream");
    T v = buf_[head_];
    head_ = (head_ + 1) % Depth;
    --count_;
    return v;
  }
  void read(T& v) { v = read(); }
  bool write_nb(const T& v) {
    if (full()) return false;
    write(v);
    return true;
  }
  bool read_nb(T& v) {
    if (empty()) return false;
    v = read();
    return true;
  }
  stream& operator<<(const T& v) {
    write(v);
    return *this;
  }
  stream& operator>>(T& v) {
    read(v);
    return *this;
  }

 private:
  [[noreturn]] void Fail(const char* what) const {
    std::fprintf(stderr, "hls::stream '%s' (depth %zu): %s\n", name_.c_str(), Depth, what);
    std::abort();
  }

  std::string name_;
  T buf_[Depth] = {};
  std::size_t head_ = 0, count_ = 0, max_ = 0;
};

}  // namespace hls
