#include "sparkctl/dashboard/dashboard_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "sparkctl/serving/http_client.h"
#include "sparkctl/tls/certificates.h"

namespace spark::dashboard {
namespace {

using engine::server::HttpRequest;
using engine::server::HttpResponse;
using nlohmann::ordered_json;

constexpr char kKey[] = "dashboard-test-key-0123456789";

class FakeWriter : public engine::server::ResponseWriter {
 public:
  void Send(HttpResponse r) override { response = std::move(r); }
  void StartStream(int, std::string) override {}
  void Write(std::string) override {}
  void EndStream() override {}
  void OnClientGone(std::function<void()>) override {}
  HttpResponse response;
};

ordered_json Snapshot(double t) {
  return {{"schema", "sparkctl-dashboard/v1"},
          {"time", t},
          {"status", {{"health", "ready"}, {"endpoint_node", "spark-0"}}},
          {"nodes", ordered_json::array({{{"node", "spark-0"}, {"reachable", true},
                                          {"mem_available_kib", 1024}, {"mem_total_kib", 2048},
                                          {"swap_used_kib", 0}, {"gpu", nullptr},
                                          {"links", ordered_json::array()}}})},
          {"ranks", ordered_json::array()},
          {"endpoint", nullptr}};
}

Result<serving::HttpReply> Get(int port, const std::string& path, const std::string& key = "",
                               std::function<void(std::string_view)> on_data = nullptr,
                               std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto url = serving::ParseUrl("http://127.0.0.1:" + std::to_string(port));
  if (!url.ok()) return url.status();
  serving::HttpCallOptions o;
  o.path = path;
  o.api_key = key;
  o.timeout = timeout;
  o.on_data = std::move(on_data);
  return serving::HttpCall(*url, o);
}

// What the server sends on a GET of `path` within `duration` (a stream that does not end).
std::string ReadStream(int port, const std::string& path, std::chrono::milliseconds duration) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string got;
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

TEST(DashboardServerTest, ServesThePageItsAssetsAndTheClusterMetrics) {
  History history;
  DashboardOptions o;
  o.port = 0;
  auto server = DashboardServer::Start(o, history);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  auto metrics = Get(port, "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 503);  // no tick yet
  history.Add(Snapshot(1), "vllm:num_requests_running{model_name=\"m\"} 2.0\n", {});
  auto page = Get(port, "/");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>sparkctl dashboard</title>"), std::string::npos);
  auto chart = Get(port, "/assets/chart.min.js");
  ASSERT_TRUE(chart.ok());
  EXPECT_EQ(chart->status, 200);
  EXPECT_NE(chart->body.find("Chart.js v3.9.1"), std::string::npos);
  EXPECT_EQ(Get(port, "/assets/nothing.js")->status, 404);
  metrics = Get(port, "/metrics");
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("sparkctl_node_memory_available_bytes{node=\"spark-0\"} 1048576"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("vllm:num_requests_running{node=\"spark-0\",rank=\"0\",model_name=\"m\"} 2.0"),
            std::string::npos);
  auto snapshot = Get(port, "/api/snapshot");
  EXPECT_EQ(ordered_json::parse(snapshot->body)["time"], 1.0);
}

// With TLS files the page, its assets and the cluster /metrics come over HTTPS to a client that
// trusts the certificate, with the key as Bearer; a clear-text request gets no page.
TEST(DashboardServerTest, ServesHttpsWithTheKey) {
  auto pem = tls::MakeSelfSigned({.names = {"127.0.0.1"}});
  ASSERT_TRUE(pem.ok()) << pem.status().message();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("dashboard-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  std::ofstream(cert) << pem->cert_pem;
  std::ofstream(key) << pem->key_pem;
  History history;
  history.Add(Snapshot(1), "", {});
  DashboardOptions o;
  o.port = 0;
  o.tls = {cert, key, ""};
  o.keys = *engine::server::ApiKeys::FromKeys({kKey});
  auto server = DashboardServer::Start(o, history);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  auto url = serving::ParseUrl("https://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(url.ok());
  url->ca_file = cert;
  auto get = [&](const std::string& path, const std::string& api_key) {
    serving::HttpCallOptions c;
    c.path = path;
    c.api_key = api_key;
    c.timeout = std::chrono::seconds(5);
    return serving::HttpCall(*url, c);
  };
  auto page = get("/", kKey);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>sparkctl dashboard</title>"), std::string::npos);
  auto metrics = get("/metrics", kKey);
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);
  auto refused = get("/", "");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 401);
  auto clear = Get(port, "/", kKey);
  EXPECT_TRUE(!clear.ok() || clear->status != 200) << "a clear-text request got the page";
  std::filesystem::remove_all(dir);
}

TEST(DashboardServerTest, EventsStreamHelloThenEachTick) {
  History history;
  history.Add(Snapshot(1), "", {{{"time", 1}, {"kind", "rank"}, {"text", "rank 1 exited"}}});
  DashboardOptions o;
  o.port = 0;
  auto server = DashboardServer::Start(o, history);
  ASSERT_TRUE(server.ok());
  std::thread ticker([&] {
    for (int i = 0; i < 50 && history.num_listeners() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    history.Add(Snapshot(2), "", {});
  });
  const std::string stream =
      ReadStream((*server)->port(), "/events", std::chrono::milliseconds(1500));
  ticker.join();
  EXPECT_NE(stream.find("Content-Type: text/event-stream"), std::string::npos);
  const size_t hello = stream.find("event: hello\ndata: ");
  const size_t tick = stream.find("event: tick\ndata: ");
  ASSERT_NE(hello, std::string::npos) << stream.substr(0, 300);
  ASSERT_NE(tick, std::string::npos) << stream.substr(0, 300);
  EXPECT_LT(hello, tick);
  EXPECT_NE(stream.find("rank 1 exited"), std::string::npos);  // the event log comes with hello
  EXPECT_NE(stream.find("\"time\":2.0"), std::string::npos);
}

TEST(DashboardServerTest, OffLoopbackWithoutAKeyIsRefused) {
  History history;
  DashboardOptions o;
  o.bind = "0.0.0.0";
  o.port = 0;
  auto server = DashboardServer::Start(o, history);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--api-key-file"), std::string::npos);
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.3.4.5"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("198.18.0.1"));
}

TEST(DashboardServerTest, WithAKeyEveryRequestNeedsItAsBearerOrCookie) {
  History history;
  history.Add(Snapshot(1), "", {});
  DashboardOptions o;
  o.port = 0;
  o.keys = *engine::server::ApiKeys::FromKeys({kKey});
  auto server = DashboardServer::Start(o, history);
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  EXPECT_EQ(Get(port, "/")->status, 401);
  EXPECT_EQ(Get(port, "/metrics")->status, 401);
  EXPECT_EQ(Get(port, "/events")->status, 401);
  EXPECT_EQ(Get(port, "/metrics", "wrong-key-0123456789")->status, 401);
  EXPECT_EQ(Get(port, "/metrics", kKey)->status, 200);

  // The browser's way: ?key= once sets the cookie, which then authorizes the stream.
  auto handle = [&](const std::string& target, const std::string& cookie) {
    HttpRequest r;
    r.method = "GET";
    r.target = target;
    if (!cookie.empty()) r.headers["cookie"] = cookie;
    auto w = std::make_shared<FakeWriter>();
    (*server)->Handle(r, w);
    return w->response;
  };
  HttpResponse set = handle(std::string("/?key=") + kKey, "");
  EXPECT_EQ(set.status, 303);
  std::string cookie;
  for (const auto& [name, value] : set.headers) {
    if (name == "Set-Cookie") cookie = value;
  }
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_EQ(handle("/", "other=1; " + cookie.substr(0, cookie.find(';'))).status, 200);
  EXPECT_EQ(handle("/?key=wrong-key-0123456789", "").status, 401);
  EXPECT_EQ(handle("/", "sparkctl_dashboard_key=wrong-key-0123456789").status, 401);
}

}  // namespace
}  // namespace spark::dashboard
