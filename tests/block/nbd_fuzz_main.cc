// Deterministic driver for the NBD fuzz target (no libFuzzer needed): runs the seeds, then
// VSL_FUZZ_ITERATIONS (default 20000) mutations of them from a fixed RNG seed, so the suite
// exercises the parser on every build. `nbd_fuzz_replay --write-seeds DIR` writes the seeds
// as a starting corpus for the libFuzzer build; `nbd_fuzz_replay FILE...` replays inputs
// (a crash file libFuzzer left).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::vector<std::vector<uint8_t>> NbdFuzzSeeds();

int main(int argc, char** argv) {
  const auto seeds = NbdFuzzSeeds();
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream(std::string(argv[2]) + "/seed" + std::to_string(i), std::ios::binary)
          .write(reinterpret_cast<const char*>(seeds[i].data()), static_cast<std::streamsize>(seeds[i].size()));
    }
    return 0;
  }
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(d.data(), d.size());
      std::printf("replayed %s (%zu bytes)\n", argv[i], d.size());
    }
    return 0;
  }
  const char* it = std::getenv("VSL_FUZZ_ITERATIONS");
  const long iterations = it ? std::atol(it) : 20000;
  std::mt19937_64 rng(20261201);
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  for (long n = 0; n < iterations; ++n) {
    std::vector<uint8_t> d = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !d.empty(); ++e) {
      const std::size_t at = rng() % d.size();
      switch (rng() % 5) {
        case 0: d[at] = static_cast<uint8_t>(rng()); break;                       // byte
        case 1: d[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;          // bit
        case 2: d.resize(at); break;                                              // cut
        case 3: d.insert(d.begin() + static_cast<long>(at), rng() % 64, static_cast<uint8_t>(rng())); break;
        case 4: {  // a length or offset field set to an edge value
          static const uint8_t edge[] = {0x00, 0xFF, 0x7F, 0x80, 0x01};
          for (std::size_t k = at; k < d.size() && k < at + 4; ++k) d[k] = edge[rng() % 5];
          break;
        }
      }
    }
    LLVMFuzzerTestOneInput(d.data(), d.size());
  }
  std::printf("%zu seeds and %ld mutations ran\n", seeds.size(), iterations);
  return 0;
}
