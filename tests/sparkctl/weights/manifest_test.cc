// Manifest parsing, formatting and SHA256SUMS interop. Expected hashes come from sha256sum.
#include "sparkctl/weights/manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sparkctl/weights/sha256.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadBytes;
using testing::RunShell;
using testing::ScratchDir;
using testing::ShellQuote;
using testing::WriteBytes;

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

std::string ManifestText(const std::string& files_json) {
  return "{\n"
         "  \"schema\": \"sparkctl-weights-manifest/v1\",\n"
         "  \"repository\": \"acme/tiny\",\n"
         "  \"revision\": \"abc123\",\n"
         "  \"files\": [\n" +
         files_json + "\n  ]\n}\n";
}

std::string Entry(const std::string& path, const std::string& size, const std::string& sha) {
  return "    {\"path\": \"" + path + "\", \"size\": " + size + ", \"sha256\": \"" + sha + "\"}";
}

TEST(ManifestTest, ParsesWellFormedManifest) {
  auto m = ParseManifestJson(ManifestText(Entry("a.bin", "3", kHashA) + ",\n" +
                                          Entry("sub/b.bin", "0", kHashB)),
                             "m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->repository, "acme/tiny");
  EXPECT_EQ(m->revision, "abc123");
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->files[1].path, "sub/b.bin");
  EXPECT_EQ(m->files[0].size, 3u);
  EXPECT_EQ(m->TotalKnownBytes(), 3u);
}

TEST(ManifestTest, FormatParseRoundTrip) {
  Manifest m{.repository = "acme/tiny", .revision = "r1",
             .files = {{"x \"quoted\".bin", 7, kHashA}, {"dir/y.bin", 123456789012ull, kHashB}}};
  auto back = ParseManifestJson(FormatManifestJson(m), "rt.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->files[0].path, "x \"quoted\".bin");
  EXPECT_EQ(back->files[1].size, 123456789012ull);
  EXPECT_EQ(back->files[1].sha256, kHashB);
}

