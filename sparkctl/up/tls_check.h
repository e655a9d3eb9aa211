// `sparkctl up`'s check of the endpoint's TLS files (profile api.tls), read over SSH from the
// node that will serve them: readable, the key belongs to the certificate, valid now, and the
// certificate's names cover the address the endpoint is advertised at (LaunchPlan's
// advertised_host). up refuses to launch with the reason instead of an engine that fails later.
#pragma once

#include <ctime>
#include <string>

#include "base/status.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::up {

// The certificate's SHA-256 fingerprint. FailedPrecondition naming the file, the node and the
// fix; the errors of Transport::ReadFile (unreachable node) with the field named.
Result<std::string> CheckEndpointTls(ssh::Transport& t, const profile::Profile& profile,
                                     const LaunchPlan& plan, std::time_t now = std::time(nullptr));

// What up and status say when the endpoint is off loopback without TLS.
std::string ClearTextWarning(const profile::Profile& profile);

}  // namespace spark::up
