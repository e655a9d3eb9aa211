// EnsureProgram and the catalog: the real install scripts run by /bin/sh against a temporary
// "node" folder on this machine (LocalShellTransport), and refusals on nodes this machine cannot
// be (another machine, an old glibc) through FakeTransport, where nothing may be uploaded.
#include "sparkctl/bundle/deploy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/version.h"
#include "sparkctl/ssh/self_copy.h"
#include "sparkctl/ssh/testing/fake_transport.h"
#include "base/strings.h"
#include "tests/sparkctl/testing/shell.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;
using ssh::testing::FakeTransport;

const std::string kBin = SPARK_BINARY_DIR "/bin";

// A Transport whose one node is this machine: commands run in /bin/sh, uploads are copies.
class LocalShellTransport final : public ssh::Transport {
 public:
  int uploads = 0;
  Result<ssh::CommandResult> Run(const std::string&, const std::string& command,
                                 const ssh::RunOptions&) override {
    testing::Output o = testing::Shell(command);
    return ssh::CommandResult{.exit_code = o.exit_code, .stdout_data = o.out, .stderr_data = o.err};
  }
  Status Upload(const std::string&, const std::string& local, const std::string& remote,
                int mode) override {
    ++uploads;
    std::error_code ec;
    fs::copy_file(local, remote + ".tmp", fs::copy_options::overwrite_existing, ec);
    if (ec) return InternalError(ec.message());
    chmod((remote + ".tmp").c_str(), mode);
    fs::rename(remote + ".tmp", remote, ec);
    return ec ? InternalError(ec.message()) : Status::Ok();
  }
  Status WriteFile(const std::string&, const std::string&, std::string_view, int) override {
    return UnimplementedError("WriteFile");
  }
  Result<std::string> ReadFile(const std::string&, const std::string&) override {
    return UnimplementedError("ReadFile");
  }
};

class DeployTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("deploy_test." + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    root_ = dir_ + "/node root";  // a space, to check the quoting
  }
  void TearDown() override { fs::remove_all(dir_); }

  Catalog SelfCatalog(std::vector<std::string> bundle_dirs = {}) {
    return Catalog({.self_dir = kBin, .bundle_dirs = std::move(bundle_dirs), .version = kVersion});
  }
  EnsureOptions Options(bool install = true) {
    return {.install = install, .remote_root = root_};
  }

  // A bundle folder for another machine: its files are just bytes, as the controller sees them.
  std::string ForeignBundle(const std::string& machine, const std::string& version) {
    const std::string d = dir_ + "/bundle-" + machine;
    fs::create_directories(d + "/bin");
    fs::create_directories(d + "/lib");
    Bundle b;
    b.machine = machine;
    b.version = version;
    b.needs.glibc = "2.34";
    b.needs.glibc_from = "bin/sparkctl";
    b.needs.node_libraries = {{"libc.so.6", "glibc"}};
    for (const char* path : {"bin/sparkctl", "bin/spark-engine", "lib/libssh.so.4"}) {
      std::ofstream(d + "/" + path) << machine << " " << path;
      b.files.push_back({path, *ssh::Sha256File(d + "/" + path), fs::file_size(d + "/" + path),
                         path[0] == 'b' ? 0755 : 0644, ""});
    }
    std::ofstream(d + "/manifest.json") << b.ManifestText();
    return d;
  }

  static void SurveyReply(FakeTransport& fake, const std::string& probe) {
    fake.Reply("*", "(.|\\n)*os-release(.|\\n)*", probe);
  }

  std::string dir_, root_;
};

