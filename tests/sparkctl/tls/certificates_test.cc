// Self-signed certificates and the name rules: what MakeSelfSigned writes parses back with its
// names and validity, and Covers follows RFC 6125's rules for IP addresses and one-label
// wildcards.
#include "sparkctl/tls/certificates.h"

#include <gtest/gtest.h>

namespace spark::tls {
namespace {

TEST(CertificatesTest, SelfSignedCarriesItsNamesAndValidity) {
  const std::time_t now = std::time(nullptr);
  auto pem = MakeSelfSigned({.names = {"spark-0.lan", "10.0.0.1", "fd00::1"}, .days = 10});
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  EXPECT_NE(pem->key_pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
  auto info = ParseCertificate(pem->cert_pem);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->dns_names, std::vector<std::string>{"spark-0.lan"});
  EXPECT_EQ(info->ip_addresses, (std::vector<std::string>{"10.0.0.1", "fd00::1"}));
  EXPECT_NE(info->subject.find("CN=spark-0.lan"), std::string::npos);
  EXPECT_LE(info->not_before, now);
  EXPECT_NEAR(static_cast<double>(info->not_after - now), 10 * 86400.0, 120);
  auto again = MakeSelfSigned({.names = {"spark-0.lan"}});
  ASSERT_TRUE(again.ok());
  EXPECT_NE(ParseCertificate(again->cert_pem)->fingerprint_sha256, info->fingerprint_sha256);
  EXPECT_FALSE(MakeSelfSigned({}).ok());
}

TEST(CertificatesTest, CoversIpsExactlyAndWildcardsOneLabel) {
  CertificateInfo c;
  c.dns_names = {"*.lab.lan", "spark.lan"};
  c.ip_addresses = {"10.0.0.1", "fd00::1"};
  EXPECT_TRUE(Covers(c, "10.0.0.1"));
  EXPECT_FALSE(Covers(c, "10.0.0.2"));
  EXPECT_TRUE(Covers(c, "fd00:0::1"));
  EXPECT_TRUE(Covers(c, "SPARK.lan"));
  EXPECT_TRUE(Covers(c, "a.lab.lan"));
  EXPECT_FALSE(Covers(c, "a.b.lab.lan"));
  EXPECT_FALSE(Covers(c, "lab.lan"));
}

TEST(CertificatesTest, NotAPemIsInvalidArgument) {
  EXPECT_EQ(ParseCertificate("hello").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCertificate("/nonexistent/cert.pem").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace spark::tls
