#include "sparkctl/tls/certificates.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace spark::tls {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

bool IsIp(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return InternalError("certificate extension " + value + ": " + OpenSslError());
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return Status::Ok();
}

std::time_t AsnTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return timegm(&tm);
}

std::string FormatTime(std::time_t t) {
  char buf[32];
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string IpText(const ASN1_OCTET_STRING* ip) {
  char buf[64] = {};
  const int len = ASN1_STRING_length(ip);
  const unsigned char* d = ASN1_STRING_get0_data(ip);
  if (len == 4) inet_ntop(AF_INET, d, buf, sizeof(buf));
  if (len == 16) inet_ntop(AF_INET6, d, buf, sizeof(buf));
  return buf;
}

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(errno, what + " " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

Result<PemPair> MakeSelfSigned(const SelfSignedRequest& request) {
  if (request.names.empty()) return InvalidArgumentError("a certificate needs at least one name");
  Key key(EVP_EC_gen("P-256"));
  if (!key) return InternalError("EC key: " + OpenSslError());
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // Positive.
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);  // Clocks a few minutes apart.
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(request.days) * 86400);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("sparkctl"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(request.names[0].c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  std::string san;
  for (const std::string& n : request.names) {
    san += (san.empty() ? "" : ",") + std::string(IsIp(n) ? "IP:" : "DNS:") + n;
  }
  SPARK_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_alt_name, san));
  SPARK_RETURN_IF_ERROR(AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  SPARK_RETURN_IF_ERROR(
      AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign"));
  SPARK_RETURN_IF_ERROR(AddExtension(cert.get(), NID_ext_key_usage, "serverAuth"));
  SPARK_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_key_identifier, "hash"));
  SPARK_RETURN_IF_ERROR(AddExtension(cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return InternalError("signing the certificate: " + OpenSslError());
  }
  PemPair out;
  Bio cert_bio(BIO_new(BIO_s_mem())), key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), cert.get());
  PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.cert_pem = BioText(cert_bio.get());
  out.key_pem = BioText(key_bio.get());
  return out;
}

Result<CertificateInfo> ParseCertificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return InvalidArgumentError("no PEM certificate: " + OpenSslError());
  CertificateInfo info;
  char subject[512];
  X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof(subject));
  info.subject = subject;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  X509_digest(cert.get(), EVP_sha256(), md, &len);
  for (unsigned int i = 0; i < len; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02X", md[i]);
    info.fingerprint_sha256 += (i ? ":" : "") + std::string(hex);
  }
  info.not_before = AsnTime(X509_get0_notBefore(cert.get()));
  info.not_after = AsnTime(X509_get0_notAfter(cert.get()));
  Names names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      const auto* s = g->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  ASN1_STRING_length(s));
    } else if (g->type == GEN_IPADD) {
      info.ip_addresses.push_back(IpText(g->d.iPAddress));
    }
  }
  return info;
}

Result<CertificateInfo> ReadCertificate(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(std::string pem, ReadFile(path, "certificate"));
  Result<CertificateInfo> info = ParseCertificate(pem);
  if (!info.ok()) return info.status().WithContext(path);
  return info;
}

bool Covers(const CertificateInfo& cert, const std::string& host) {
  if (IsIp(host)) {
    unsigned char want[16] = {}, have[16] = {};
    const int family = host.find(':') == std::string::npos ? AF_INET : AF_INET6;
    inet_pton(family, host.c_str(), want);
    for (const std::string& ip : cert.ip_addresses) {
      if (inet_pton(family, ip.c_str(), have) == 1 &&
          std::equal(want, want + (family == AF_INET ? 4 : 16), have)) {
        return true;
      }
    }
    return false;
  }
  for (const std::string& dns : cert.dns_names) {
    if (strcasecmp(dns.c_str(), host.c_str()) == 0) return true;
    if (dns.rfind("*.", 0) == 0) {
      const size_t dot = host.find('.');
      if (dot != std::string::npos && strcasecmp(dns.c_str() + 1, host.c_str() + dot) == 0) {
        return true;
      }
    }
  }
  return false;
}

Status CheckServerFiles(const ServerFiles& files, const std::string& advertised_host,
                        std::time_t now) {
  Result<std::string> cert_pem = ReadFile(files.cert, "api.tls.cert");
  if (!cert_pem.ok()) return FailedPreconditionError(cert_pem.status().message());
  Result<std::string> key_pem = ReadFile(files.key, "api.tls.key");
  if (!key_pem.ok()) return FailedPreconditionError(key_pem.status().message());
  SPARK_RETURN_IF_ERROR(CheckServerPem(files, *cert_pem, *key_pem, advertised_host, now));
  if (!files.ca.empty()) {
    Result<CertificateInfo> ca = ReadCertificate(files.ca);
    if (!ca.ok()) return FailedPreconditionError("api.tls.ca: " + ca.status().message());
  }
  return Status::Ok();
}

Status CheckServerPem(const ServerFiles& files, const std::string& cert_text,
                      const std::string& key_text, const std::string& advertised_host,
                      std::time_t now) {
  const std::string* cert_pem = &cert_text;
  const std::string* key_pem = &key_text;
  const std::string fix = " (make one with `sparkctl tls selfsigned --out DIR`)";
  Result<CertificateInfo> info = ParseCertificate(*cert_pem);
  if (!info.ok()) {
    return FailedPreconditionError("api.tls.cert " + files.cert + ": " + info.status().message());
  }
  Bio cert_bio(BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size())));
  Cert cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  Bio key_bio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())));
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return FailedPreconditionError("api.tls.key " + files.key +
                                   ": not an unencrypted PEM private key: " + OpenSslError());
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return FailedPreconditionError("api.tls.key " + files.key + " does not belong to api.tls.cert " +
                                   files.cert + " (give the key the certificate was made for)");
  }
  if (now < info->not_before) {
    return FailedPreconditionError("api.tls.cert " + files.cert + " is not valid before " +
                                   FormatTime(info->not_before) + " (check the clock)");
  }
  if (now > info->not_after) {
    return FailedPreconditionError("api.tls.cert " + files.cert + " expired on " +
                                   FormatTime(info->not_after) + fix);
  }
  if (!Covers(*info, advertised_host)) {
    std::string names;
    for (const auto& n : info->dns_names) names += (names.empty() ? "" : ", ") + n;
    for (const auto& n : info->ip_addresses) names += (names.empty() ? "" : ", ") + n;
    return FailedPreconditionError("api.tls.cert " + files.cert + " covers " +
                                   (names.empty() ? "no names" : names) + ", not " +
                                   advertised_host + ", the address the endpoint is advertised at" +
                                   fix);
  }
  return Status::Ok();
}

}  // namespace spark::tls
