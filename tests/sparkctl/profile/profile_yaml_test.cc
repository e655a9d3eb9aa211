#include "sparkctl/profile/profile_yaml.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sparkctl/profile/profile_json.h"

namespace spark::profile {
namespace {

// A valid profile; each malformed case below edits one thing. Line numbers in the expectations
// refer to this text (line 1 = "schema: ...").
constexpr char kGood[] = R"(schema: sparkctl-profile/v1
name: test
model:
  repository: owner/model
  revision: 0123456789abcdef0123456789abcdef01234567
  path: /models/m
topology:
  kind: ring
  nodes: 4
engine:
  tp: 4
  context_length: 4096
  kv_cache:
    tokens: 8192
api:
  port: 8000
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ProfileYamlTest, GoodProfileLoadsWithDefaults) {
  auto p = ParseProfile(kGood, "p.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->model.served_name, "model");
  EXPECT_EQ(p->engine.tp, 4);
  EXPECT_EQ(p->engine.chunked_prefill, 2048);
  EXPECT_TRUE(p->engine.prefix_caching);
  EXPECT_EQ(p->api.bind, "127.0.0.1");
  EXPECT_EQ(p->topology.kind, netplan::TopologyKind::kRing);
  EXPECT_EQ(ToJson(*p)["engine"]["kv_cache"]["tokens"], 8192);
  EXPECT_EQ(p->engine.weight_dtype, "auto");
  EXPECT_FALSE(p->engine.cuda_graphs.has_value());  // the engine decides
  auto tuned = ParseProfile(Replace(kGood, "  tp: 4\n",
                                    "  tp: 4\n  backend: cuda\n  weight_dtype: bf16\n"
                                    "  cuda_graphs: true\n"),
                            "p.yaml");
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->engine.weight_dtype, "bf16");
  EXPECT_EQ(tuned->engine.cuda_graphs, true);
  EXPECT_EQ(ToJson(*tuned)["engine"]["weight_dtype"], "bf16");
}

TEST(ProfileYamlTest, ApiTlsAndLimits) {
  auto p = ParseProfile(std::string(kGood) +
                            "  tls:\n    cert: /etc/s/cert.pem\n    key: /etc/s/key.pem\n"
                            "  limits:\n    max_connections_per_peer: 32\n",
                        "p.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->api.tls.cert, "/etc/s/cert.pem");
  EXPECT_EQ(p->api.tls.key, "/etc/s/key.pem");
  EXPECT_TRUE(p->api.tls.ca.empty());
  EXPECT_EQ(p->api.limits.max_connections_per_peer, 32);
  EXPECT_EQ(p->api.limits.max_connections, 1024);  // The engine's defaults.
  EXPECT_EQ(p->api.limits.max_requests_per_peer, 128);
  EXPECT_EQ(ToJson(*p)["api"]["tls"]["key"], "/etc/s/key.pem");
  EXPECT_EQ(ToJson(*p)["api"]["limits"]["max_connections_per_peer"], 32);
}

struct BadCase {
  const char* name;
  std::string text;
  std::string expected;  // substring of the error: "p.yaml:L:C: key: message"
};

std::vector<BadCase> BadCases() {
  const std::string g = kGood;
  return {
      {"UnknownTopKey", g + "enigne:\n  tp: 2\n", "p.yaml:17:1: enigne: unknown key (did you mean 'engine'?)"},
      {"UnknownNestedKey", Replace(g, "  tp: 4\n", "  tp: 4\n  max_runing_requests: 3\n"),
       "p.yaml:12:3: engine.max_runing_requests: unknown key (did you mean 'max_running_requests'?)"},
      {"MissingRequiredKey", Replace(g, "  tp: 4\n", ""), "p.yaml:11:3: engine.tp: missing required key"},
      {"MissingSection", Replace(g, "topology:\n  kind: ring\n  nodes: 4\n", ""),
       "p.yaml:1:1: topology: missing required section"},
      {"WrongTypeInt", Replace(g, "tp: 4", "tp: four"), "p.yaml:11:7: engine.tp: expected an integer, found 'four'"},
      {"WrongTypeFloatForInt", Replace(g, "tp: 4", "tp: 2.5"), "p.yaml:11:7: engine.tp: expected an integer"},
      {"WrongTypeBool", Replace(g, "  tp: 4\n", "  tp: 4\n  prefix_caching: maybe\n"),
       "p.yaml:12:19: engine.prefix_caching: expected true or false, found 'maybe'"},
      {"SectionIsScalar", Replace(g, "api:\n  port: 8000\n", "api: 8000\n"),
       "p.yaml:15:6: api: expected a mapping of keys, found '8000'"},
      {"ListExpected", g + "host:\n  kernel:\n    allow: 6.17.0\n",
       "p.yaml:19:12: host.kernel.allow: expected a list of strings, found '6.17.0'"},
      {"BadTopologyKind", Replace(g, "kind: ring", "kind: rign"),
       "p.yaml:8:3: topology.kind: 'rign' is not a topology (single, pair, ring, line, switched) (did you mean 'ring'?)"},
      {"TpDoesNotDivide", Replace(g, "tp: 4", "tp: 3"), "p.yaml:11:3: engine.tp: tp 3 must divide the 4 GPUs"},
      {"RingTooSmall", Replace(g, "nodes: 4", "nodes: 2"), "p.yaml:9:3: topology.nodes: 2 nodes do not make a ring (3..8 nodes)"},
      {"UnpinnedRevision", Replace(g, "revision: 0123456789abcdef0123456789abcdef01234567", "revision: main"),
       "p.yaml:5:3: model.revision: 'main' is not a pinned commit"},
      {"RelativeModelPath", Replace(g, "path: /models/m", "path: models/m"),
       "p.yaml:6:3: model.path: must be an absolute path"},
      {"TwoKvBudgets", Replace(g, "    tokens: 8192\n", "    tokens: 8192\n    memory_fraction: 0.5\n"),
       "p.yaml:13:3: engine.kv_cache: give exactly one budget"},
      {"KvFractionTooHigh", Replace(g, "    tokens: 8192\n", "    memory_fraction: 0.95\n"),
       "p.yaml:14:5: engine.kv_cache.memory_fraction: must be in (0, 0.9]"},
      {"BadKvDtype", Replace(g, "    tokens: 8192\n", "    tokens: 8192\n    dtype: fp9\n"),
       "p.yaml:15:5: engine.kv_cache.dtype: 'fp9' is not a KV cache dtype"},
      {"PortOutOfRange", Replace(g, "port: 8000", "port: 70000"), "p.yaml:16:3: api.port: out of range (1..65535)"},
      {"OpenBindWithoutKey", Replace(g, "  port: 8000\n", "  port: 8000\n  bind: 0.0.0.0\n"),
       "api.key_file: required when api.bind (0.0.0.0) is not a loopback address"},
      {"DefaultAboveLimit",
       Replace(g, "  port: 8000\n", "  port: 8000\n  default_max_tokens: 900\n  max_tokens_limit: 800\n"),
       "api.default_max_tokens: (900) is above api.max_tokens_limit (800)"},
      {"NegativeLimit", Replace(g, "  port: 8000\n", "  port: 8000\n  max_tokens_limit: -1\n"),
       "api.max_tokens_limit: must be >= 0"},
      {"WrongSchema", Replace(g, "sparkctl-profile/v1", "sparkctl-profile/v9"),
       "p.yaml:1:1: schema: unsupported schema 'sparkctl-profile/v9'"},
      {"DuplicateKey", Replace(g, "  tp: 4\n", "  tp: 4\n  tp: 2\n"), "p.yaml:12:3: engine.tp: duplicate key"},
      {"DenyWithoutFix", g + "host:\n  kernel:\n    deny:\n      - release: 7.0.0-1019-nvidia\n        reason: CMA is 0\n",
       "p.yaml:20:9: host.kernel.deny[0].fix: missing required key"},
      {"BadEnvName", g + "env:\n  1BAD: x\n", "p.yaml:18:3: env.1BAD: not a valid environment variable name"},
      {"BadWeightDtype", Replace(g, "  tp: 4\n", "  tp: 4\n  weight_dtype: bf61\n"),
       "p.yaml:12:3: engine.weight_dtype: 'bf61' is not a weight dtype (auto, fp32, bf16, fp8) (did you mean 'bf16'?)"},
      {"CudaGraphsOnCpu", Replace(g, "  tp: 4\n", "  tp: 4\n  backend: cpu\n  cuda_graphs: true\n"),
       "engine.cuda_graphs: needs the cuda backend (engine.backend is cpu)"},
      {"OneShotTooLarge",
       Replace(g, "  tp: 4\n", "  tp: 4\n  collectives:\n    oneshot_max_bytes: 134217728\n"),
       "p.yaml:13:5: engine.collectives.oneshot_max_bytes: out of range (0 = off .. 67108864)"},
      {"OneShotBadWire", Replace(g, "  tp: 4\n", "  tp: 4\n  collectives:\n    wire: carrier\n"),
       "engine.collectives.wire: 'carrier' is not a wire (socket, rdma)"},
      {"OneShotUnknownKey",
       Replace(g, "  tp: 4\n", "  tp: 4\n  collectives:\n    oneshot_bytes: 4096\n"),
       "engine.collectives.oneshot_bytes"},
      {"TlsCertWithoutKey", g + "  tls:\n    cert: /etc/s/cert.pem\n",
       "api.tls.key: api.tls needs both cert and key"},
      {"TlsCaWithoutCert", g + "  tls:\n    ca: /etc/s/ca.pem\n", "api.tls.ca: needs api.tls.cert"},
      {"TlsUnknownKey", g + "  tls:\n    certificate: /etc/s/cert.pem\n",
       "p.yaml:18:5: api.tls.certificate: unknown key"},
      {"LimitsBelowOne", g + "  limits:\n    max_requests_per_peer: 0\n",
       "api.limits.max_requests_per_peer: must be >= 1"},
      {"LimitsUnknownKey", g + "  limits:\n    max_peers: 3\n", "api.limits.max_peers: unknown key"},
      {"SpeculativeMtpRefused",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: mtp\n    num_speculative_tokens: 3\n"),
       "p.yaml:13:5: engine.speculative.method: 'mtp' is not implemented (DeepSeek-V4.1's mtp.* "
       "layers are DSpark stages); use method: dspark, ngram (prompt lookup, any model) or none"},
      {"SpeculativeDsparkTooManyTokens",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: dspark\n    num_speculative_tokens: 20\n"),
       "engine.speculative.num_speculative_tokens: 20 is out of range: dspark needs 1..16 draft "
       "tokens a step"},
      {"SpeculativeUnknownMethod",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: ngarm\n    num_speculative_tokens: 3\n"),
       "engine.speculative.method: 'ngarm' is not a method (none, ngram, dspark; mtp is not "
       "implemented) (did you mean 'ngram'?)"},
      {"SpeculativeTooManyTokens",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: ngram\n    num_speculative_tokens: 17\n"),
       "engine.speculative.num_speculative_tokens: 17 is out of range: ngram needs 1..16 draft "
       "tokens a step"},
      {"SpeculativeLookupMinZero",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: ngram\n    num_speculative_tokens: 3\n    prompt_lookup_min: 0\n"),
       "engine.speculative.prompt_lookup_min: 0 must be >= 1 (tokens matched)"},
      {"SpeculativeLookupMaxBelowMin",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: ngram\n    num_speculative_tokens: 3\n    prompt_lookup_min: 3\n    prompt_lookup_max: 2\n"),
       "engine.speculative.prompt_lookup_max: 2 must be in prompt_lookup_min (3) .. 64"},
      {"SpeculativeLookupWithoutNgram",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    prompt_lookup_max: 2\n"),
       "engine.speculative.prompt_lookup_max: applies to method: ngram only (method is none)"},
      {"SpeculativeOldKeyName",
       Replace(g, "  tp: 4\n", "  tp: 4\n  speculative:\n    method: ngram\n    num_tokens: 3\n"),
       "engine.speculative.num_tokens: unknown key"},
      {"QualityWithoutPerplexity", g + "quality:\n  text: q.txt\n",
       "p.yaml:18:3: quality.perplexity: missing required key"},
      {"QualityNegativePerplexity", g + "quality:\n  text: q.txt\n  perplexity: -3\n",
       "quality.perplexity: required: the reference perplexity, a number > 0"},
      {"QualityToleranceAboveOne",
       g + "quality:\n  text: q.txt\n  perplexity: 12.5\n  tolerance: 1.5\n",
       "quality.tolerance: out of range (0..1, a fraction of the reference)"},
      {"QualityContextBeyondTheModel",
       g + "quality:\n  text: q.txt\n  perplexity: 12.5\n  context: 5000\n",
       "quality.context: out of range (2..engine.context_length 4096)"},
      {"QualityUnknownKey", g + "quality:\n  text: q.txt\n  perplexity: 12.5\n  ppl: 3\n",
       "p.yaml:20:3: quality.ppl: unknown key"},
      {"SyntaxError", Replace(g, "  tp: 4\n", "  tp: [4\n"), "p.yaml:"},
      {"EmptyDocument", "", "p.yaml:1:1: the document is empty"},
  };
}

class ProfileBadCaseTest : public testing::TestWithParam<BadCase> {};

TEST_P(ProfileBadCaseTest, NamesKeyLineAndColumn) {
  const BadCase& c = GetParam();
  auto p = ParseProfile(c.text, "p.yaml");
  ASSERT_FALSE(p.ok()) << "expected an error containing: " << c.expected;
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(c.expected), std::string::npos)
      << "got: " << p.status().message() << "\nwanted: " << c.expected;
}

INSTANTIATE_TEST_SUITE_P(Malformed, ProfileBadCaseTest, testing::ValuesIn(BadCases()),
                         [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

// What `spark-engine info --json` says about a build (its shape; the real output is checked
// against the real binary in engine_capabilities_test).
constexpr char kEngineInfo[] = R"({
  "schema": "spark-engine-info/v1", "version": "0.1.0", "backends": ["cpu"],
  "model_families": [
    {"name": "qwen3", "model_types": ["qwen3"], "backends": ["cpu"], "weight_dtypes": ["fp32"],
     "kv_dtypes": ["fp32"], "chat_format": "qwen3", "reasoning_parser": "qwen3",
     "tool_parser": "qwen3"},
    {"name": "deepseek_v4", "model_types": ["deepseek_v4"], "backends": ["cpu"],
     "weight_dtypes": ["fp32"], "kv_dtypes": ["fp32"], "chat_format": "deepseek_v4",
     "reasoning_parser": "deepseek_v4", "tool_parser": "deepseek_v4"}],
  "chat_formats": ["deepseek_v3", "deepseek_v4", "qwen3"]})";

TEST(ProfileYamlTest, EngineFieldsAreCheckedAgainstTheEngine) {
  auto engine = ParseEngineInfo(kEngineInfo, "/opt/spark-engine");
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ(engine->Parsers(), (std::vector<std::string>{"qwen3", "deepseek_v4"}));
  const std::string bad = Replace(kGood, "  tp: 4\n",
                                  "  tp: 4\n  tool_parser: deepsek_v4\n  backend: cuda\n");
  EXPECT_TRUE(ParseProfile(bad, "p.yaml").ok()) << "without an engine, no engine lists apply";
  auto p = ParseProfile(bad, "p.yaml", &*engine);
  ASSERT_FALSE(p.ok());
  const std::string m = p.status().message();
  EXPECT_NE(m.find("p.yaml:12:3: engine.tool_parser: 'deepsek_v4' is not a parser of this "
                   "spark-engine (qwen3, deepseek_v4) (did you mean 'deepseek_v4'?)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("p.yaml:13:3: engine.backend: 'cuda' is not a backend of /opt/spark-engine "
                   "(it has cpu)"),
            std::string::npos)
      << m;
  EXPECT_FALSE(ParseEngineInfo(R"({"schema": "spark-engine-info/v9"})", "e").ok());
  auto broken = ParseEngineInfo(R"({"schema": "spark-engine-info/v1", "version": "1",
      "backends": ["cpu"], "chat_formats": [], "model_families": [{"name": "x"}]})", "e");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("model_families[0].model_types"), std::string::npos)
      << broken.status().message();
}

