// The synthesizable ECC engine (rtl/ecc/vsl_ecc_bch.sv, Verilated) against the hls/ BCH
// codec, which the DPI-C model and the software card use: for encode, the spare bytes it
// writes are the codec's parity (then zeroes); for decode, the page after its fix writes,
// the bits corrected and the uncorrectable flag are the codec's, page by page, over
// clean pages, 1..t errors per codeword, more than t (uncorrectable or miscorrected, the
// same as the codec), erased pages with a few zero bits, and geometries it cannot
// protect. Seeds: VSL_SEEDS (default 120 pages per geometry).
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "Vvsl_ecc_bch.h"
#include "hls/bch.h"
#include "vsl/core/random.h"

namespace vsl::testing {
namespace {

constexpr uint32_t kCw = 512, kParity = 13;

struct Result {
  std::vector<uint8_t> page;  // after the fix writes
  uint32_t corrected = 0;
  bool uncorrectable = false;
  uint64_t cycles = 0;        // from in_last to done
};

class Engine {
 public:
  Engine() : m_(std::make_unique<Vvsl_ecc_bch>(&ctx_)) {
    m_->rst_n = 0;
    Tick();
    m_->rst_n = 1;
    Tick();
  }
  void Tick() {
    m_->clk = 0;
    m_->eval();
    m_->clk = 1;
    m_->eval();
    if (m_->fix_valid) fixes_.emplace_back(m_->fix_addr, m_->fix_data);
  }
  // Runs one page: encode takes the message (data + meta) 8 bytes a cycle, decode the
  // whole page a byte every other cycle (as the pipe feeds it from the bus).
  Result Run(bool decode, uint32_t data, uint32_t meta, uint32_t spare, const std::vector<uint8_t>& in) {
    fixes_.clear();
    m_->start = 1;
    m_->decode = decode;
    m_->data_bytes = data;
    m_->meta_bytes = meta;
    m_->spare_bytes = spare;
    Tick();
    m_->start = 0;
    if (!decode) {
      for (size_t i = 0; i < in.size(); i += 8) {
        uint64_t w = 0;
        for (size_t k = 0; k < 8 && i + k < in.size(); ++k) w |= uint64_t{in[i + k]} << (8 * k);
        m_->in_valid = 1;
        m_->in_word = w;
        m_->in_nbytes = 8;
        m_->in_last = i + 8 >= in.size();
        Tick();
      }
    } else {
      for (size_t i = 0; i < in.size(); ++i) {
        m_->in_valid = 1;
        m_->in_word = in[i];
        m_->in_nbytes = 1;
        m_->in_last = i + 1 == in.size();
        Tick();
        m_->in_valid = 0;
        m_->in_last = 0;
        Tick();
      }
    }
    m_->in_valid = 0;
    m_->in_last = 0;
    Result r;
    r.page.assign(data + spare, 0);
    std::copy(in.begin(), in.end(), r.page.begin());
    while (!m_->done && r.cycles < 200000) {
      Tick();
      ++r.cycles;
    }
    EXPECT_TRUE(m_->done) << "the engine never finished";
    for (const auto& [a, v] : fixes_) {
      EXPECT_LT(a, r.page.size()) << "fix write outside the page";
      if (a < r.page.size()) r.page[a] = v;
    }
    r.corrected = m_->corrected;
    r.uncorrectable = m_->uncorrectable;
    Tick();  // done is a pulse
    return r;
  }

