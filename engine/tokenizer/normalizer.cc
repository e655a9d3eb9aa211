#include "engine/tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

namespace spark::tokenizer {
namespace {

const icu::Normalizer2* Instance(NormalForm form, UErrorCode& err) {
  switch (form) {
    case NormalForm::kNfc: return icu::Normalizer2::getNFCInstance(err);
    case NormalForm::kNfd: return icu::Normalizer2::getNFDInstance(err);
    case NormalForm::kNfkc: return icu::Normalizer2::getNFKCInstance(err);
    case NormalForm::kNfkd: return icu::Normalizer2::getNFKDInstance(err);
  }
  return nullptr;
}

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Result<Normalizer> Normalizer::Create(std::vector<NormalForm> forms) {
  for (NormalForm form : forms) {
    UErrorCode err = U_ZERO_ERROR;
    if (Instance(form, err) == nullptr || U_FAILURE(err)) {
      return InvalidArgumentError(std::string("ICU normaliser unavailable: ") + u_errorName(err));
    }
  }
  Normalizer normalizer;
  normalizer.forms_ = std::move(forms);
  return normalizer;
}

Result<std::string> Normalizer::Apply(std::string_view text) const {
  // Every normal form leaves ASCII unchanged, so most text skips ICU entirely.
  if (forms_.empty() || IsAscii(text)) return std::string(text);
  icu::UnicodeString ustr = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  for (NormalForm form : forms_) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* norm = Instance(form, err);
    if (norm->isNormalized(ustr, err) && U_SUCCESS(err)) continue;
    err = U_ZERO_ERROR;
    ustr = norm->normalize(ustr, err);
    if (U_FAILURE(err)) return InternalError(std::string("ICU normalize: ") + u_errorName(err));
  }
  std::string out;
  ustr.toUTF8String(out);
  return out;
}

}  // namespace spark::tokenizer
