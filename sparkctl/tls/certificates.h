// Certificates for the endpoint's TLS: a self-signed one for the cluster's names (`sparkctl tls
// selfsigned`), and the checks `sparkctl up` runs on a profile's api.tls files before launching
// (readable, the key belongs to the certificate, valid now, its names cover the address the
// endpoint is advertised at). OpenSSL stays inside this module.
// Thread-safety: free functions without shared state.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::tls {

struct SelfSignedRequest {
  std::vector<std::string> names;  // DNS names and IP addresses the certificate covers.
  int days = 825;                  // Validity from now.
};

struct PemPair {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8, unencrypted.
};

// An EC P-256 key and a self-signed SHA-256 certificate for `names` (the first is the subject's
// CN), usable as its own trust anchor (clients pin it as their CA). InvalidArgument without names.
Result<PemPair> MakeSelfSigned(const SelfSignedRequest& request);

struct CertificateInfo {
  std::string subject;
  std::string fingerprint_sha256;  // "AB:CD:...", as browsers and `openssl x509 -fingerprint` show.
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::time_t not_before = 0, not_after = 0;
};

// The first certificate of a PEM file. NotFound/PermissionDenied when unreadable,
// InvalidArgument when it holds no PEM certificate.
Result<CertificateInfo> ReadCertificate(const std::string& path);
Result<CertificateInfo> ParseCertificate(const std::string& pem);

// True when the certificate's names cover `host` (an IP address or a DNS name; "*." wildcards
// match one label).
bool Covers(const CertificateInfo& cert, const std::string& host);

struct ServerFiles {
  std::string cert, key, ca;  // ca may be empty.
};

// The checks above; FailedPrecondition naming the file and the fix for each failure.
Status CheckServerFiles(const ServerFiles& files, const std::string& advertised_host,
                        std::time_t now);
// The same on the files' contents (read from the node that serves); `files` names them.
Status CheckServerPem(const ServerFiles& files, const std::string& cert_pem,
                      const std::string& key_pem, const std::string& advertised_host,
                      std::time_t now);

}  // namespace spark::tls
