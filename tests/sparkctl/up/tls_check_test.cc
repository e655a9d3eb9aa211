// `up`'s check of the endpoint's TLS files, read from rank 0's node through a FakeTransport:
// good files give the fingerprint; an expired, mismatched, misnamed or missing file is refused
// with the reason, the file and the node.
#include "sparkctl/up/tls_check.h"

#include <gtest/gtest.h>

#include "sparkctl/ssh/testing/fake_transport.h"
#include "sparkctl/tls/certificates.h"
#include "tests/sparkctl/up/up_test_util.h"

namespace spark::up {
namespace {

class TlsCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profile_ = testing::DemoProfile();
    profile_.api.bind = "198.19.0.10";
    profile_.api.key_file = "/etc/s/keys";
    profile_.api.tls = {"/etc/s/cert.pem", "/etc/s/key.pem", ""};
    auto plan = PlanLaunch(profile_, testing::Ring(), {});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
    auto pem = tls::MakeSelfSigned({.names = {"198.19.0.10", "spark-0"}, .days = 30});
    ASSERT_TRUE(pem.ok());
    pem_ = *pem;
    Put(pem_);
  }
  void Put(const tls::PemPair& pem) {
    t_.SetFile("spark-0", "/etc/s/cert.pem", pem.cert_pem);
    t_.SetFile("spark-0", "/etc/s/key.pem", pem.key_pem);
  }
  std::string Refusal(std::time_t now = std::time(nullptr)) {
    Result<std::string> r = CheckEndpointTls(t_, profile_, plan_, now);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
    EXPECT_NE(r.status().message().find("(on spark-0)"), std::string::npos);
    return r.status().message();
  }

  ssh::testing::FakeTransport t_{{"spark-0", "spark-1", "spark-2", "spark-3"}};
  profile::Profile profile_;
  LaunchPlan plan_;
  tls::PemPair pem_;
};

TEST_F(TlsCheckTest, GoodFilesGiveTheFingerprint) {
  Result<std::string> fp = CheckEndpointTls(t_, profile_, plan_);
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_EQ(*fp, tls::ParseCertificate(pem_.cert_pem)->fingerprint_sha256);
  EXPECT_EQ(fp->size(), 32u * 3 - 1);
}

TEST_F(TlsCheckTest, ExpiredCertificateIsRefused) {
  const std::string m = Refusal(std::time(nullptr) + 31 * 86400);
  EXPECT_NE(m.find("api.tls.cert /etc/s/cert.pem expired on "), std::string::npos) << m;
  EXPECT_NE(m.find("sparkctl tls selfsigned"), std::string::npos) << m;
}

TEST_F(TlsCheckTest, KeyOfAnotherCertificateIsRefused) {
  auto other = tls::MakeSelfSigned({.names = {"198.19.0.10"}});
  ASSERT_TRUE(other.ok());
  t_.SetFile("spark-0", "/etc/s/key.pem", other->key_pem);
  const std::string m = Refusal();
  EXPECT_NE(m.find("api.tls.key /etc/s/key.pem does not belong to api.tls.cert"),
            std::string::npos)
      << m;
}

TEST_F(TlsCheckTest, CertificateNotCoveringTheAdvertisedAddressIsRefused) {
  auto other = tls::MakeSelfSigned({.names = {"10.0.0.9", "elsewhere.lan"}});
  ASSERT_TRUE(other.ok());
  Put(*other);
  const std::string m = Refusal();
  EXPECT_NE(m.find("covers elsewhere.lan, 10.0.0.9, not 198.19.0.10"), std::string::npos) << m;
}

TEST_F(TlsCheckTest, MissingFileIsNamed) {
  t_.RemoveFile("spark-0", "/etc/s/key.pem");
  const std::string m = Refusal();
  EXPECT_NE(m.find("api.tls.key /etc/s/key.pem does not exist"), std::string::npos) << m;
}

}  // namespace
}  // namespace spark::up
