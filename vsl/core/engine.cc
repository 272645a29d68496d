#include <sys/prctl.h>

#include "vsl/core/engine.h"
#include "vsl/core/thread_name.h"

#include <cstdio>
#include <cstdlib>
#include <future>

namespace vsl {

void Engine::OnWrongThread() const {
  std::fprintf(stderr, "vsl: engine '%s' used from a thread that does not own it\n",
               name_.c_str());
  std::abort();
}

EngineThread::EngineThread(std::string name) : engine_(std::move(name), clock_) {
  std::promise<void> started;
  auto f = started.get_future();
  thread_ = std::thread([this, &started] {
    // Timers model flash latencies of tens of microseconds; Linux's default 50 us timer
    // slack would add that much to every modelled operation.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    SetThreadName("vsl-" + engine_.name());
    engine_.BindToCurrentThread();
    started.set_value();
    clock_.Run();
  });
  f.wait();
}

EngineThread::~EngineThread() {
  clock_.Stop();
  thread_.join();
}

void EngineThread::RunSync(Task task) {
  std::promise<void> done;
  auto f = done.get_future();
  while (!engine_.Submit([&task, &done] {
    task();
    done.set_value();
  })) {
    std::this_thread::yield();
  }
  f.wait();
}

}  // namespace vsl
