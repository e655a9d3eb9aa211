#include "engine/tokenizer/normalizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <vector>

namespace spark::tokenizer {
namespace {

const icu::Normalizer2* Instance(NormalForm form, UErrorCode& err) {
  switch (form) {
    case NormalForm::kNfc:
      return icu::Normalizer2::getNFCInstance(err);
    case NormalForm::kNfd:
      return icu::Normalizer2::getNFDInstance(err);
    case NormalForm::kNfkc:
      return icu::Normalizer2::getNFKCInstance(err);
    case NormalForm::kNfkd:
      return icu::Normalizer2::getNFKDInstance(err);
  }
  return nullptr;
}

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// The code points of valid UTF-8 `text`.
std::vector<UChar32> CodePoints(std::string_view text) {
  std::vector<UChar32> out;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(s, i, length, c);
    out.push_back(c < 0 ? 0xFFFD : c);
  }
  return out;
}

void Append(std::string& out, UChar32 c) { icu::UnicodeString(c).toUTF8String(out); }

}  // namespace

std::string StripMarks(std::string_view text) {
  std::string out;
  for (UChar32 c : CodePoints(text)) {
    const int8_t type = u_charType(c);
    if (type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK ||
        type == U_ENCLOSING_MARK) {
      continue;
    }
    Append(out, c);
  }
  return out;
}

std::string LowercaseChars(std::string_view text) {
  if (IsAscii(text)) {
    std::string out(text);
    for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return out;
  }
  std::string out;
  for (UChar32 c : CodePoints(text)) {
    icu::UnicodeString one(c);
    one.toLower(icu::Locale::getRoot());
    one.toUTF8String(out);
  }
  return out;
}

std::string StripWhiteSpace(std::string_view text) {
  const std::vector<UChar32> cps = CodePoints(text);
  size_t begin = 0, end = cps.size();
  while (begin < end && u_isUWhiteSpace(cps[begin])) ++begin;
  while (end > begin && u_isUWhiteSpace(cps[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) Append(out, cps[i]);
  return out;
}

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
