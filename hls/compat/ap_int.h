// Project-owned stand-in for the part of Xilinx's ap_int.h the kernels use: ap_uint<N>,
// an N-bit unsigned integer with hardware semantics (arithmetic wraps at N bits). Only
// what hls/ needs is here: bit and range access, shifts, bitwise logic, comparison and
// reductions. Range reads and writes are at most 64 bits wide. hls/hls_types.h includes
// this header only outside an HLS build (no __SYNTHESIS__); there the real one is used,
// so kernels must stay within the API subset both provide.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

template <int N>
class ap_uint {
  static_assert(N >= 1 && N <= 1024, "ap_uint width out of range");
  static constexpr int kWords = (N + 63) / 64;
  static constexpr uint64_t kTopMask = (N % 64 == 0) ? ~uint64_t{0} : ((uint64_t{1} << (N % 64)) - 1);

 public:
  constexpr ap_uint() : w_{} {}
  constexpr ap_uint(unsigned long long v) : w_{} {  // NOLINT: implicit, as in ap_int.h
    w_[0] = v;
    Trim();
  }
  constexpr ap_uint(unsigned long v) : ap_uint(static_cast<unsigned long long>(v)) {}
  constexpr ap_uint(unsigned v) : ap_uint(static_cast<unsigned long long>(v)) {}
  constexpr ap_uint(int v) : ap_uint(static_cast<unsigned long long>(static_cast<long long>(v))) {}
  constexpr ap_uint(long v) : ap_uint(static_cast<unsigned long long>(static_cast<long long>(v))) {}
  constexpr ap_uint(long long v) : ap_uint(static_cast<unsigned long long>(v)) {}
  // Width conversion: truncates or zero-extends.
  template <int M>
  constexpr ap_uint(const ap_uint<M>& o) : w_{} {  // NOLINT: implicit, as in ap_int.h
    for (int i = 0; i < kWords && i < ap_uint<M>::words(); ++i) w_[i] = o.word(i);
    Trim();
  }

  static constexpr int length() { return N; }

  // ---- bits ----
  class BitRef {
   public:
    constexpr BitRef(ap_uint& v, int i) : v_(v), i_(i) {}
    constexpr operator bool() const { return v_.test(i_); }  // NOLINT: as in ap_int.h
    constexpr BitRef& operator=(bool b) {
      v_.set_bit(i_, b);
      return *this;
    }
    constexpr BitRef& operator=(const BitRef& o) { return *this = static_cast<bool>(o); }

   private:
    ap_uint& v_;
    int i_;
  };
  constexpr bool test(int i) const { return (w_[i / 64] >> (i % 64)) & 1u; }
  constexpr bool get_bit(int i) const { return test(i); }
  constexpr void set_bit(int i, bool b) {
    const uint64_t m = uint64_t{1} << (i % 64);
    w_[i / 64] = b ? (w_[i / 64] | m) : (w_[i / 64] & ~m);
  }
  constexpr bool operator[](int i) const { return test(i); }
  constexpr BitRef operator[](int i) { return BitRef(*this, i); }

