#include "vsl/hw/alveo.h"

namespace vsl::hw {

void AttachAlveoKernel(RegMemPort& port, const AlveoBuffers& b, const AlveoKernelSetup& setup, Clock& clock,
                       Function<void(Result<AlveoPipes>)> done) {
  if (Status s = SetUpAlveoKernel(port, b.store_base, setup); !s.ok()) {
    done(s);
    return;
  }
  auto out = std::make_shared<AlveoPipes>();
  for (uint32_t i = 0; i < 2; ++i) {
    auto pipe = ControllerPipe::Create(port, clock, i, b.region_base[i], b.region_bytes);
    if (!pipe.ok()) {
      done(pipe.status());
      return;
    }
    out->pipes[i] = std::move(pipe).value();
  }
  // Pipe 0, then pipe 1.
  auto d = std::make_shared<Function<void(Result<AlveoPipes>)>>(std::move(done));
  out->pipes[0]->Init([out, d](Status s0) {
    if (!s0.ok()) {
      (*d)(s0);
      return;
    }
    out->pipes[1]->Init([out, d](Status s1) {
      if (!s1.ok()) {
        (*d)(s1);
        return;
      }
      (*d)(std::move(*out));
    });
  });
}

}  // namespace vsl::hw
