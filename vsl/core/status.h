// Status and Result<T>: the one error type of the host stack.
//
// Contract: functions that can fail return a [[nodiscard]] Status or Result<T>. No
// exceptions cross module boundaries; -errno appears only at the C and protocol edges
// (see ToErrno). A Status is cheap to copy when OK (no allocation).
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace vsl {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,     // the caller passed something malformed or out of range
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // creating something that is already there
  kCorruption,          // stored data failed a check (magic, CRC, version, bounds)
  kIOError,             // the medium or the OS failed an operation
  kNoSpace,             // no room left (device full, buffer full)
  kBusy,                // try again later (resource held, queue full)
  kAborted,             // the operation was cancelled (reset, power loss, shutdown)
  kTimedOut,            // no answer in time (e.g. a die that stopped responding)
  kNotSupported,        // valid request this build or device cannot do
  kFailedPrecondition,  // the system is not in a state that allows this
  kInternal,            // a broken invariant: a bug
};

// Human name of a code, e.g. "Corruption".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string_view m) { return {StatusCode::kInvalidArgument, m}; }
  static Status NotFound(std::string_view m) { return {StatusCode::kNotFound, m}; }
  static Status AlreadyExists(std::string_view m) { return {StatusCode::kAlreadyExists, m}; }
  static Status Corruption(std::string_view m) { return {StatusCode::kCorruption, m}; }
  static Status IOError(std::string_view m) { return {StatusCode::kIOError, m}; }
  static Status NoSpace(std::string_view m) { return {StatusCode::kNoSpace, m}; }
  static Status Busy(std::string_view m) { return {StatusCode::kBusy, m}; }
  static Status Aborted(std::string_view m) { return {StatusCode::kAborted, m}; }
  static Status TimedOut(std::string_view m) { return {StatusCode::kTimedOut, m}; }
  static Status NotSupported(std::string_view m) { return {StatusCode::kNotSupported, m}; }
  static Status FailedPrecondition(std::string_view m) {
    return {StatusCode::kFailedPrecondition, m};
  }
  static Status Internal(std::string_view m) { return {StatusCode::kInternal, m}; }
  // An IOError carrying strerror(err) after the message.
  static Status FromErrno(int err, std::string_view message);

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : ""; }
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  // Returns a copy with "context: " put before the message (OK stays OK).
  Status WithContext(std::string_view context) const;
  // Negative errno for C and protocol edges (0 when OK).
  int ToErrno() const;

  bool operator==(const Status& o) const { return code() == o.code(); }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null when OK
};

// Either a value or a non-OK Status. Accessing value() of an error is a bug (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace vsl

#define VSL_CONCAT_INNER_(a, b) a##b
#define VSL_CONCAT_(a, b) VSL_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define VSL_RETURN_IF_ERROR(expr)               \
  do {                                          \
    ::vsl::Status vsl_status_ = (expr);         \
    if (!vsl_status_.ok()) return vsl_status_;  \
  } while (0)

// `lhs = value of expr`, or returns its Status from the enclosing function.
#define VSL_ASSIGN_OR_RETURN(lhs, expr) \
  VSL_ASSIGN_OR_RETURN_IMPL_(VSL_CONCAT_(vsl_result_, __LINE__), lhs, expr)
#define VSL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
