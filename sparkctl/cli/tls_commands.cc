// `sparkctl tls selfsigned --out DIR [--name NAME...] [-c CLUSTER -p PROFILE]`: a key and a
// self-signed certificate for the endpoint's names (cert.pem, key.pem mode 0600), and the
// certificate's SHA-256 fingerprint, for a profile's api.tls (docs/server.md "TLS"). With a
// profile the names include the address `up` will advertise and rank 0's node. Clients pin
// cert.pem as their CA.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparkctl/cli/families.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/tls/certificates.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::cli {
namespace {

constexpr char kSchema[] = "sparkctl-tls-selfsigned/v1";

struct SelfSignedOptions {
  std::string out;
  std::vector<std::string> names;
  std::string cluster_file = "cluster.yaml";
  std::string profile_file;
  int days = 825;
  bool force = false;
  bool json = false;
};

Status WriteFile(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) return ErrnoError(errno, "cannot write " + path.string());
    f << text;
  }
  if (chmod(path.c_str(), mode) != 0) return ErrnoError(errno, "chmod " + path.string());
  return Status::Ok();
}

// --name, then (with a profile) the address `up` advertises, rank 0's node name and address, and
// loopback (for clients on that node); each once.
Result<std::vector<std::string>> Names(const SelfSignedOptions& o) {
  std::vector<std::string> names = o.names;
  auto add = [&](const std::string& n) {
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  if (!o.profile_file.empty()) {
    SPARK_ASSIGN_OR_RETURN(profile::Profile p, profile::LoadProfileFile(o.profile_file));
    SPARK_ASSIGN_OR_RETURN(netplan::ClusterSpec cluster,
                           inventory::LoadClusterFile(o.cluster_file));
    SPARK_ASSIGN_OR_RETURN(up::LaunchPlan plan,
                           up::PlanLaunch(p, cluster, {.links_pending = true}));
    add(plan.advertised_host);
    add(plan.api_node);
    for (const auto& node : cluster.nodes) {
      if (node.name == plan.api_node) add(node.address);
    }
    add("127.0.0.1");
    add("localhost");
  }
  if (names.empty()) {
    return InvalidArgumentError("give --name ADDRESS (repeatable) or -p PROFILE [-c CLUSTER]");
  }
  return names;
}

Result<tls::CertificateInfo> MakeFiles(const SelfSignedOptions& o,
                                       const std::vector<std::string>& names) {
  if (o.days < 1) return InvalidArgumentError("--days must be >= 1");
  const std::filesystem::path dir(o.out);
  const auto cert = dir / "cert.pem", key = dir / "key.pem";
  if (!o.force && (std::filesystem::exists(cert) || std::filesystem::exists(key))) {
    return FailedPreconditionError(cert.string() + " or " + key.string() +
                                   " exists (give --force to replace them)");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("--out " + o.out + ": " + ec.message());
  SPARK_ASSIGN_OR_RETURN(tls::PemPair pem, tls::MakeSelfSigned({names, o.days}));
  SPARK_RETURN_IF_ERROR(WriteFile(key, pem.key_pem, 0600));
  SPARK_RETURN_IF_ERROR(WriteFile(cert, pem.cert_pem, 0644));
  return tls::ParseCertificate(pem.cert_pem);
}

int RunSelfSigned(const SelfSignedOptions& o) {
  const std::string schema = o.json ? kSchema : "";
  Result<std::vector<std::string>> names = Names(o);
  if (!names.ok()) return ReportError(names.status(), schema);
  Result<tls::CertificateInfo> info = MakeFiles(o, *names);
  if (!info.ok()) return ReportError(info.status(), schema);
  const std::string dir = std::filesystem::path(o.out).lexically_normal().string();
  if (o.json) {
    nlohmann::ordered_json out = {{"schema", kSchema},
                                  {"ok", true},
                                  {"cert", dir + "/cert.pem"},
                                  {"key", dir + "/key.pem"},
                                  {"names", *names},
                                  {"not_after", info->not_after},
                                  {"sha256_fingerprint", info->fingerprint_sha256}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("cert     %s/cert.pem\nkey      %s/key.pem (mode 0600)\nnames    ", dir.c_str(),
                dir.c_str());
    for (size_t i = 0; i < names->size(); ++i) {
      std::printf("%s%s", i ? ", " : "", (*names)[i].c_str());
    }
    std::printf("\nSHA-256  %s\n", info->fingerprint_sha256.c_str());
    std::printf("\nIn the profile: api.tls: {cert: %s/cert.pem, key: %s/key.pem}\n"
                "Clients trust cert.pem as their CA (e.g. curl --cacert, "
                "ssl.create_default_context(cafile=...)).\n",
                dir.c_str(), dir.c_str());
  }
  return kExitOk;
}

}  // namespace

void RegisterTlsCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* tls = parent.add_subcommand("tls", "Certificates for the endpoint's HTTPS");
  tls->require_subcommand(1);
  auto o = std::make_shared<SelfSignedOptions>();
  CLI::App* cmd = tls->add_subcommand(
      "selfsigned", "Make a key and a self-signed certificate for the endpoint's names");
  cmd->add_option("--out", o->out, "Folder for cert.pem and key.pem")->required();
  cmd->add_option("--name", o->names,
                  "A DNS name or IP address clients use to reach the endpoint (repeat; the "
                  "address `sparkctl up` advertises must be one)");
  AddClusterFlag(cmd, &o->cluster_file, "Cluster inventory, with -p (default ./cluster.yaml)");
  cmd->add_option("-p,--profile", o->profile_file,
                  "Also cover what `up` advertises for this profile: the endpoint's address, rank "
                  "0's node name and address, and loopback");
  cmd->add_option("--days", o->days, "Validity in days (default 825)");
  cmd->add_flag("--force", o->force, "Replace existing files");
  AddJsonFlag(cmd, &o->json, kSchema);
  SetExample(cmd,
             "sparkctl tls selfsigned --out /etc/sparkctl/tls --name 10.0.0.1 --name spark1.lan\n"
             "  sparkctl tls selfsigned --out tls -c cluster.yaml -p profile.yaml --name llm.lan\n"
             "Exit status: 0 when both files were written, 2 otherwise.");
  cmd->callback([o, &context] { context.exit_code = RunSelfSigned(*o); });
}

}  // namespace spark::cli
