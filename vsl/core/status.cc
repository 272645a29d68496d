#include "vsl/core/status.h"

#include <cerrno>
#include <cstring>

namespace vsl {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kNoSpace: return "NoSpace";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kTimedOut: return "TimedOut";
    case StatusCode::kNotSupported: return "NotSupported";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    rep_ = std::make_shared<const Rep>(Rep{code, std::string(message)});
  }
}

Status Status::FromErrno(int err, std::string_view message) {
  std::string m(message);
  m += ": ";
  m += std::strerror(err);
  StatusCode code = StatusCode::kIOError;
  switch (err) {
    case ENOENT: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case ENOSPC: code = StatusCode::kNoSpace; break;
    case EINVAL: code = StatusCode::kInvalidArgument; break;
    case EBUSY:
    case EAGAIN: code = StatusCode::kBusy; break;
    case ETIMEDOUT: code = StatusCode::kTimedOut; break;
    default: break;
  }
  return Status(code, m);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code()));
  s += ": ";
  s += message();
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message();
  return Status(code(), m);
}

int Status::ToErrno() const {
  switch (code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return -EINVAL;
    case StatusCode::kNotFound: return -ENOENT;
    case StatusCode::kAlreadyExists: return -EEXIST;
    case StatusCode::kCorruption: return -EUCLEAN;
    case StatusCode::kIOError: return -EIO;
    case StatusCode::kNoSpace: return -ENOSPC;
    case StatusCode::kBusy: return -EBUSY;
    case StatusCode::kAborted: return -ECANCELED;
    case StatusCode::kTimedOut: return -ETIMEDOUT;
    case StatusCode::kNotSupported: return -EOPNOTSUPP;
    case StatusCode::kFailedPrecondition: return -EPERM;
    case StatusCode::kInternal: return -EFAULT;
  }
  return -EIO;
}

}  // namespace vsl
