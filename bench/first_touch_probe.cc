// What this machine charges a process for the first write to a page of a shared file
// mapping whose pages already exist, the way the simulated card's image is written: a
// child process allocates every page of a file in /dev/shm, then this process maps it
// and copies 8,640-byte page slots (a duo-slc page with its spare) into it twice over.
// The first pass pays whatever the memory virtualization does per page on a process's
// first touch; the second is the copy alone. The in-process zero-time rows of
// docs/performance.md program into image pages that are new to vsl-bench's process, so
// their CPU per write carries the first figure (bench/perf_zerotime.py prints both).
//
//   first_touch_probe [--mib N]     (default 256); one JSON line:
//   {"first_us_per_slot": .., "second_us_per_slot": .., "slot_bytes": 8640, "mib": N}
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Fail(const char* what) {
  std::perror(what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoul(argv[i + 1], nullptr, 10);
  }
  constexpr std::size_t kSlot = 8640;
  const std::size_t bytes = mib << 20;
  const std::string path = "/dev/shm/openvsl-first-touch-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Fail("open");
  ::unlink(path.c_str());  // gone when the last descriptor closes
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return Fail("ftruncate");
  const pid_t child = ::fork();
  if (child < 0) return Fail("fork");
  if (child == 0) {
    // Another process allocates every page, so what the parent measures is not the
    // allocation.
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) ::_exit(1);
    auto* p = static_cast<volatile unsigned char*>(m);
    for (std::size_t o = 0; o < bytes; o += 4096) p[o] = 1;
    ::_exit(0);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "the allocating child failed\n");
    return 1;
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return Fail("mmap");
  auto* dst = static_cast<unsigned char*>(m);
  const std::vector<unsigned char> src(kSlot, 7);
  const std::size_t slots = bytes / kSlot;
  double us[2];
  for (int pass = 0; pass < 2; ++pass) {
    const double t0 = NowUs();
    for (std::size_t i = 0; i < slots; ++i) std::memcpy(dst + i * kSlot, src.data(), kSlot);
    us[pass] = (NowUs() - t0) / static_cast<double>(slots);
  }
  std::printf("{\"first_us_per_slot\": %.3f, \"second_us_per_slot\": %.3f, \"slot_bytes\": %zu, \"mib\": %zu}\n",
              us[0], us[1], kSlot, mib);
  ::munmap(m, bytes);
  ::close(fd);
  return 0;
}
