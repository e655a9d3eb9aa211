// The server side of TLS for HttpServer: an OpenSSL context from PEM files, TLS 1.2 and 1.3
// only, forward-secret AEAD ciphers for 1.2, ALPN "http/1.1", and, when a CA file is given,
// client certificates required and verified against it (mutual TLS). Internal to the server
// (it exposes Boost.Asio types); HttpServer's users see only TlsFiles.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "base/status.h"

namespace spark::engine::server {

struct TlsFiles {
  std::string cert_file;  // PEM: the server certificate, then any intermediates.
  std::string key_file;   // PEM private key (unencrypted).
  std::string ca_file;    // PEM CAs for client certificates; "" = clients are not asked for one.
  bool enabled() const { return !cert_file.empty(); }
};

// InvalidArgument naming the flag and file when one cannot be read or parsed, or when the key
// does not belong to the certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(const TlsFiles& files);

// True when `ec` is OpenSSL's "http request" handshake error: a client spoke plain HTTP.
bool IsPlainHttpOnTls(const boost::system::error_code& ec);

}  // namespace spark::engine::server
