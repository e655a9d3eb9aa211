// Command: one program invocation that `sparkctl net apply/reset` runs on a node, as an argv (no
// shell), with whether a failure is expected and harmless (deleting what is already gone).
#pragma once

#include <string>
#include <vector>

#include "base/strings.h"

namespace spark::netplan {

struct Command {
  std::vector<std::string> argv;
  bool ignore_failure = false;  // e.g. `ip route del` of a route that is already gone

  // "ip route replace 198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100"; arguments never
  // hold spaces or shell characters, so the text is also a valid shell line.
  std::string ToString() const { return Join(argv, " "); }
  friend bool operator==(const Command&, const Command&) = default;
};

}  // namespace spark::netplan
