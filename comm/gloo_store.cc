#include "comm/gloo_store.h"

#include <gloo/common/error.h>

namespace spark::comm {

void GlooStore::Fail(Status status) {
  last_error_ = std::move(status);
  throw ::gloo::IoException(last_error_.ToString());
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Status status = rendezvous_->Set(prefix_ + key, data);
  if (!status.ok()) Fail(std::move(status));
}

std::vector<char> GlooStore::get(const std::string& key) {
  auto value = rendezvous_->Get(prefix_ + key, timeout_);
  if (!value.ok()) {
    if (value.status().code() == StatusCode::kNotFound) {
      Fail(DeadlineExceededError(value.status().message() + " within " +
                                 std::to_string(timeout_.count()) + " ms"));
    }
    Fail(value.status());
  }
  return std::move(value).value();
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const auto wait = timeout.count() > 0 ? timeout : timeout_;
  const auto deadline = Clock::now() + wait;
  for (const std::string& key : keys) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto value = rendezvous_->Get(prefix_ + key, std::max(left, std::chrono::milliseconds(0)));
    if (value.ok()) continue;
    if (value.status().code() == StatusCode::kNotFound) {
      Fail(DeadlineExceededError(value.status().message() + " within " +
                                 std::to_string(wait.count()) + " ms"));
    }
    Fail(value.status());
  }
}

}  // namespace spark::comm
