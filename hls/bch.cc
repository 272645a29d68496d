// The BCH codec's C++ API (bch.h) over the kernels in bch_impl.h.
#include "hls/bch.h"

#include "hls/bch_impl.h"

namespace vslhls {

using detail::Code;
using detail::kGf;
using detail::Mul;

const char* BchStatusName(BchStatus s) {
  switch (s) {
    case BchStatus::kClean: return "clean";
    case BchStatus::kCorrected: return "corrected";
    case BchStatus::kErased: return "erased";
    case BchStatus::kUncorrectable: return "uncorrectable";
  }
  return "unknown";
}

template <int T>
void Bch<T>::Encode(const uint8_t* msg, int len, uint8_t* parity) {
  Code<T>::StoreParity(Code<T>::Run(msg, len), parity);
}

template <int T>
BchResult Bch<T>::Decode(uint8_t* msg, int len, uint8_t* parity) {
  return Code<T>::Decode(msg, len, parity);
}

template <int T>
void Bch<T>::Generator(uint64_t words[4]) {
  for (int i = 0; i < 4; ++i) words[i] = Code<T>::kGen.w[i];
}

template struct Bch<4>;
template struct Bch<8>;
template struct Bch<16>;

bool BchEncode(int t, const uint8_t* msg, int len, uint8_t* parity) {
  if (!BchSupportedT(t) || len < 1 || len > BchMaxMessageBytes(t)) return false;
  switch (t) {
    case 4: Bch<4>::Encode(msg, len, parity); break;
    case 8: Bch<8>::Encode(msg, len, parity); break;
    default: Bch<16>::Encode(msg, len, parity); break;
  }
  return true;
}

BchResult BchDecode(int t, uint8_t* msg, int len, uint8_t* parity) {
  switch (t) {
    case 4: return Bch<4>::Decode(msg, len, parity);
    case 8: return Bch<8>::Decode(msg, len, parity);
    case 16: return Bch<16>::Decode(msg, len, parity);
    default: return BchResult{BchStatus::kUncorrectable, 0};
  }
}

uint16_t GfExp(int i) { return kGf.exp[i % kBchN]; }
int GfLog(uint16_t a) { return kGf.log[a]; }
uint16_t GfMul(uint16_t a, uint16_t b) { return Mul(a, b); }

}  // namespace vslhls
