// Session: connection, host-key verification and authentication. Commands and files are in
// session_io.cc.
#include "sparkctl/ssh/session.h"

#include <libssh/libssh.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "base/logging.h"
#include "sparkctl/ssh/known_hosts.h"

namespace spark::ssh {
namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// "SHA256:base64" exactly as `ssh-keygen -l` and OpenSSH's warnings print it.
std::string Fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != SSH_OK) {
    return "SHA256:?";
  }
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
  std::string fingerprint = text != nullptr ? text : "SHA256:?";
  ssh_string_free_char(text);
  ssh_clean_pubkey_hash(&hash);
  return fingerprint;
}

Status EnsureParentDir(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec); ec) {
    return ErrnoError(ec.value(), "cannot create " + dir.string());
  }
  return Status::Ok();
}

}  // namespace

Session::Session(NodeSpec spec) : spec_(std::move(spec)) {
  if (spec_.known_hosts.empty()) spec_.known_hosts = DefaultKnownHostsPath();
}

Session::~Session() { Disconnect(); }

bool Session::connected() const {
  return session_ != nullptr && !broken_ && ssh_is_connected(session_);
}

std::string Session::Error() const {
  return session_ != nullptr ? ssh_get_error(session_) : "no session";
}

void Session::Disconnect() {
  if (session_ == nullptr) return;
  if (ssh_is_connected(session_)) ssh_disconnect(session_);
  ssh_free(session_);  // Also frees the session's channels.
  session_ = nullptr;
  broken_ = false;
}

Status Session::EnsureConnected() {
  if (connected()) return Status::Ok();
  Disconnect();
  Status status = Connect();
  if (status.ok()) status = VerifyHostKey();
  if (status.ok()) status = Authenticate();
  if (!status.ok()) {
    Disconnect();
    return status;
  }
  ++connect_count_;
  Logger("ssh")->debug("{}: connected to {}", spec_.name, spec_.Target());
  return Status::Ok();
}

