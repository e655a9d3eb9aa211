// Shell commands for the tests that drive the real binaries (simulator, e2e): /bin/sh -c through
// the simulator's own ProcessRunner, stdout and stderr kept apart, or merged for tests that
// search one stream for a message.
#pragma once

#include <string>

#include "base/process.h"

namespace spark::testing {

struct Output {
  int exit_code = -1;  // 128 + signal when killed; 127 when /bin/sh could not start
  std::string out;     // stdout, or stdout then stderr with merge_stderr
  std::string err;
};

inline Output Shell(const std::string& command, bool merge_stderr = false) {
  ProcessRunner runner;
  Result<CommandResult> r = runner.Run({"/bin/sh", "-c", command});
  if (!r.ok()) return {127, "", r.status().ToString()};
  Output o{r->exit_code, r->out, r->err};
  if (merge_stderr) o.out += r->err;
  return o;
}

}  // namespace spark::testing
