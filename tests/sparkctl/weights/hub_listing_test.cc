// The Hub listing parser, the manifest-vs-Hub check and the mapping of `hf` failures to errors,
// on the exact texts huggingface_hub 2.4's CLI prints (copied from runs against the fake hub).
#include "sparkctl/weights/hub_listing.h"

#include <gtest/gtest.h>

namespace spark::weights {
namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kInfo = "{\"id\": \"o/n\", \"sha\": \"" + kCommit + "\"}";
const std::string kTree = R"([
  {"path": "sub", "tree_id": "5d85613a56c124e3a3ff8ce6fc95d10cdcb5001e"},
  {"path": "config.json", "size": 8, "blob_id": "0187f3b09d66cef7911083ad49f890f5a6589589"},
  {"path": "model.safetensors", "size": 300000, "blob_id": "3c60",
   "lfs": {"size": 300000, "sha256": "B2D1B080DC980ABB191FF24170BA20BE256588D2A4FEE51F63D789746CE582F9", "pointer_size": 134}}
])";

TEST(HubListingTest, ParsesFilesSizesAndLfsHashes) {
  Result<HubListing> h = ParseHubListing("o/n", "0123456", kInfo, kTree, "spark-0");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->commit, kCommit);
  ASSERT_EQ(h->files.size(), 2u);  // the folder is not a file
  EXPECT_EQ(h->files[0].path, "config.json");
  EXPECT_EQ(h->files[0].lfs_sha256, "");
  EXPECT_EQ(h->files[1].lfs_sha256,
            "b2d1b080dc980abb191ff24170ba20be256588d2a4fee51f63d789746ce582f9");
  EXPECT_EQ(h->TotalBytes(), 300008u);
}

TEST(HubListingTest, CommitThatIsNotThePinIsARevisionMismatch) {
  Result<HubListing> h = ParseHubListing("o/n", "fedcba9", kInfo, kTree, "spark-0");
  EXPECT_EQ(h.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(h.status().message().find("revision mismatch: o/n revision fedcba9 resolves to "
                                      "commit " +
                                      kCommit),
            std::string::npos)
      << h.status().ToString();
}

TEST(HubListingTest, GarbageIsInvalidArgumentNamingTheNode) {
  Result<HubListing> h = ParseHubListing("o/n", "0123456", "{}", kTree, "spark-3");
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("spark-3"), std::string::npos);
  EXPECT_EQ(ParseHubListing("o/n", "0123456", kInfo, "{", "x").status().code(),
            StatusCode::kInvalidArgument);
}

struct ErrorCase {
  std::string output;
  int exit_code;
  StatusCode code;
  std::string want;
};

TEST(HubCommandErrorTest, MapsTheCliMessagesToErrorsWithTheFix) {
  const std::vector<ErrorCase> cases = {
      {"\x1b[1m\x1b[31mError: Access denied. Model 'o/n' requires approval.\x1b[0m\n", 1,
       StatusCode::kPermissionDenied, "o/n is a gated repository"},
      {"Error: Model 'o/n' not found.\nIf the repo is private, make sure you are authenticated", 1,
       StatusCode::kNotFound, "repository o/n was not found on the Hub"},
      {"Error: Revision not found in model 'o/n'.\n", 1, StatusCode::kNotFound,
       "fix model.revision in p.yaml"},
      {"Error: Revision '1111111' not found on 'o/n'.\n", 1, StatusCode::kNotFound,
       "revision 0123456 does not exist in o/n"},
      {"hf: command not found\n", 127, StatusCode::kFailedPrecondition,
       "python3 -m pip install --break-system-packages -U huggingface_hub"},
      {"Error: No such command 'models'.\n", 2, StatusCode::kFailedPrecondition, "too old"},
      {"Error: Connection refused\n", 1, StatusCode::kUnavailable, "Connection refused"},
      // `hf models info` with HF_DEBUG=1: "not found" on top, the GatedRepoError in the chain.
      {"huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: x)\n\nCannot "
       "access gated repo for url http://h/api/models/o/n/revision/0123456.\nAccess to model "
       "o/n is restricted.\n\nThe above exception was the direct cause of the following "
       "exception:\n\nTraceback (most recent call last):\n  File \"cli/models.py\", line 234\n"
       "    raise CLIError(f\"Model '{model_id}' not found.\") from e\n"
       "huggingface_hub.errors.CLIError: Model 'o/n' not found.\n",
       1, StatusCode::kPermissionDenied, "hf said: huggingface_hub.errors.GatedRepoError"},
      {"huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error.\n\nRepository Not "
       "Found for url: http://h/api/models/o/n/revision/0123456.\nIf you are trying to access a "
       "private or gated repo, make sure you are authenticated.\n"
       "huggingface_hub.errors.CLIError: Model 'o/n' not found.\n",
       1, StatusCode::kNotFound, "repository o/n was not found"},
  };
  for (const auto& c : cases) {
    Status s = HubCommandError("spark-1", c.exit_code, c.output, "o/n", "0123456", "p.yaml");
    EXPECT_EQ(s.code(), c.code) << c.output << " -> " << s.ToString();
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s.ToString();
    EXPECT_EQ(s.message().rfind("spark-1: ", 0), 0u) << s.ToString();
    EXPECT_EQ(s.message().find('\x1b'), std::string::npos)
        << "colour codes removed: " << s.ToString();
  }
}

TEST(CheckManifestAgainstHubTest, EveryDifferenceIsListed) {
  HubListing hub = *ParseHubListing("o/n", kCommit, kInfo, kTree, "n");
  Manifest good{.repository = "o/n",
                .revision = kCommit,
                .files = {{"config.json", 8, std::string(64, '1')},
                          {"model.safetensors", 300000,
                           "b2d1b080dc980abb191ff24170ba20be256588d2a4fee51f63d789746ce582f9"}}};
  EXPECT_TRUE(CheckManifestAgainstHub(good, hub, "m.json").ok());
  Manifest bad = good;
  bad.revision = "1111111";
  bad.files[0].size = 9;
  bad.files[1].sha256 = std::string(64, 'a');
  bad.files.push_back({"old.bin", 1, std::string(64, 'b')});
  Status s = CheckManifestAgainstHub(bad, hub, "m.json");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  for (const char* want :
       {"m.json does not describe o/n", "revision mismatch", "config.json: size 9",
        "model.safetensors: SHA-256", "old.bin: not in the Hub's revision"}) {
    EXPECT_NE(s.message().find(want), std::string::npos) << want << ": " << s.ToString();
  }
  Manifest short_list = good;
  short_list.files.pop_back();
  EXPECT_NE(CheckManifestAgainstHub(short_list, hub, "m.json")
                .message()
                .find("model.safetensors: on the Hub but not listed"),
            std::string::npos);
}

}  // namespace
}  // namespace spark::weights