TEST_F(DeployTest, InstallsOnceThenFindsItInstalled) {
  Catalog catalog = SelfCatalog();
  LocalShellTransport node;
  auto first = EnsureProgram(node, catalog, "local", "sparkctl", Options());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->uploaded);
  EXPECT_EQ(first->platform.machine, HostMachine());
  auto bundle = catalog.For(HostMachine());
  ASSERT_TRUE(bundle.ok());
  EXPECT_EQ(first->bundle_id, (*bundle)->Id());
  EXPECT_EQ(first->path, root_ + "/bundles/" + first->bundle_id + "/bin/sparkctl");
  // The build's NCCL tuner plugin travels in lib/ (no program links it) and is reported.
  ASSERT_NE((*bundle)->Find("lib/libnccl-tuner-spark.so"), nullptr);
  EXPECT_EQ(first->tuner_plugin,
            root_ + "/bundles/" + first->bundle_id + "/lib/libnccl-tuner-spark.so");
  EXPECT_TRUE(fs::exists(first->tuner_plugin));
  EXPECT_EQ(node.uploads, static_cast<int>((*bundle)->files.size()));
  // The installed program runs, on the bundle's libraries.
  testing::Output version = testing::Shell("'" + first->path + "' --version");
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out.find(kVersion), std::string::npos);
  testing::Output ldd = testing::Shell("ldd '" + first->path + "'");
  EXPECT_NE(ldd.out.find(root_ + "/bundles/" + first->bundle_id + "/bin/../lib/libssh.so.4"),
            std::string::npos) << ldd.out;
  // Cached by id: nothing is uploaded the second time, and another program of it is there.
  auto again = EnsureProgram(node, catalog, "local", "spark-engine", Options());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->uploaded);
  EXPECT_EQ(node.uploads, static_cast<int>((*bundle)->files.size()));
  EXPECT_TRUE(fs::exists(again->path));
}

TEST_F(DeployTest, ANewBuildUploadsOnlyWhatChanged) {
  Catalog catalog = SelfCatalog();
  LocalShellTransport node;
  ASSERT_TRUE(EnsureProgram(node, catalog, "local", "sparkctl", Options()).ok());
  const int before = node.uploads;
  // spark-engine replaced by another build of it (a copy with one more byte at the end).
  const std::string engine = dir_ + "/spark-engine";
  fs::copy_file(kBin + "/spark-engine", engine);
  std::ofstream(engine, std::ios::app) << '\0';
  chmod(engine.c_str(), 0755);
  EnsureOptions o = Options();
  o.overrides["spark-engine"] = engine;
  auto r = EnsureProgram(node, catalog, "local", "spark-engine", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->uploaded);
  EXPECT_EQ(node.uploads, before + 1);
  EXPECT_EQ(*ssh::Sha256File(r->path), *ssh::Sha256File(engine));
}

TEST_F(DeployTest, PlanOnlyChangesNothing) {
  Catalog catalog = SelfCatalog();
  LocalShellTransport node;
  auto r = EnsureProgram(node, catalog, "local", "sparkctl", Options(/*install=*/false));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->installed);
  EXPECT_EQ(node.uploads, 0);
  EXPECT_FALSE(fs::exists(root_ + "/bundles/" + r->bundle_id));
}

TEST_F(DeployTest, ADamagedUploadIsCaughtAndItsObjectRemoved) {
  Catalog catalog = SelfCatalog();
  LocalShellTransport node;
  auto bundle = catalog.For(HostMachine());
  ASSERT_TRUE(bundle.ok());
  // An object already on the node with the right name but other bytes.
  fs::create_directories(root_ + "/objects");
  const BundleFile& lib = *(*bundle)->Find("lib/libssh.so.4");
  const std::string object = root_ + "/objects/" + lib.sha256 + "-644";
  std::ofstream(object) << "not libssh";
  auto r = EnsureProgram(node, catalog, "local", "sparkctl", Options());
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  EXPECT_NE(r.status().message().find("lib/libssh.so.4"), std::string::npos);
  EXPECT_FALSE(fs::exists(object));
  auto retry = EnsureProgram(node, catalog, "local", "sparkctl", Options());
  EXPECT_TRUE(retry.ok()) << retry.status().ToString();
}

TEST_F(DeployTest, RunInstalledCommandRunsOnlyAnInstalledBundle) {
  Catalog catalog = SelfCatalog();
  LocalShellTransport node;
  const std::map<std::string, std::string> ids = catalog.Ids();
  ASSERT_EQ(ids.size(), 1u);
  const std::string cmd = RunInstalledCommand(ids, "sparkctl", "--version", "MISSING", 97, root_);
  testing::Output missing = testing::Shell(cmd);
  EXPECT_EQ(missing.exit_code, 97);
  EXPECT_NE(missing.err.find("MISSING"), std::string::npos);
  ASSERT_TRUE(EnsureProgram(node, catalog, "local", "sparkctl", Options()).ok());
  testing::Output ran = testing::Shell(cmd);
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.out.find(kVersion), std::string::npos);
}