TEST(ManifestTest, BadJsonNamesFileLineAndColumn) {
  std::string text = ManifestText(Entry("a.bin", "3", kHashA) + ",\n" + Entry("b.bin", "4", kHashB));
  text.erase(text.find("\"size\": 4") + 8, 1);  // line 7: `"size": ,`
  auto m = ParseManifestJson(text, "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("bad.json:7:"));
  EXPECT_THAT(m.status().message(), HasSubstr("bad JSON"));
}

TEST(ManifestTest, TruncatedJsonIsAnError) {
  std::string text = ManifestText(Entry("a.bin", "3", kHashA));
  auto m = ParseManifestJson(text.substr(0, text.size() / 2), "half.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("half.json:"));
}

struct SemanticCase {
  std::string name;
  std::string path, size, sha;
  std::string expected;  // substring of the message
};

class ManifestSemanticTest : public ::testing::TestWithParam<SemanticCase> {};

TEST_P(ManifestSemanticTest, NamesEntryAndLine) {
  const SemanticCase& c = GetParam();
  // The bad entry is the second, on line 7.
  auto m = ParseManifestJson(ManifestText(Entry("ok.bin", "1", kHashA) + ",\n" +
                                          Entry(c.path, c.size, c.sha)),
                             "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("m.json:7: files[1]"));
  EXPECT_THAT(m.status().message(), HasSubstr(c.expected));
  EXPECT_THAT(m.status().message(), Not(HasSubstr("m.json:6")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ManifestSemanticTest,
    ::testing::Values(
        SemanticCase{"ShortHex", "b.bin", "1", "abc", "is not 64 hex digits"},
        SemanticCase{"NonHex", "b.bin", "1", std::string(63, 'a') + "g", "is not 64 hex digits"},
        SemanticCase{"NegativeSize", "b.bin", "-5", kHashA, "size -5 is negative"},
        SemanticCase{"FractionalSize", "b.bin", "1.5", kHashA, "non-negative integer"},
        SemanticCase{"AbsolutePath", "/etc/passwd", "1", kHashA, "must be relative"},
        SemanticCase{"DotDotPath", "../../etc/passwd", "1", kHashA, "\"..\""},
        SemanticCase{"InnerDotDot", "a/../b", "1", kHashA, "\"..\""},
        SemanticCase{"EmptyComponent", "a//b", "1", kHashA, "empty component"},
        SemanticCase{"DuplicatePath", "ok.bin", "1", kHashA, "duplicate path"}),
    [](const auto& info) { return info.param.name; });

TEST(ManifestTest, UnknownKeySuggestsTheRightOne) {
  auto m = ParseManifestJson(
      ManifestText("    {\"path\": \"a\", \"size\": 1, \"sha265\": \"" + kHashA + "\"}"), "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("m.json:6: files[0] (\"a\"): unknown key \"sha265\""));
  EXPECT_THAT(m.status().message(), HasSubstr("did you mean 'sha256'"));
}

TEST(ManifestTest, UppercaseHexIsNormalised) {
  std::string upper(64, 'A');
  auto m = ParseManifestJson(ManifestText(Entry("a", "1", upper)), "m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->files[0].sha256, std::string(64, 'a'));
}

TEST(ManifestTest, MissingFilesArrayIsAnError) {
  auto m = ParseManifestJson("{\"repository\": \"a/b\", \"revision\": \"r\"}", "m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("\"files\""));
}

TEST(ManifestTest, Sha256SumsRoundTripCheckedBySha256sum) {
  ScratchDir dir;
  WriteBytes(dir / "a.bin", "hello\n");
  WriteBytes(dir / "sub dir/b.bin", testing::RandomBytes(100000, 1));
  // Independent source: sha256sum itself writes the SHA256SUMS file.
  std::string sums = RunShell("cd " + ShellQuote(dir.path()) + " && sha256sum a.bin 'sub dir/b.bin'");
  auto m = ParseSha256Sums(sums, "SHA256SUMS");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_FALSE(m->files[0].size.has_value());
  EXPECT_EQ(m->files[0].sha256, Sha256Hex("hello\n"));
  EXPECT_EQ(FormatSha256Sums(*m), sums);
  // Write it with our writer and let sha256sum -c check it.
  ASSERT_TRUE(WriteManifestFile(dir / "SHA256SUMS", *m, ManifestFormat::kSha256Sums).ok());
  std::string out = RunShell("cd " + ShellQuote(dir.path()) + " && sha256sum -c --strict SHA256SUMS");
  EXPECT_THAT(out, HasSubstr("a.bin: OK"));
  EXPECT_THAT(out, HasSubstr("sub dir/b.bin: OK"));
  // And read it back through the auto-detecting reader.
  auto again = ReadManifestFile(dir / "SHA256SUMS");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->files[1].sha256, m->files[1].sha256);
}

TEST(ManifestTest, Sha256SumsErrorsNameTheLine) {
  std::string text = kHashA + "  a.bin\n" + "not a hash line\n" + kHashB + "  ../x\n";
  auto m = ParseSha256Sums(text, "SUMS");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("SUMS:2: expected"));
  EXPECT_THAT(m.status().message(), HasSubstr("SUMS:3: \"../x\""));
}

TEST(ManifestTest, WriteIsAtomicAndSorted) {
  ScratchDir dir;
  Manifest m{.repository = "a/b", .revision = "r", .files = {{"z", 1, kHashA}, {"a", 2, kHashB}}};
  ASSERT_TRUE(WriteManifestFile(dir / "m.json", m, ManifestFormat::kJson).ok());
  std::string text = ReadBytes(dir / "m.json");
  EXPECT_LT(text.find("\"a\""), text.find("\"z\""));
  auto back = ReadManifestFile(dir / "m.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->files[0].path, "a");
  EXPECT_EQ(RunShell("ls -A " + ShellQuote(dir.path())), "m.json\n");  // no temp left
}

TEST(ManifestTest, ReadMissingFileIsNotFound) {
  auto m = ReadManifestFile("/nonexistent/dir/m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/dir/m.json"));
}

TEST(ManifestTest, RelativePathConvention) {
  auto p = ManifestRelativePath("deepseek-ai/DeepSeek-V4.1-Flash", "0123abcd");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "profiles/checkpoints/deepseek-ai--DeepSeek-V4.1-Flash/0123abcd.json");
  EXPECT_FALSE(ManifestRelativePath("noslash", "r").ok());
  EXPECT_FALSE(ManifestRelativePath("a/b", "../r").ok());
  EXPECT_FALSE(ManifestRelativePath("a/../b", "r").ok());
}

TEST(ManifestTest, FormatDetection) {
  EXPECT_EQ(DetectManifestFormat("  \n{\"a\":1}"), ManifestFormat::kJson);
  EXPECT_EQ(DetectManifestFormat(kHashA + "  a\n"), ManifestFormat::kSha256Sums);
  EXPECT_EQ(FormatForOutputPath("/x/SHA256SUMS"), ManifestFormat::kSha256Sums);
  EXPECT_EQ(FormatForOutputPath("m.sha256"), ManifestFormat::kSha256Sums);
  EXPECT_EQ(FormatForOutputPath("r1.json"), ManifestFormat::kJson);
}

}  // namespace
}  // namespace spark::weights
