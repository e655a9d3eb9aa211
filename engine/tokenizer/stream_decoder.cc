#include "engine/tokenizer/stream_decoder.h"

#include "engine/tokenizer/utf8.h"

namespace spark::tokenizer {

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tokenizer_->TokenBytes(id);
  const size_t ready = Utf8EmittablePrefix(pending_);
  if (ready == 0) return std::string();
  std::string text = Utf8Lossy(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return text;
}

std::string StreamDecoder::Flush() {
  std::string text = Utf8Lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace spark::tokenizer
