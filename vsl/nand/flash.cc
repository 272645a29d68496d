#include "vsl/nand/flash.h"

namespace vsl::nand {

std::string_view FlashStatusName(FlashStatus s) {
  switch (s) {
    case FlashStatus::kOk: return "ok";
    case FlashStatus::kUncorrectable: return "uncorrectable";
    case FlashStatus::kProgramFail: return "program-fail";
    case FlashStatus::kEraseFail: return "erase-fail";
    case FlashStatus::kDieTimeout: return "die-timeout";
    case FlashStatus::kAborted: return "aborted";
    case FlashStatus::kInvalidAddress: return "invalid-address";
    case FlashStatus::kRuleViolation: return "rule-violation";
    case FlashStatus::kFenced: return "fenced";
  }
  return "unknown";
}

std::string_view PlpStateName(PlpState s) {
  switch (s) {
    case PlpState::kHealthy: return "healthy";
    case PlpState::kFailed: return "failed";
    case PlpState::kAbsent: return "absent";
  }
  return "unknown";
}

}  // namespace vsl::nand