  // ---- ranges (hi >= lo, hi - lo < 64) ----
  constexpr uint64_t get_range(int hi, int lo) const {
    const int n = hi - lo + 1;
    const int wi = lo / 64, sh = lo % 64;
    uint64_t v = w_[wi] >> sh;
    if (sh != 0 && sh + n > 64 && wi + 1 < kWords) v |= w_[wi + 1] << (64 - sh);
    return n == 64 ? v : (v & ((uint64_t{1} << n) - 1));
  }
  constexpr void set_range(int hi, int lo, uint64_t v) {
    const int n = hi - lo + 1;
    const uint64_t m = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1);
    v &= m;
    const int wi = lo / 64, sh = lo % 64;
    w_[wi] = (w_[wi] & ~(m << sh)) | (v << sh);
    if (sh != 0 && sh + n > 64 && wi + 1 < kWords) {
      w_[wi + 1] = (w_[wi + 1] & ~(m >> (64 - sh))) | (v >> (64 - sh));
    }
    Trim();
  }
  class RangeRef {
   public:
    constexpr RangeRef(ap_uint& v, int hi, int lo) : v_(v), hi_(hi), lo_(lo) {}
    constexpr operator uint64_t() const { return v_.get_range(hi_, lo_); }  // NOLINT
    constexpr uint64_t to_uint64() const { return v_.get_range(hi_, lo_); }
    constexpr unsigned to_uint() const { return static_cast<unsigned>(to_uint64()); }
    constexpr RangeRef& operator=(uint64_t x) {
      v_.set_range(hi_, lo_, x);
      return *this;
    }
    template <int M>
    constexpr RangeRef& operator=(const ap_uint<M>& x) {
      return *this = x.to_uint64();
    }
    constexpr RangeRef& operator=(const RangeRef& o) { return *this = o.to_uint64(); }

   private:
    ap_uint& v_;
    int hi_, lo_;
  };
  constexpr RangeRef range(int hi, int lo) { return RangeRef(*this, hi, lo); }
  constexpr uint64_t range(int hi, int lo) const { return get_range(hi, lo); }
  constexpr RangeRef operator()(int hi, int lo) { return range(hi, lo); }
  constexpr uint64_t operator()(int hi, int lo) const { return get_range(hi, lo); }

  // ---- conversion and reduction ----
  constexpr uint64_t to_uint64() const { return w_[0]; }
  constexpr unsigned to_uint() const { return static_cast<unsigned>(w_[0]); }
  constexpr bool or_reduce() const {
    for (int i = 0; i < kWords; ++i) {
      if (w_[i] != 0) return true;
    }
    return false;
  }
  constexpr bool xor_reduce() const {
    uint64_t x = 0;
    for (int i = 0; i < kWords; ++i) x ^= w_[i];
    return __builtin_parityll(x) != 0;
  }
  constexpr bool iszero() const { return !or_reduce(); }

  // ---- logic and shifts (same width) ----
  constexpr ap_uint& operator^=(const ap_uint& o) {
    for (int i = 0; i < kWords; ++i) w_[i] ^= o.w_[i];
    return *this;
  }
  constexpr ap_uint& operator&=(const ap_uint& o) {
    for (int i = 0; i < kWords; ++i) w_[i] &= o.w_[i];
    return *this;
  }
  constexpr ap_uint& operator|=(const ap_uint& o) {
    for (int i = 0; i < kWords; ++i) w_[i] |= o.w_[i];
    return *this;
  }
  constexpr ap_uint& operator<<=(int s) {
    if (s >= N) return *this = ap_uint();
    const int ws = s / 64, bs = s % 64;
    for (int i = kWords - 1; i >= 0; --i) {
      uint64_t v = i - ws >= 0 ? w_[i - ws] << bs : 0;
      if (bs != 0 && i - ws - 1 >= 0) v |= w_[i - ws - 1] >> (64 - bs);
      w_[i] = v;
    }
    Trim();
    return *this;
  }
  constexpr ap_uint& operator>>=(int s) {
    if (s >= N) return *this = ap_uint();
    const int ws = s / 64, bs = s % 64;
    for (int i = 0; i < kWords; ++i) {
      uint64_t v = i + ws < kWords ? w_[i + ws] >> bs : 0;
      if (bs != 0 && i + ws + 1 < kWords) v |= w_[i + ws + 1] << (64 - bs);
      w_[i] = v;
    }
    return *this;
  }
  friend constexpr ap_uint operator^(ap_uint a, const ap_uint& b) { return a ^= b; }
  friend constexpr ap_uint operator&(ap_uint a, const ap_uint& b) { return a &= b; }
  friend constexpr ap_uint operator|(ap_uint a, const ap_uint& b) { return a |= b; }
  friend constexpr ap_uint operator<<(ap_uint a, int s) { return a <<= s; }
  friend constexpr ap_uint operator>>(ap_uint a, int s) { return a >>= s; }
  constexpr ap_uint operator~() const {
    ap_uint r;
    for (int i = 0; i < kWords; ++i) r.w_[i] = ~w_[i];
    r.Trim();
    return r;
  }
  friend constexpr bool operator==(const ap_uint& a, const ap_uint& b) {
    for (int i = 0; i < kWords; ++i) {
      if (a.w_[i] != b.w_[i]) return false;
    }
    return true;
  }
  friend constexpr bool operator!=(const ap_uint& a, const ap_uint& b) { return !(a == b); }

  // Compat-only access for width conversion (not in ap_int.h; kernels must not use it).
  static constexpr int words() { return kWords; }
  constexpr uint64_t word(int i) const { return w_[i]; }

 private:
  constexpr void Trim() { w_[kWords - 1] &= kTopMask; }
  uint64_t w_[kWords];
};