// Fields the engine does not implement are refused by name, at their line, with what it
// supports today.
TEST(ProfileYamlTest, WhatTheEngineLacksIsRefusedByName) {
  const std::string info = Replace(kEngineInfo, R"("chat_formats")",
                                   R"("speculative_methods": [],
      "environment": {"variables": ["SPARK_PDL"], "prefixes": ["NCCL_"]}, "chat_formats")");
  auto engine = ParseEngineInfo(info, "/opt/spark-engine");
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::string text = Replace(kGood, "    tokens: 8192\n",
                             "    tokens: 8192\n    dtype: fp8\n  speculative:\n"
                             "    method: ngram\n    num_speculative_tokens: 4\n");
  text += "env:\n  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:False\n  NCCL_ALGO: Ring\n"
          "  SPARK_PDL: \"0\"\n";
  EXPECT_TRUE(ParseProfile(text, "p.yaml").ok()) << "without an engine, no engine lists apply";
  const ProfileCheck check = CheckProfileText(text, "p.yaml", &*engine);
  std::vector<std::string> got;
  for (const YamlProblem& p : check.problems) got.push_back(p.ToString());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "p.yaml:15:5: engine.kv_cache.dtype: 'fp8' is not a KV cache type of "
                     "/opt/spark-engine (it keeps fp32); use one of those, or auto (the "
                     "engine's choice)",
                     "p.yaml:17:5: engine.speculative.method: speculative decoding with 'ngram' "
                     "is not implemented in /opt/spark-engine (it has no speculative decoding "
                     "yet); remove engine.speculative or set method: none",
                     "p.yaml:22:3: env.PYTORCH_CUDA_ALLOC_CONF: nothing in /opt/spark-engine "
                     "reads PYTORCH_CUDA_ALLOC_CONF (it reads SPARK_PDL, NCCL_*); remove the "
                     "entry"}));
}

