#include "base/field_errors.h"

namespace spark {

Status FieldErrors::ToStatus(const std::string& what) const {
  if (errors_.empty()) return Status::Ok();
  std::string message = what + ": " + std::to_string(errors_.size()) +
                        (errors_.size() == 1 ? " error" : " errors");
  for (const auto& e : errors_) {
    message += "\n  " + (e.path.empty() ? std::string("(document)") : e.path) + ": " + e.message;
  }
  return InvalidArgumentError(std::move(message));
}

}  // namespace spark
