// HLS top functions (kernels.h). Each codeword goes through a DATAFLOW region of load,
// compute and store stages joined by bounded streams; the stream depths are the frame
// sizes, which C-simulation's depth check (hls/compat/hls_stream.h) confirms.
#include "hls/kernels.h"

#include "hls/bch_impl.h"
#include "hls/crc32c.h"
#include "hls/scrambler.h"

namespace vslhls {
namespace {

using Word = ap_uint<64>;
using WordStream = hls::stream<Word, kTopMaxMessageWords>;
using ByteStream = hls::stream<ap_uint<8>, kTopMaxParityBytes>;

// The first n (<= 8) bytes of a little-endian 64-bit word, and back.
void Unpack(const Word& w, unsigned n, uint8_t* b) {
unpack_bytes:
  for (unsigned k = 0; k < n; ++k) {
#pragma HLS UNROLL
    b[k] = static_cast<uint8_t>(w.range(8 * k + 7, 8 * k));
  }
}
void Pack(const uint8_t* b, unsigned n, Word& w) {
pack_bytes:
  for (unsigned k = 0; k < n; ++k) {
#pragma HLS UNROLL
    w.range(8 * k + 7, 8 * k) = b[k];
  }
}

void LoadWords(const Word* src, unsigned words, WordStream& out) {
load_words:
  for (unsigned i = 0; i < words; ++i) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=64 max=126
    out.write(src[i]);
  }
}

template <int T>
void EncodeWords(WordStream& in, unsigned words, ByteStream& parity) {
  using C = detail::Code<T>;
  typename C::State s = 0;
encode_words:
  for (unsigned i = 0; i < words; ++i) {
#pragma HLS LOOP_TRIPCOUNT min=64 max=126
    const Word w = in.read();
  encode_word_halves:
    for (int h = 0; h < 2; ++h) {
#pragma HLS PIPELINE II=1
      uint8_t b[4];
      for (int k = 0; k < 4; ++k) b[k] = static_cast<uint8_t>(w.range(32 * h + 8 * k + 7, 32 * h + 8 * k));
      C::Step4(s, b);
    }
  }
  uint8_t p[BchParityBytes(T)];
  C::StoreParity(s, p);
emit_parity:
  for (int j = 0; j < BchParityBytes(T); ++j) {
#pragma HLS PIPELINE II=1
    parity.write(p[j]);
  }
}

void StoreParity(ByteStream& in, int bytes, ap_uint<8>* dst) {
store_parity:
  for (int j = 0; j < bytes; ++j) {
#pragma HLS PIPELINE II=1
    dst[j] = in.read();
  }
}

template <int T>
void EncodeCodeword(const Word* data, ap_uint<8>* parity, unsigned words) {
#pragma HLS DATAFLOW
  WordStream msg("encode.msg");
  ByteStream par("encode.parity");
  LoadWords(data, words, msg);
  EncodeWords<T>(msg, words, par);
  StoreParity(par, BchParityBytes(T), parity);
}

template <int T>
void EncodeTop(const Word* data, ap_uint<8>* parity, unsigned msg_bytes, unsigned codewords) {
  const unsigned words = msg_bytes / 8;
encode_codewords:
  for (unsigned c = 0; c < codewords; ++c) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=16
    EncodeCodeword<T>(data + uint64_t{c} * words, parity + uint64_t{c} * BchParityBytes(T), words);
  }
}

// Decode: the whole codeword is buffered (the correction follows the Chien search).
struct Frame {
  uint8_t msg[kTopMaxMessageBytes];
  uint8_t parity[kTopMaxParityBytes];
};

template <int T>
void LoadFrame(WordStream& in, const ap_uint<8>* parity, unsigned words, Frame& f) {
load_frame:
  for (unsigned i = 0; i < words; ++i) {
#pragma HLS PIPELINE II=8
    Unpack(in.read(), 8, &f.msg[8 * i]);
  }
load_frame_parity:
  for (int j = 0; j < BchParityBytes(T); ++j) {
#pragma HLS PIPELINE II=1
    f.parity[j] = static_cast<uint8_t>(parity[j].to_uint());
  }
}

void StoreFrame(const Frame& f, int parity_bytes, unsigned words, Word* data, ap_uint<8>* parity) {
store_frame:
  for (unsigned i = 0; i < words; ++i) {
#pragma HLS PIPELINE II=1
    Word w = 0;
    Pack(&f.msg[8 * i], 8, w);
    data[i] = w;
  }
store_frame_parity:
  for (int j = 0; j < parity_bytes; ++j) {
#pragma HLS PIPELINE II=1
    parity[j] = f.parity[j];
  }
}

// The decoder stage: its own output frame, so each frame has one producer and one
// consumer (the DATAFLOW rule).
template <int T>
void DecodeFrame(const Frame& in, Frame& out, unsigned words, ap_uint<32>* result) {
copy_frame:
  for (unsigned i = 0; i < 8 * words; ++i) {
#pragma HLS PIPELINE II=1
    out.msg[i] = in.msg[i];
  }
  for (int j = 0; j < BchParityBytes(T); ++j) out.parity[j] = in.parity[j];
  const BchResult r = detail::Code<T>::Decode(out.msg, static_cast<int>(8 * words), out.parity);
  *result = (static_cast<unsigned>(r.status) << kTopStatusShift) | r.bits;
}

