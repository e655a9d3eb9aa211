// HTTPS in HttpServer: a client that pins the certificate gets answers and streams, a plain
// HTTP client gets a plain 400 instead of garbage, TLS 1.2 and ALPN http/1.1 are negotiated,
// client certificates are required with a CA file, and a reload serves new files to new
// connections without cutting a live stream.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/server/openai_server.h"
#include "sparkctl/tls/certificates.h"
#include "tests/engine/server/fake_service.h"
#include "tests/engine/server/http_test_client.h"

namespace spark::engine::server {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
using nlohmann::json;
using testing::ClientResponse;
using testing::HttpCallVia;
using testing::Via;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tls_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    pem_ = MakeCert();
    WriteFiles(pem_);
  }
  void TearDown() override {
    server_.reset();
    service_.reset();
    std::filesystem::remove_all(dir_);
  }
  static spark::tls::PemPair MakeCert() {
    auto pem = spark::tls::MakeSelfSigned({.names = {"localhost", "127.0.0.1"}});
    EXPECT_TRUE(pem.ok()) << pem.status().ToString();
    return *pem;
  }
  void WriteFiles(const spark::tls::PemPair& pem) {
    WriteFile(cert(), pem.cert_pem);
    WriteFile(key(), pem.key_pem);
  }
  std::string cert() const { return (dir_ / "cert.pem").string(); }
  std::string key() const { return (dir_ / "key.pem").string(); }

  void Start(OpenAIServerOptions options = {}, testing::FakeOptions fake = {}) {
    service_ = std::make_unique<testing::FakeService>(
        fake,
        [this](const std::vector<int32_t>& ids) {
          std::string s;
          for (int32_t t : ids) s += codec_.TokenText(t);
          return s;
        },
        [this](const std::string& text) { return codec_.Encode(text, false); });
    options.http.port = 0;
    if (options.http.tls.cert_file.empty()) options.http.tls = {cert(), key(), ""};
    options.served_model_name = "fake";
    auto server = OpenAIServer::Start(options, service_.get(), &codec_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  static std::string ChatBody(bool stream, int tokens = 8) {
    return json{{"model", "fake"},
                {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                {"max_tokens", tokens},
                {"stream", stream}}
        .dump();
  }

  std::filesystem::path dir_;
  spark::tls::PemPair pem_;
  ByteCodec codec_;
  std::unique_ptr<testing::FakeService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(TlsTest, PinnedClientGetsAnswersAndStreams) {
  Start();
  const Via via{.ca_pem = pem_.cert_pem};
  ClientResponse r = HttpCallVia(server_->port(), via, "POST", "/v1/chat/completions",
                                 ChatBody(false));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(json::parse(r.body)["object"], "chat.completion");
  ClientResponse s = HttpCallVia(server_->port(), via, "POST", "/v1/chat/completions",
                                 ChatBody(true));
  ASSERT_EQ(s.status, 200) << s.error;
  std::vector<std::string> data = testing::SseData(s.body);
  ASSERT_GE(data.size(), 2u);
  EXPECT_EQ(data.back(), "[DONE]");
}

TEST_F(TlsTest, ClientTrustingAnotherCertificateIsRefused) {
  Start();
  const ClientResponse r =
      HttpCallVia(server_->port(), {.ca_pem = MakeCert().cert_pem}, "GET", "/health");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.error.find("certificate verify failed"), std::string::npos) << r.error;
}

TEST_F(TlsTest, PlainHttpGetsAPlain400SayingHttps) {
  Start();
  const std::string got = testing::RawExchangeVia(
      server_->port(), {}, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", std::chrono::seconds(3));
  EXPECT_EQ(got.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("This port serves HTTPS only: use https:// URLs\n"), std::string::npos);
  for (int i = 0; i < 300 && server_->http().num_connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->http().num_connections(), 0);
}

using Negotiated = std::pair<std::string, std::string>;

// Handshakes with OpenSSL directly: the negotiated version and ALPN protocol, or "" on failure.
std::pair<std::string, std::string> Handshake(int port, const std::string& ca_pem,
                                              int max_version, const std::string& alpn) {
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.add_certificate_authority(net::buffer(ca_pem));
  ctx.set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_max_proto_version(ctx.native_handle(), max_version);
  ssl::stream<net::ip::tcp::socket> stream(ioc, ctx);
  SSL_set_alpn_protos(stream.native_handle(), reinterpret_cast<const unsigned char*>(alpn.data()),
                      static_cast<unsigned>(alpn.size()));
  stream.next_layer().connect(
      {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  boost::system::error_code ec;
  stream.handshake(ssl::stream_base::client, ec);
  if (ec) return {"", ""};
  const unsigned char* proto = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &proto, &len);
  return {SSL_get_version(stream.native_handle()),
          std::string(reinterpret_cast<const char*>(proto), len)};
}

TEST_F(TlsTest, NegotiatesTls12AndAlpnHttp11) {
  Start();
  const std::string h11_and_h2 = std::string("\x02h2\x08http/1.1", 12);
  EXPECT_EQ(Handshake(server_->port(), pem_.cert_pem, TLS1_3_VERSION, h11_and_h2),
            Negotiated("TLSv1.3", "http/1.1"));
  EXPECT_EQ(Handshake(server_->port(), pem_.cert_pem, TLS1_2_VERSION, h11_and_h2),
            Negotiated("TLSv1.2", "http/1.1"));
  EXPECT_EQ(Handshake(server_->port(), pem_.cert_pem, TLS1_3_VERSION, std::string("\x02h2", 3)),
            Negotiated("", ""));  // We do not speak h2.
}

TEST_F(TlsTest, CaFileRequiresClientCertificates) {
  const spark::tls::PemPair client_ca = MakeCert();
  const std::string ca = (dir_ / "clients.pem").string();
  WriteFile(ca, client_ca.cert_pem);
  OpenAIServerOptions o;
  o.http.tls = {cert(), key(), ca};
  Start(o);
  const ClientResponse r = HttpCallVia(server_->port(), {.ca_pem = pem_.cert_pem}, "GET", "/health");
  EXPECT_EQ(r.status, 0) << "answered a client without a certificate";
}

TEST_F(TlsTest, BadFilesAreRefusedByName) {
  WriteFiles({MakeCert().cert_pem, pem_.key_pem});  // A key of another certificate.
  auto mismatched = MakeServerTlsContext({cert(), key(), ""});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("does not belong to"), std::string::npos);
  auto missing = MakeServerTlsContext({(dir_ / "nope.pem").string(), key(), ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--ssl-certfile"), std::string::npos);
}

TEST_F(TlsTest, ReloadServesNewFilesToNewConnectionsAndKeepsLiveStreams) {
  testing::FakeOptions slow;
  slow.token_delay = std::chrono::milliseconds(20);
  Start({}, slow);
  const int port = server_->port();
  ClientResponse live;
  std::thread streaming([&] {
    live = HttpCallVia(port, {.ca_pem = pem_.cert_pem}, "POST", "/v1/chat/completions",
                       ChatBody(true, 60));
  });
  while (server_->active_sequences() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const spark::tls::PemPair next = MakeCert();
  WriteFiles(next);
  ASSERT_TRUE(server_->http().ReloadTls().ok());
  EXPECT_EQ(HttpCallVia(port, {.ca_pem = next.cert_pem}, "GET", "/health").status, 200);
  EXPECT_EQ(HttpCallVia(port, {.ca_pem = pem_.cert_pem}, "GET", "/health").status, 0);
  streaming.join();
  ASSERT_EQ(live.status, 200) << live.error;
  EXPECT_EQ(testing::SseData(live.body).back(), "[DONE]");
  WriteFile(key(), "not a key");
  EXPECT_FALSE(server_->http().ReloadTls().ok());  // The previous files stay in use.
  EXPECT_EQ(HttpCallVia(port, {.ca_pem = next.cert_pem}, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace spark::engine::server
