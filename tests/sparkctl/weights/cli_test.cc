// The sparkctl binary's weights commands: exit codes, pure-JSON stdout, errors on stderr.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: test helpers

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";

struct CliRun {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class WeightsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteBytes(dir_ / "model/model-00001-of-00002.safetensors", RandomBytes(2'000'000, 1));
    WriteBytes(dir_ / "model/model-00002-of-00002.safetensors", RandomBytes(1'500'000, 2));
    WriteBytes(dir_ / "model/config.json", "{}\n");
    RunShell("touch -d '-1 hour' " + ShellQuote(dir_.path()) + "/model/*");
  }

  CliRun Sparkctl(const std::string& args) {
    CliRun r;
    r.out = RunShell(kSparkctl + " " + args + " 2>" + ShellQuote(dir_ / "stderr"), &r.code);
    r.err = ReadBytes(dir_ / "stderr");
    return r;
  }

  std::string Model() const { return dir_ / "model"; }

  ScratchDir dir_;
};

TEST_F(WeightsCliTest, ManifestThenVerifyIsOkWithPureJsonStdout) {
  std::string manifest = dir_ / "r1.json";
  CliRun created = Sparkctl("weights manifest " + Model() + " --repo acme/tiny --revision r1 --out " +
                         manifest + " --json");
  ASSERT_EQ(created.code, 0) << created.err;
  auto result = nlohmann::json::parse(created.out);
  EXPECT_EQ(result["files"], 3);
  // Hashes in the manifest equal sha256sum's.
  std::string text = ReadBytes(manifest);
  EXPECT_THAT(text, HasSubstr(Sha256sumOf(Model() + "/model-00002-of-00002.safetensors")));

  CliRun verified = Sparkctl("weights verify --manifest " + manifest + " --dir " + Model() +
                          " --json --no-cache");
  ASSERT_EQ(verified.code, 0) << verified.err;
  auto report = nlohmann::ordered_json::parse(verified.out);  // throws unless stdout is pure JSON
  EXPECT_EQ(report.begin().key(), "schema");
  EXPECT_EQ(report["schema"], "sparkctl-weights-verify/v1");
  EXPECT_EQ(report["ok"], true);
  EXPECT_EQ(report["counts"]["ok"], 3);
  EXPECT_THAT(verified.err, HasSubstr("verify: "));  // progress went to stderr
}

TEST_F(WeightsCliTest, FlippedByteExitsTwoAndNamesTheFile) {
  std::string sums = RunShell("cd " + ShellQuote(Model()) + " && sha256sum *");
  WriteBytes(dir_ / "SHA256SUMS", sums);
  std::string shard = Model() + "/model-00001-of-00002.safetensors";
  RunShell("printf '\\x00' | dd of=" + ShellQuote(shard) + " bs=1 seek=1000 conv=notrunc 2>/dev/null");
  CliRun r = Sparkctl("weights verify --manifest " + (dir_ / "SHA256SUMS") + " --dir " + Model());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("hash_mismatch  model-00001-of-00002.safetensors"));
  EXPECT_THAT(r.out, HasSubstr("FAILED"));
}

TEST_F(WeightsCliTest, BadJsonManifestNamesLineAndColumn) {
  WriteBytes(dir_ / "bad.json", "{\n  \"schema\": \"sparkctl-weights-manifest/v1\",\n  \"files\": [,]\n}\n");
  CliRun r = Sparkctl("weights verify --manifest " + (dir_ / "bad.json") + " --dir " + Model() + " --json");
  EXPECT_EQ(r.code, 2);
  // stdout is one whole JSON document of the command's schema that says it failed.
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out.value("schema", ""), "sparkctl-weights-verify/v1");
  EXPECT_EQ(out.value("ok", true), false);
  EXPECT_EQ(out["error"].value("code", ""), "InvalidArgument");
  EXPECT_THAT(out["error"].value("message", ""), HasSubstr(dir_ / "bad.json:3:13: bad JSON"));
  EXPECT_THAT(r.err, HasSubstr(dir_ / "bad.json:3:13: bad JSON"));
}

TEST_F(WeightsCliTest, ManifestRefusesToOverwriteAndKeepsTheOldFile) {
  WriteBytes(dir_ / "r1.json", "old content");
  CliRun r = Sparkctl("weights manifest " + Model() + " --repo acme/tiny --revision r1 --out " +
                   (dir_ / "r1.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_EQ(ReadBytes(dir_ / "r1.json"), "old content");
}

TEST_F(WeightsCliTest, Sha256SumsOutputIsCheckedBySha256sum) {
  CliRun r = Sparkctl("weights manifest " + Model() + " --out " + Model() + "/SHA256SUMS --no-progress");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string check = RunShell("cd " + ShellQuote(Model()) + " && sha256sum -c --strict SHA256SUMS");
  EXPECT_THAT(check, HasSubstr("config.json: OK"));
  // The manifest inside the directory is not an extra file for verify.
  CliRun v = Sparkctl("weights verify --manifest " + Model() + "/SHA256SUMS --dir " + Model());
  EXPECT_EQ(v.code, 0) << v.out << v.err;
}

TEST_F(WeightsCliTest, HelpShowsAnExample) {
  for (const char* command : {"manifest", "verify"}) {
    CliRun r = Sparkctl(std::string("weights ") + command + " --help");
    EXPECT_EQ(r.code, 0);
    EXPECT_THAT(r.out, HasSubstr("Example:\n  sparkctl weights " + std::string(command)));
  }
}

}  // namespace
}  // namespace spark::weights