// `profile check` lists every problem once, with file, line, column and key: shape errors and
// rule violations together, a key whose shape is wrong not again by the rules.
TEST(ProfileYamlTest, CheckReportsEveryProblemOnceWithItsPlace) {
  std::string text = Replace(kGood, "  tp: 4\n", "  tp: four\n");
  text = Replace(text, "port: 8000", "port: 70000");
  text += "foo: 1\n";
  const ProfileCheck check = CheckProfileText(text, "p.yaml", nullptr);
  ASSERT_FALSE(check.ok());
  EXPECT_FALSE(check.profile.has_value());
  std::vector<std::string> keys;
  for (const YamlProblem& p : check.problems) {
    keys.push_back(p.key + "@" + std::to_string(p.location.line) + ":" +
                   std::to_string(p.location.column));
    EXPECT_EQ(p.file, "p.yaml");
  }
  // In the file's order, whichever pass found them.
  EXPECT_EQ(keys, (std::vector<std::string>{"engine.tp@11:7", "api.port@16:3", "foo@17:1"}));
  EXPECT_EQ(check.ToStatus().code(), StatusCode::kInvalidArgument);
}

TEST(ProfileYamlTest, CheckNamesAMissingManifestAndHowToMakeIt) {
  const std::string dir = ::testing::TempDir() + "/profile_check_manifest";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text = Replace(kGood, "  path: /models/m\n",
                                   "  path: /models/m\n  manifest: checkpoints/x.json\n");
  const ProfileCheck missing = CheckProfileText(text, dir + "/p.yaml", nullptr, true);
  ASSERT_EQ(missing.problems.size(), 1u);
  EXPECT_EQ(missing.problems[0].key, "model.manifest");
  EXPECT_EQ(missing.problems[0].location.line, 7);
  EXPECT_NE(missing.problems[0].message.find("sparkctl weights manifest DIR --repo owner/model"),
            std::string::npos)
      << missing.problems[0].message;
  EXPECT_TRUE(CheckProfileText(text, dir + "/p.yaml", nullptr, false).ok())
      << "file checks only when asked";
  std::filesystem::create_directories(dir + "/checkpoints");
  { std::ofstream(dir + "/checkpoints/x.json") << "{}"; }
  EXPECT_TRUE(CheckProfileText(text, dir + "/p.yaml", nullptr, true).ok());
}

