// spark::Status and spark::Result<T>: error values that carry a code and a message up the stack.
//
// Every function that can fail returns one of these; no exception crosses a library boundary.
// Messages are written for the user: they name the node, file, line or key and, where possible,
// the fix. Context is prepended as the error travels up ("spark-2: preflight: ...").
// Thread-safety: values; a Status may be copied between threads freely.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace spark {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kPermissionDenied,
  kResourceExhausted,
  kUnavailable,
  kDeadlineExceeded,
  kAborted,
  kCancelled,
  kDataLoss,
  kUnimplemented,
  kInternal,
};

// "InvalidArgument", "NotFound", ...
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NotFound: spark-1: /etc/machine-id: no such file".
  std::string ToString() const;

  // A copy with "context: " prepended to the message; OK stays OK.
  Status WithContext(std::string_view context) const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status AbortedError(std::string message);
Status CancelledError(std::string message);
Status DataLossError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);

// Status from errno: ENOENT -> NotFound, EACCES -> PermissionDenied, ... with strerror appended.
Status ErrnoError(int err, std::string_view what);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = InternalError("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  std::optional<T> value_;
  Status status_;
};

namespace internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace spark

#define SPARK_CONCAT_INNER_(a, b) a##b
#define SPARK_CONCAT_(a, b) SPARK_CONCAT_INNER_(a, b)

// Returns from the calling function when `expr` (a Status or Result) is not OK.
#define SPARK_RETURN_IF_ERROR(expr)                                        \
  do {                                                                     \
    ::spark::Status spark_status_ = ::spark::internal::AsStatus((expr));   \
    if (!spark_status_.ok()) return spark_status_;                         \
  } while (0)

// SPARK_ASSIGN_OR_RETURN(auto x, MakeX()); — declares/assigns or returns the error.
#define SPARK_ASSIGN_OR_RETURN(lhs, expr) \
  SPARK_ASSIGN_OR_RETURN_IMPL_(SPARK_CONCAT_(spark_result_, __LINE__), lhs, expr)
#define SPARK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
