#include "engine/server/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/error.hpp>

namespace spark::engine::server {
namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2 suites: ECDHE key exchange with AES-GCM or ChaCha20-Poly1305 only. TLS 1.3's suites
// (all AEAD) stay OpenSSL's defaults.
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kAlpn, sizeof(kAlpn), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // The client offers only protocols we do not speak.
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerTlsContext(const TlsFiles& files) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    return InternalError("TLS cipher list: " + OpenSslError());
  }
  SSL_CTX_set_alpn_select_cb(native, SelectAlpn, nullptr);
  // Resumed sessions must carry a context id once client certificates are verified; without
  // one OpenSSL fails those handshakes.
  static constexpr unsigned char kSessionContext[] = "spark-engine";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof(kSessionContext) - 1);
  if (SSL_CTX_use_certificate_chain_file(native, files.cert_file.c_str()) != 1) {
    return InvalidArgumentError("--ssl-certfile " + files.cert_file +
                                ": cannot load a PEM certificate: " + OpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(native, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return InvalidArgumentError("--ssl-keyfile " + files.key_file + " does not belong to "
                                  "--ssl-certfile " + files.cert_file);
    }
    return InvalidArgumentError("--ssl-keyfile " + files.key_file +
                                ": cannot load an unencrypted PEM private key: " + OpenSslError());
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return InvalidArgumentError("--ssl-keyfile " + files.key_file + " does not belong to "
                                "--ssl-certfile " + files.cert_file);
  }
  if (!files.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(native, files.ca_file.c_str(), nullptr) != 1) {
      return InvalidArgumentError("--ssl-ca-certs " + files.ca_file +
                                  ": cannot load PEM CA certificates: " + OpenSslError());
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return ctx;
}

bool IsPlainHttpOnTls(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST;
}

}  // namespace spark::engine::server
