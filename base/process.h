// Runner: how local commands are executed (the simulator's ip, ssh-keygen, nsenter, ...;
// `spark-engine info --json` for profile checks).
//
// An interface so that planning code can be tested with a fake that records command lines;
// ProcessRunner is the real one (posix_spawn, no shell, stdin fed from a string).
// Thread-safety: ProcessRunner is safe to use from many threads at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark {

struct CommandResult {
  int exit_code = 0;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Runs argv[0] (looked up in PATH) with `input` on stdin. Returns Internal only when the
  // command could not be started; a non-zero exit is a value, not an error.
  virtual Result<CommandResult> Run(const std::vector<std::string>& argv,
                                    std::string_view input = {}) = 0;
};

class ProcessRunner : public Runner {
 public:
  Result<CommandResult> Run(const std::vector<std::string>& argv,
                            std::string_view input = {}) override;
};

// Runs and requires exit status 0. Returns Internal naming the command and its stderr otherwise.
Status RunOk(Runner& runner, const std::vector<std::string>& argv, std::string_view input = {});

// Runs with this process's stdin, stdout and stderr (interactive use) and returns the exit
// status (128 + signal when killed). Internal when it cannot be started.
Result<int> RunInherited(const std::vector<std::string>& argv);

// Like RunOk but returns stdout.
Result<std::string> RunOutput(Runner& runner, const std::vector<std::string>& argv,
                              std::string_view input = {});

}  // namespace spark