TEST(ProfileYamlTest, CheckOfAMissingFileIsOneProblem) {
  const ProfileCheck check = CheckProfileFile("/nonexistent/p.yaml", nullptr);
  ASSERT_EQ(check.problems.size(), 1u);
  EXPECT_EQ(check.ToStatus().code(), StatusCode::kNotFound);
  EXPECT_NE(check.problems[0].message.find("/nonexistent/p.yaml"), std::string::npos);
}

TEST(ProfileYamlTest, ReportsEveryUnknownKeyAtOnce) {
  std::string text = std::string(kGood) + "foo: 1\nbar: 2\n";
  auto p = ParseProfile(text, "p.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("p.yaml:17:1: foo: unknown key"), std::string::npos);
  EXPECT_NE(p.status().message().find("p.yaml:18:1: bar: unknown key"), std::string::npos);
}

TEST(ProfileYamlTest, MissingFileIsNotFound) {
  auto p = LoadProfileFile("/nonexistent/profile.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("/nonexistent/profile.yaml"), std::string::npos);
}

TEST(ProfileYamlTest, ManifestResolvesRelativeToProfile) {
  std::string text = Replace(kGood, "  path: /models/m\n", "  path: /models/m\n  manifest: checkpoints/x.json\n");
  auto p = ParseProfile(text, "/etc/sparkctl/profiles/p.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(ResolvedManifestPath(*p), "/etc/sparkctl/profiles/checkpoints/x.json");
}

TEST(ProfileYamlTest, QualityReferenceReadsWithDefaultsAndItsTextIsChecked) {
  const std::string dir = ::testing::TempDir() + "/profile_check_quality";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text =
      std::string(kGood) + "quality:\n  text: quality/t.txt\n  perplexity: 12.5\n";
  auto p = ParseProfile(text, dir + "/p.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->quality.has_value());
  EXPECT_EQ(p->quality->perplexity, 12.5);
  EXPECT_EQ(p->quality->tolerance, 0.02);
  EXPECT_EQ(p->quality->context, 512);
  EXPECT_EQ(ResolvedQualityText(*p),
            std::filesystem::path(dir + "/quality/t.txt").lexically_normal().string());
  EXPECT_EQ(ToJson(*p)["quality"]["perplexity"], 12.5);
  EXPECT_TRUE(ToJson(*ParseProfile(kGood, "p.yaml"))["quality"].is_null());
  const ProfileCheck missing = CheckProfileText(text, dir + "/p.yaml", nullptr, true);
  ASSERT_EQ(missing.problems.size(), 1u);
  EXPECT_EQ(missing.problems[0].key, "quality.text");
  std::filesystem::create_directories(dir + "/quality");
  { std::ofstream(dir + "/quality/t.txt") << "some text"; }
  EXPECT_TRUE(CheckProfileText(text, dir + "/p.yaml", nullptr, true).ok());
}

TEST(ShippedProfilesTest, AllValidate) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SPARK_SOURCE_DIR "/profiles")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    auto p = LoadProfileFile(entry.path().string());
    EXPECT_TRUE(p.ok()) << entry.path() << ": " << p.status().ToString();
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace spark::profile