Status Session::Connect() {
  session_ = ssh_new();
  if (session_ == nullptr) return InternalError(spec_.name + ": ssh_new failed");
  const long timeout_s = static_cast<long>(spec_.connect_timeout.count() / 1000);
  const long timeout_us = static_cast<long>((spec_.connect_timeout.count() % 1000) * 1000);
  const int process_config = 0;  // ~/.ssh/config must not change what cluster.yaml says.
  const unsigned int port = static_cast<unsigned int>(spec_.port);
  bool ok =
      ssh_options_set(session_, SSH_OPTIONS_HOST, spec_.address.c_str()) == SSH_OK &&
      ssh_options_set(session_, SSH_OPTIONS_PORT, &port) == SSH_OK &&
      ssh_options_set(session_, SSH_OPTIONS_PROCESS_CONFIG, &process_config) == SSH_OK &&
      ssh_options_set(session_, SSH_OPTIONS_KNOWNHOSTS, spec_.known_hosts.c_str()) == SSH_OK &&
      // Only the node's known_hosts decides; /etc/ssh/ssh_known_hosts is not consulted.
      ssh_options_set(session_, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") == SSH_OK &&
      ssh_options_set(session_, SSH_OPTIONS_TIMEOUT, &timeout_s) == SSH_OK &&
      ssh_options_set(session_, SSH_OPTIONS_TIMEOUT_USEC, &timeout_us) == SSH_OK;
  if (ok && !spec_.user.empty()) {
    ok = ssh_options_set(session_, SSH_OPTIONS_USER, spec_.user.c_str()) == SSH_OK;
  }
  if (!ok) return InvalidArgumentError(spec_.name + ": bad ssh option: " + Error());
  if (ssh_connect(session_) != SSH_OK) {
    return UnavailableError(spec_.name + ": unreachable: cannot connect to " + spec_.Target() +
                            " within " + Seconds(spec_.connect_timeout) + ": " + Error() +
                            ". Check that the node is up, that the address and port are right "
                            "and that sshd listens there.");
  }
  return Status::Ok();
}

Status Session::VerifyHostKey() {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session_, &key) != SSH_OK) {
    return UnavailableError(spec_.name + ": no host key from " + spec_.Target() + ": " + Error());
  }
  const std::string fingerprint = Fingerprint(key);
  const std::string type = ssh_key_type_to_char(ssh_key_type(key));
  ssh_key_free(key);
  const std::string host = KnownHostsName(spec_.address, spec_.port);
  const std::string presented = "the node presents " + type + " key " + fingerprint;
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return Status::Ok();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER: {
      auto lines = FindKnownHostsLines(spec_.known_hosts, host);
      std::string where = spec_.known_hosts;
      if (lines.ok() && !lines->empty()) {
        where = "line " + std::to_string(lines->front().number) + " of " + spec_.known_hosts +
                " (" + lines->front().key_type + ")";
      }
      return FailedPreconditionError(
          spec_.name + ": HOST KEY CHANGED for " + host + ": " + presented +
          ", which does not match the key recorded at " + where +
          ". Either the node was reinstalled or someone is intercepting the connection; "
          "sparkctl refuses to connect. If the node was reinstalled, verify the new "
          "fingerprint on its console (ssh-keygen -lf /etc/ssh/ssh_host_" +
          (type.rfind("ssh-", 0) == 0 ? type.substr(4) : type) +
          "_key.pub), then remove the "
          "old line with: " +
          RemoveKnownHostCommand(host, spec_.known_hosts));
    }
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      break;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return InternalError(spec_.name + ": cannot check the host key against " + spec_.known_hosts +
                           ": " + Error());
  }
  if (spec_.host_key_policy != HostKeyPolicy::kAcceptNew) {
    return FailedPreconditionError(
        spec_.name + ": unknown host " + host + ": " + presented + " and " + spec_.known_hosts +
        " has no key for it (strict host key checking). Verify the fingerprint, then set "
        "ssh.host_key_policy: accept_new for the first contact, or add the key with: "
        "ssh-keyscan -p " +
        std::to_string(spec_.port) + " " + spec_.address + " >> " + spec_.known_hosts);
  }
  SPARK_RETURN_IF_ERROR(EnsureParentDir(spec_.known_hosts).WithContext(spec_.name));
  if (ssh_session_update_known_hosts(session_) != SSH_OK) {
    return InternalError(spec_.name + ": cannot add the host key to " + spec_.known_hosts + ": " +
                         Error());
  }
  Logger("ssh")->warn("{}: first contact: added {} key {} for {} to {}", spec_.name, type,
                      fingerprint, host, spec_.known_hosts);
  return Status::Ok();
}

Status Session::Authenticate() {
  int rc = SSH_AUTH_ERROR;
  std::string with = "ssh-agent or ~/.ssh/id_*";
  if (!spec_.identity_file.empty()) {
    with = "key " + spec_.identity_file;
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(spec_.identity_file.c_str(), nullptr, nullptr, nullptr, &key) !=
        SSH_OK) {
      if (access(spec_.identity_file.c_str(), R_OK) != 0) {
        return ErrnoError(errno, spec_.name + ": identity file " + spec_.identity_file);
      }
      return InvalidArgumentError(spec_.name + ": cannot load private key " + spec_.identity_file +
                                  " (not a private key, or protected by a passphrase: load it "
                                  "into ssh-agent and leave identity_file empty)");
    }
    rc = ssh_userauth_publickey(session_, nullptr, key);
    ssh_key_free(key);
  } else {
    rc = ssh_userauth_publickey_auto(session_, nullptr, nullptr);
  }
  if (rc == SSH_AUTH_SUCCESS) return Status::Ok();
  if (rc == SSH_AUTH_ERROR) {
    return UnavailableError(spec_.name + ": connection failed during authentication to " +
                            spec_.Target() + ": " + Error());
  }
  const std::string user = spec_.user.empty() ? "your user" : spec_.user;
  return PermissionDeniedError(
      spec_.name + ": authentication failed for " + spec_.Target() + " with " + with +
      ": the server refused the key. Add the public key to ~" + user +
      "/.ssh/authorized_keys on the node (ssh-copy-id" +
      (spec_.identity_file.empty() ? "" : " -i " + spec_.identity_file + ".pub") + " -p " +
      std::to_string(spec_.port) + " " + spec_.Target().substr(0, spec_.Target().rfind(':')) +
      "), or point ssh.identity_file at the right key.");
}

}  // namespace spark::ssh