template <int T>
void DecodeCodeword(Word* data, ap_uint<8>* parity, ap_uint<32>* result, unsigned words) {
#pragma HLS DATAFLOW
  WordStream msg("decode.msg");
  Frame received, corrected;
  LoadWords(data, words, msg);
  LoadFrame<T>(msg, parity, words, received);
  DecodeFrame<T>(received, corrected, words, result);
  StoreFrame(corrected, BchParityBytes(T), words, data, parity);
}

template <int T>
void DecodeTop(Word* data, ap_uint<8>* parity, ap_uint<32>* result, unsigned msg_bytes, unsigned codewords) {
  const unsigned words = msg_bytes / 8;
decode_codewords:
  for (unsigned c = 0; c < codewords; ++c) {
#pragma HLS LOOP_TRIPCOUNT min=1 max=16
    DecodeCodeword<T>(data + uint64_t{c} * words, parity + uint64_t{c} * BchParityBytes(T), result + c, words);
  }
}

bool ValidLength(unsigned msg_bytes, int t) {
  return msg_bytes >= 8 && msg_bytes % 8 == 0 && msg_bytes <= static_cast<unsigned>(kTopMaxMessageBytes) &&
         msg_bytes <= static_cast<unsigned>(BchMaxMessageBytes(t));
}

}  // namespace
}  // namespace vslhls

using vslhls::DecodeTop;
using vslhls::EncodeTop;
using vslhls::Pack;
using vslhls::Unpack;
using vslhls::ValidLength;

// The tops share one body per t; the interface pragmas are per top, as Vitis needs them.
#define VSL_BCH_TOPS(T)                                                                           \
  void vsl_bch##T##_encode(const ap_uint<64>* data, ap_uint<8>* parity, unsigned msg_bytes,     \
                           unsigned codewords) {                                                  \
    _Pragma("HLS INTERFACE m_axi port=data bundle=gmem0 offset=slave depth=2016")                 \
    _Pragma("HLS INTERFACE m_axi port=parity bundle=gmem1 offset=slave depth=416")                \
    _Pragma("HLS INTERFACE s_axilite port=msg_bytes")                                             \
    _Pragma("HLS INTERFACE s_axilite port=codewords")                                             \
    _Pragma("HLS INTERFACE s_axilite port=return")                                                \
    if (!ValidLength(msg_bytes, T)) return;                                                       \
    EncodeTop<T>(data, parity, msg_bytes, codewords);                                             \
  }                                                                                               \
  void vsl_bch##T##_decode(ap_uint<64>* data, ap_uint<8>* parity, ap_uint<32>* result,          \
                           unsigned msg_bytes, unsigned codewords) {                              \
    _Pragma("HLS INTERFACE m_axi port=data bundle=gmem0 offset=slave depth=2016")                 \
    _Pragma("HLS INTERFACE m_axi port=parity bundle=gmem1 offset=slave depth=416")                \
    _Pragma("HLS INTERFACE m_axi port=result bundle=gmem2 offset=slave depth=16")                 \
    _Pragma("HLS INTERFACE s_axilite port=msg_bytes")                                             \
    _Pragma("HLS INTERFACE s_axilite port=codewords")                                             \
    _Pragma("HLS INTERFACE s_axilite port=return")                                                \
    if (!ValidLength(msg_bytes, T)) {                                                             \
      for (unsigned c = 0; c < codewords; ++c) {                                                  \
        result[c] = static_cast<unsigned>(vslhls::BchStatus::kUncorrectable) << vslhls::kTopStatusShift; \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    DecodeTop<T>(data, parity, result, msg_bytes, codewords);                                     \
  }

extern "C" {

VSL_BCH_TOPS(4)
VSL_BCH_TOPS(8)
VSL_BCH_TOPS(16)

void vsl_crc32c(const ap_uint<64>* data, unsigned bytes, unsigned crc_in, unsigned* crc_out) {
#pragma HLS INTERFACE m_axi port=data bundle=gmem0 offset=slave depth=512
#pragma HLS INTERFACE s_axilite port=bytes
#pragma HLS INTERFACE s_axilite port=crc_in
#pragma HLS INTERFACE s_axilite port=crc_out
#pragma HLS INTERFACE s_axilite port=return
  uint32_t crc = crc_in;
crc_words:
  for (unsigned i = 0; i < (bytes + 7) / 8; ++i) {
#pragma HLS PIPELINE II=8
#pragma HLS LOOP_TRIPCOUNT min=1 max=512
    uint8_t b[8];
    const unsigned n = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
    Unpack(data[i], n, b);
    crc = vslhls::Crc32cUpdate(b, static_cast<int>(n), crc);
  }
  *crc_out = crc;
}

void vsl_scramble(ap_uint<64>* data, unsigned bytes, unsigned seed) {
#pragma HLS INTERFACE m_axi port=data bundle=gmem0 offset=slave depth=2048
#pragma HLS INTERFACE s_axilite port=bytes
#pragma HLS INTERFACE s_axilite port=seed
#pragma HLS INTERFACE s_axilite port=return
  uint32_t s = seed;
scramble_words:
  for (unsigned i = 0; i < (bytes + 7) / 8; ++i) {
#pragma HLS PIPELINE II=8
#pragma HLS LOOP_TRIPCOUNT min=64 max=2048
    uint8_t b[8];
    const unsigned n = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
    ap_uint<64> w = data[i];
    Unpack(w, n, b);
    s = vslhls::Scramble(b, static_cast<int>(n), s);
    Pack(b, n, w);
    data[i] = w;
  }
}

}  // extern "C"
