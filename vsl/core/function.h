// Function<R(Args...)>: a move-only callable with inline storage.
//
// Used for timers and completions on the engine hot path: a callable whose size is at most
// kInlineBytes (and nothrow-movable) is stored inline, so posting it allocates nothing.
// Larger callables fall back to the heap. Invoking an empty Function is a bug (asserted).
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cassert>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace vsl {

template <typename Sig>
class Function;

template <typename R, typename... Args>
class Function<R(Args...)> {
 public:
  static constexpr std::size_t kInlineBytes = 48;

  Function() = default;
  Function(std::nullptr_t) {}  // NOLINT
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::decay_t<F>, Function> &&
                            std::is_invocable_r_v<R, std::decay_t<F>&, Args...>>>
  Function(F&& f) {  // NOLINT: implicit like std::function
    using D = std::decay_t<F>;
    if constexpr (sizeof(D) <= kInlineBytes && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<D>) {
      new (&storage_) D(std::forward<F>(f));
      ops_ = &InlineOps<D>::kOps;
    } else {
      *reinterpret_cast<D**>(&storage_) = new D(std::forward<F>(f));
      ops_ = &HeapOps<D>::kOps;
    }
  }
  Function(Function&& o) noexcept { MoveFrom(o); }
  Function& operator=(Function&& o) noexcept {
    if (this != &o) {
      Reset();
      MoveFrom(o);
    }
    return *this;
  }
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function() { Reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) {
    assert(ops_ != nullptr && "calling an empty vsl::Function");
    return ops_->invoke(&storage_, std::forward<Args>(args)...);
  }
  void Reset() {
    if (ops_ != nullptr) {
      ops_->destroy(&storage_);
      ops_ = nullptr;
    }
  }

 private:
  struct Ops {
    R (*invoke)(void*, Args&&...);
    void (*move)(void* dst, void* src);  // move-constructs dst from src, destroys src
    void (*destroy)(void*);
  };
  template <typename D>
  struct InlineOps {
    static R Invoke(void* s, Args&&... a) {
      return (*static_cast<D*>(s))(std::forward<Args>(a)...);
    }
    static void Move(void* dst, void* src) {
      new (dst) D(std::move(*static_cast<D*>(src)));
      static_cast<D*>(src)->~D();
    }
    static void Destroy(void* s) { static_cast<D*>(s)->~D(); }
    static constexpr Ops kOps{&Invoke, &Move, &Destroy};
  };
  template <typename D>
  struct HeapOps {
    static R Invoke(void* s, Args&&... a) {
      return (**static_cast<D**>(s))(std::forward<Args>(a)...);
    }
    static void Move(void* dst, void* src) {
      *static_cast<D**>(dst) = *static_cast<D**>(src);
    }
    static void Destroy(void* s) { delete *static_cast<D**>(s); }
    static constexpr Ops kOps{&Invoke, &Move, &Destroy};
  };

  void MoveFrom(Function& o) {
    if (o.ops_ != nullptr) {
      o.ops_->move(&storage_, &o.storage_);
      ops_ = o.ops_;
      o.ops_ = nullptr;
    }
  }

  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

// A unit of work run on an engine.
using Task = Function<void()>;

}  // namespace vsl
