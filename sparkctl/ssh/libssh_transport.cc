#include "sparkctl/ssh/libssh_transport.h"

#include <libssh/libssh.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>

#include "base/strings.h"
#include "sparkctl/ssh/session.h"

namespace spark::ssh {

struct LibsshTransport::Node {
  explicit Node(NodeSpec spec) : session(std::move(spec)) {}
  std::mutex mu;
  Session session;  // Guarded by mu.
};

namespace {

// libssh keeps global crypto state; ssh_init/ssh_finalize are reference counted.
struct LibsshInit {
  LibsshInit() { ssh_init(); }
  ~LibsshInit() { ssh_finalize(); }
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

Result<std::unique_ptr<LibsshTransport>> LibsshTransport::Create(std::vector<NodeSpec> nodes) {
  static LibsshInit init;
  std::unique_ptr<LibsshTransport> transport(new LibsshTransport());
  std::set<std::string> names;
  for (NodeSpec& spec : nodes) {
    SPARK_RETURN_IF_ERROR(spec.Validate());
    if (!names.insert(spec.name).second) {
      return InvalidArgumentError("ssh node '" + spec.name + "' is listed twice");
    }
    transport->nodes_.push_back(std::make_unique<Node>(std::move(spec)));
  }
  return transport;
}

LibsshTransport::~LibsshTransport() = default;

Result<LibsshTransport::Node*> LibsshTransport::Find(const std::string& node) {
  std::vector<std::string> names;
  for (const auto& n : nodes_) {
    if (n->session.spec().name == node) return n.get();
    names.push_back(n->session.spec().name);
  }
  return NotFoundError("unknown node '" + node + "'" + DidYouMean(node, names));
}

Result<CommandResult> LibsshTransport::Run(const std::string& node, const std::string& command,
                                           const RunOptions& options) {
  SPARK_ASSIGN_OR_RETURN(Node * n, Find(node));
  std::lock_guard lock(n->mu);
  return n->session.Exec(command, options);
}

Status LibsshTransport::Upload(const std::string& node, const std::string& local_path,
                               const std::string& remote_path, int mode) {
  SPARK_ASSIGN_OR_RETURN(Node * n, Find(node));
  std::unique_ptr<FILE, FileCloser> file(std::fopen(local_path.c_str(), "rb"));
  if (file == nullptr) return ErrnoError(errno, node + ": cannot upload " + local_path);
  ChunkReader reader = [&](char* buf, size_t cap) -> Result<size_t> {
    size_t got = std::fread(buf, 1, cap, file.get());
    if (got == 0 && std::ferror(file.get())) return ErrnoError(errno, "reading " + local_path);
    return got;
  };
  std::lock_guard lock(n->mu);
  return n->session.PutFile(reader, remote_path, mode);
}

Status LibsshTransport::WriteFile(const std::string& node, const std::string& remote_path,
                                  std::string_view contents, int mode) {
  SPARK_ASSIGN_OR_RETURN(Node * n, Find(node));
  size_t offset = 0;
  ChunkReader reader = [&](char* buf, size_t cap) -> Result<size_t> {
    size_t got = std::min(cap, contents.size() - offset);
    std::copy_n(contents.data() + offset, got, buf);
    offset += got;
    return got;
  };
  std::lock_guard lock(n->mu);
  return n->session.PutFile(reader, remote_path, mode);
}

Result<std::string> LibsshTransport::ReadFile(const std::string& node, const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(Node * n, Find(node));
  std::lock_guard lock(n->mu);
  return n->session.GetFile(path);
}

Status LibsshTransport::Connect(const std::string& node) {
  SPARK_ASSIGN_OR_RETURN(Node * n, Find(node));
  std::lock_guard lock(n->mu);
  return n->session.EnsureConnected();
}

void LibsshTransport::Disconnect(const std::string& node) {
  Result<Node*> n = Find(node);
  if (!n.ok()) return;
  std::lock_guard lock((*n)->mu);
  (*n)->session.Disconnect();
}

int LibsshTransport::ConnectCount(const std::string& node) {
  Result<Node*> n = Find(node);
  if (!n.ok()) return 0;
  std::lock_guard lock((*n)->mu);
  return (*n)->session.connect_count();
}

}  // namespace spark::ssh