 private:
  VerilatedContext ctx_;
  std::unique_ptr<Vvsl_ecc_bch> m_;
  std::vector<std::pair<uint32_t, uint8_t>> fixes_;
};

// The page the codec makes of a message: data, meta, then each codeword's parity, zeroes.
std::vector<uint8_t> Encoded(const std::vector<uint8_t>& msg, uint32_t data, uint32_t meta, uint32_t spare) {
  std::vector<uint8_t> page(data + spare, 0);
  std::copy(msg.begin(), msg.end(), page.begin());
  const uint32_t n = data / kCw;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = kCw + (i == n - 1 ? meta : 0);
    vslhls::BchEncode(8, page.data() + i * kCw, static_cast<int>(len), page.data() + data + meta + i * kParity);
  }
  return page;
}

// The codec's decode of a page (what the DPI model answers).
Result Reference(std::vector<uint8_t> page, uint32_t data, uint32_t meta, uint32_t spare) {
  Result r;
  const uint32_t n = data / kCw;
  if (data % kCw != 0 || data + meta + n * kParity > data + spare || n == 0) {
    r.uncorrectable = true;
    r.page = page;
    return r;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = kCw + (i == n - 1 ? meta : 0);
    const auto res = vslhls::BchDecode(8, page.data() + i * kCw, static_cast<int>(len),
                                       page.data() + data + meta + i * kParity);
    if (res.status == vslhls::BchStatus::kUncorrectable) r.uncorrectable = true;
    r.corrected += res.bits;
  }
  r.page = page;
  return r;
}

// Flips `k` distinct bits of codeword i (message and parity) of `page`.
void Flip(std::vector<uint8_t>* page, Rng& rng, uint32_t data, uint32_t meta, uint32_t i, uint32_t k) {
  const uint32_t n = data / kCw;
  const uint32_t len = kCw + (i == n - 1 ? meta : 0);
  std::map<uint32_t, bool> done;
  while (done.size() < k) {
    const auto b = static_cast<uint32_t>(rng.Below((len + kParity) * 8));
    if (done[b]) continue;
    done[b] = true;
    const uint32_t byte = b / 8 < len ? i * kCw + b / 8 : data + meta + i * kParity + (b / 8 - len);
    (*page)[byte] ^= static_cast<uint8_t>(1u << (b % 8));
  }
}

struct Geometry {
  uint32_t data, meta, spare;
};

class EccRtlTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(EccRtlTest, EncodeAndDecodeMatchTheCodec) {
  const Geometry g = GetParam();
  const char* e = std::getenv("VSL_SEEDS");
  const int pages = e ? std::atoi(e) : 120;
  Engine eng;
  Rng rng(g.data * 7 + g.meta);
  const uint32_t n = g.data / kCw;
  uint64_t max_cycles = 0, corrected = 0, unc_pages = 0, erased_pages = 0;
  for (int p = 0; p < pages; ++p) {
    std::vector<uint8_t> msg(g.data + g.meta);
    rng.Fill(msg.data(), msg.size());
    const auto page = Encoded(msg, g.data, g.meta, g.spare);
    // Encode: the spare behind the metadata is the codec's.
    const Result enc = eng.Run(false, g.data, g.meta, g.spare, msg);
    ASSERT_EQ(enc.page, page) << "page " << p << ": parity differs from the codec's";
    // Decode a damaged copy: per codeword 0..t errors, now and then more, or an erased
    // page with a few zero bits.
    std::vector<uint8_t> rx = page;
    const uint64_t kind = rng.Below(10);
    if (kind == 0) {  // erased, with up to t+2 zero bits per codeword
      std::fill(rx.begin(), rx.end(), 0xFF);
      for (uint32_t i = 0; i < n; ++i) Flip(&rx, rng, g.data, g.meta, i, static_cast<uint32_t>(rng.Below(11)));
      // the padding zeroes behind the parity stay as the page has them
      for (uint32_t a = g.data + g.meta + n * kParity; a < g.data + g.spare; ++a) rx[a] = 0;
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t k = kind == 1 ? static_cast<uint32_t>(rng.Range(9, 14)) : static_cast<uint32_t>(rng.Below(9));
        Flip(&rx, rng, g.data, g.meta, i, k);
      }
    }
    const Result want = Reference(rx, g.data, g.meta, g.spare);
    const Result got = eng.Run(true, g.data, g.meta, g.spare, rx);
    ASSERT_EQ(got.uncorrectable, want.uncorrectable) << "page " << p << " kind " << kind;
    ASSERT_EQ(got.corrected, want.corrected) << "page " << p << " kind " << kind;
    ASSERT_EQ(got.page, want.page) << "page " << p << " kind " << kind;
    max_cycles = std::max(max_cycles, got.cycles);
    corrected += got.corrected;
    unc_pages += got.uncorrectable;
    erased_pages += kind == 0;
  }
  std::printf("%u+%u (meta %u): %d pages, %llu bits corrected, %llu uncorrectable pages, %llu erased-page trials; "
              "decode done at most %llu cycles after the last byte\n",
              g.data, g.spare, g.meta, pages, static_cast<unsigned long long>(corrected),
              static_cast<unsigned long long>(unc_pages), static_cast<unsigned long long>(erased_pages),
              static_cast<unsigned long long>(max_cycles));
}

// A clean page costs nothing after its last byte; a short message is padded with 0xFF;
// geometries the code cannot lay out are not protected (decode uncorrectable, nothing
// written), as in the model.
TEST(EccRtlEdgeTest, CleanPagesAndBadGeometries) {
  Engine eng;
  Rng rng(5);
  std::vector<uint8_t> msg(4096 + 120);
  rng.Fill(msg.data(), msg.size());
  const auto page = Encoded(msg, 4096, 120, 224);
  const Result clean = eng.Run(true, 4096, 120, 224, page);
  EXPECT_EQ(clean.page, page);
  EXPECT_EQ(clean.corrected, 0u);
  EXPECT_FALSE(clean.uncorrectable);
  EXPECT_LT(clean.cycles, 20u);
  // A message shorter than data + metadata: the missing bytes count as 0xFF (as in the
  // model), one word or several short.
  for (const uint32_t given : {4096u + 112u, 4096u, 2048u}) {
    std::vector<uint8_t> m(4096 + 120, 0xFF);
    rng.Fill(m.data(), given);
    const std::vector<uint8_t> shortmsg(m.begin(), m.begin() + given);
    const Result en = eng.Run(false, 4096, 120, 224, shortmsg);
    const auto want = Encoded(m, 4096, 120, 224);
    EXPECT_TRUE(std::equal(want.begin() + 4096 + 120, want.end(), en.page.begin() + 4096 + 120))
        << given << " bytes given: parity differs from the codec's over the 0xFF-padded message";
  }
  for (const Geometry g : {Geometry{4000, 100, 224}, Geometry{4096, 200, 224}, Geometry{8192, 64, 448}}) {
    std::vector<uint8_t> raw(g.data + g.spare);
    rng.Fill(raw.data(), raw.size());
    const Result d = eng.Run(true, g.data, g.meta, g.spare, raw);
    EXPECT_TRUE(d.uncorrectable) << g.data << "+" << g.spare;
    EXPECT_EQ(d.page, raw);
    std::vector<uint8_t> m(g.data + g.meta);
    const Result en = eng.Run(false, g.data, g.meta, g.spare, m);
    EXPECT_FALSE(en.uncorrectable);
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, EccRtlTest,
                         ::testing::Values(Geometry{4096, 120, 224}, Geometry{2048, 16, 80}, Geometry{512, 0, 16},
                                           Geometry{4096, 0, 104}),
                         [](const auto& param_info) {
                           return std::to_string(param_info.param.data) + "_" + std::to_string(param_info.param.meta) + "_" +
                                  std::to_string(param_info.param.spare);
                         });

}  // namespace
}  // namespace vsl::testing
