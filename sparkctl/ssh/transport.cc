#include "sparkctl/ssh/transport.h"

#include "base/strings.h"

namespace spark::ssh {

Result<CommandResult> RunChecked(Transport& transport, const std::string& node,
                                 const std::string& command, const RunOptions& options) {
  SPARK_ASSIGN_OR_RETURN(CommandResult result, transport.Run(node, command, options));
  if (!result.ok()) return CommandFailedError(node, command, result);
  return result;
}

Status CommandFailedError(const std::string& node, const std::string& command,
                          const CommandResult& result) {
  std::string how = result.exit_signal.empty()
                        ? "exited with status " + std::to_string(result.exit_code)
                        : "was killed by signal " + result.exit_signal;
  std::string tail(Trim(Tail(result.stderr_data)));
  if (tail.empty()) tail = std::string(Trim(Tail(result.stdout_data)));
  return AbortedError(node + ": `" + command + "` " + how +
                      (tail.empty() ? " (no output)" : ": " + tail));
}

std::string Tail(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::string_view tail = text.substr(text.size() - max_bytes);
  size_t newline = tail.find('\n');
  if (newline != std::string_view::npos && newline + 1 < tail.size() && newline < max_bytes / 2) {
    tail.remove_prefix(newline + 1);
  }
  return "..." + std::string(tail);
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace spark::ssh