TEST_F(DeployTest, RefusesANodeOfAnotherMachineWithoutABundleForIt) {
  Catalog catalog = SelfCatalog();
  const std::string other = HostMachine() == "aarch64" ? "x86_64" : "aarch64";
  FakeTransport fake({"spark-1"});
  SurveyReply(fake, "machine=" + other + "\nglibc=glibc 2.39\nos_name=Ubuntu 24.04.3 LTS\n");
  auto r = EnsureProgram(fake, catalog, "spark-1", "sparkctl", Options());
  ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = r.status().message();
  const std::vector<std::string> parts = {"spark-1 is " + other + ", Ubuntu 24.04.3 LTS, glibc 2.39",
                                          "no bundle for " + other, "SPARKCTL_BUNDLES",
                                          "bundle make"};
  for (const std::string& part : parts) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;
  }
  for (const auto& call : fake.calls()) EXPECT_FALSE(StartsWith(call.command, "upload"));
  EXPECT_EQ(fake.calls().size(), 1u);
}

TEST_F(DeployTest, RefusesANodeWithAnOlderGlibcBeforeCopyingAnything) {
  Catalog catalog = SelfCatalog();
  FakeTransport fake({"spark-1"});
  SurveyReply(fake, "machine=" + HostMachine() + "\nglibc=glibc 2.17\nlibrary=libstdc++.so.6\n"
                    "library=libibverbs.so.1\nglibcxx=GLIBCXX_3.4.33\n");
  auto r = EnsureProgram(fake, catalog, "spark-1", "sparkctl", Options());
  ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("glibc 2.17 is older than"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(fake.calls().size(), 1u);
}

TEST_F(DeployTest, UsesTheNamedBundleForAnotherMachine) {
  const std::string other = HostMachine() == "aarch64" ? "x86_64" : "aarch64";
  const std::string dir = ForeignBundle(other, kVersion);
  Catalog catalog = SelfCatalog({dir_});  // a folder holding bundles
  auto b = catalog.For(other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  FakeTransport fake({"spark-1"});
  SurveyReply(fake, "machine=" + other + "\nglibc=glibc 2.39\nlibrary=libstdc++.so.6\n"
                    "glibcxx=GLIBCXX_3.4.33\n");
  fake.OnCommand("*", "mkdir -p (.|\\n)*", [&](const std::string&, const std::string&) {
    std::string missing;  // the node has none of the objects
    for (const auto& f : (*b)->files) missing += f.sha256 + "-" + (f.mode == 0755 ? "755" : "644") + "\n";
    return Result<ssh::CommandResult>(ssh::CommandResult{.exit_code = 0, .stdout_data = missing});
  });
  fake.Reply("*", "set -e(.|\\n)*", "installed\n");
  auto r = EnsureProgram(fake, catalog, "spark-1", "spark-engine", Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bundle_id, (*b)->Id());
  int uploads = 0;
  for (const auto& call : fake.calls()) uploads += StartsWith(call.command, "upload");
  EXPECT_EQ(uploads, 3);
  EXPECT_EQ(*fake.GetFile("spark-1", root_ + "/objects/" + (*b)->Find("lib/libssh.so.4")->sha256 +
                                         "-644"),
            other + " lib/libssh.so.4");
  // An engine of this machine cannot stand in for the other machine's.
  EnsureOptions o = Options();
  o.overrides["spark-engine"] = kBin + "/spark-engine";
  auto wrong = EnsureProgram(fake, catalog, "spark-1", "spark-engine", o);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("built for " + other), std::string::npos);
}

TEST_F(DeployTest, RefusesABundleOfAnotherVersion) {
  const std::string other = HostMachine() == "aarch64" ? "x86_64" : "aarch64";
  const std::string dir = ForeignBundle(other, "0.0.1");
  Catalog catalog = SelfCatalog({dir});
  auto b = catalog.For(other);
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("made from sparkctl 0.0.1"), std::string::npos);
  std::vector<std::string> lines = catalog.Describe();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(other + " bundle"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("this build (" + kBin + ")"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace spark::bundle
