#include "engine/backend/backend.h"

namespace spark::engine::backend {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_;
    size_ = other.size_;
    release_ = std::move(other.release_);
    other.data_ = nullptr;
    other.size_ = 0;
    other.release_ = nullptr;
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr && release_) release_(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace spark::engine::backend
