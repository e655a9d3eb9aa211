#include "sparkctl/up/tls_check.h"

#include "sparkctl/tls/certificates.h"

namespace spark::up {

Result<std::string> CheckEndpointTls(ssh::Transport& t, const profile::Profile& profile,
                                     const LaunchPlan& plan, std::time_t now) {
  const profile::TlsSpec& tls = profile.api.tls;
  const std::string on = " (on " + plan.api_node + ")";
  auto read = [&](const std::string& field, const std::string& path) -> Result<std::string> {
    Result<std::string> text = t.ReadFile(plan.api_node, path);
    if (text.ok()) return text;
    if (text.status().code() == StatusCode::kNotFound) {
      return FailedPreconditionError(field + " " + path + " does not exist" + on);
    }
    return text.status().WithContext(field + " " + path + on);
  };
  SPARK_ASSIGN_OR_RETURN(std::string cert, read("api.tls.cert", tls.cert));
  SPARK_ASSIGN_OR_RETURN(std::string key, read("api.tls.key", tls.key));
  if (!tls.ca.empty()) {
    SPARK_ASSIGN_OR_RETURN(std::string ca, read("api.tls.ca", tls.ca));
    if (Result<tls::CertificateInfo> c = tls::ParseCertificate(ca); !c.ok()) {
      return FailedPreconditionError("api.tls.ca " + tls.ca + ": " + c.status().message() + on);
    }
  }
  Status s = tls::CheckServerPem({tls.cert, tls.key, tls.ca}, cert, key, plan.advertised_host, now);
  if (!s.ok()) return FailedPreconditionError(s.message() + on);
  SPARK_ASSIGN_OR_RETURN(tls::CertificateInfo info, tls::ParseCertificate(cert));
  return info.fingerprint_sha256;
}

std::string ClearTextWarning(const profile::Profile& profile) {
  return "api.bind " + profile.api.bind +
         " without api.tls: the API key travels in clear text on the network (make a "
         "certificate with `sparkctl tls selfsigned` and set api.tls)";
}

}  // namespace spark::up
