#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "base/strings.h"

namespace spark {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  SPARK_ASSIGN_OR_RETURN(int h, Half(x));
  SPARK_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  SPARK_RETURN_IF_ERROR(Half(x));
  return Status::Ok();
}

TEST(StatusTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).ToString(), "InvalidArgument: 5 is odd");
}

TEST(StatusTest, ContextIsPrepended) {
  Status s = NotFoundError("no such file").WithContext("spark-2").WithContext("preflight");
  EXPECT_EQ(s.message(), "preflight: spark-2: no such file");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoError(ENOENT, "f").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError(EACCES, "f").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError(ENOSPC, "f").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoError(ECONNREFUSED, "f").code(), StatusCode::kUnavailable);
  EXPECT_NE(ErrnoError(ENOENT, "/x").message().find("/x: "), std::string::npos);
}

TEST(StatusTest, ResultFromOkStatusIsAnError) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(StringsTest, DidYouMeanFindsCloseKeysOnly) {
  std::vector<std::string> keys = {"engine", "topology", "model"};
  EXPECT_EQ(DidYouMean("enigne", keys), " (did you mean 'engine'?)");
  EXPECT_EQ(DidYouMean("topolgy", keys), " (did you mean 'topology'?)");
  EXPECT_EQ(DidYouMean("zzz", keys), "");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("rign", "ring"), 1u);
  EXPECT_EQ(DidYouMean("identity", {"identity_file", "port"}), " (did you mean 'identity_file'?)");
}

TEST(StringsTest, FormatNumberWritesNumbersAsPeopleDo) {
  EXPECT_EQ(FormatNumber(-1), "-1");
  EXPECT_EQ(FormatNumber(0.82), "0.82");
  EXPECT_EQ(FormatNumber(0.0005), "0.0005");
  EXPECT_EQ(FormatNumber(1048576), "1048576");
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(1e-9), "1e-09");
}

TEST(StringsTest, Utf8PrefixCutsBeforeACharacter) {
  const std::string text = "a\xC2\xB7" "b\xE2\x82\xAC";  // a, middle dot, b, euro sign
  EXPECT_EQ(Utf8Prefix(text, 100), text);
  EXPECT_EQ(Utf8Prefix(text, 1), "a");
  EXPECT_EQ(Utf8Prefix(text, 2), "a");
  EXPECT_EQ(Utf8Prefix(text, 3), "a\xC2\xB7");
  EXPECT_EQ(Utf8Prefix(text, 6), "a\xC2\xB7" "b");
  EXPECT_EQ(Utf8Prefix(text, 0), "");
}

TEST(StringsTest, SplitTrimJoin) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("a,,b", ',', true), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Trim("  x y \n"), "x y");
  EXPECT_EQ(Join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(ParseInt("42"), 42);
  EXPECT_FALSE(ParseInt("4x2").has_value());
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
}

}  // namespace
}  // namespace spark
