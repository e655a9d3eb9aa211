#include "sparkctl/dashboard/dashboard_server.h"

#include <arpa/inet.h>

#include <utility>

#include "base/strings.h"
#include "sparkctl/dashboard/assets.h"
#include "sparkctl/dashboard/cluster_metrics.h"

namespace spark::dashboard {
namespace {

using engine::server::HttpRequest;
using engine::server::HttpResponse;
using engine::server::ResponseWriter;

constexpr char kCookie[] = "sparkctl_dashboard_key";

HttpResponse Text(int status, std::string body, std::string type = "text/plain; charset=utf-8") {
  HttpResponse r;
  r.status = status;
  r.content_type = std::move(type);
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::strtol(std::string(s.substr(i + 1, 2)).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// The value of query parameter `name` in `target`, or "".
std::string QueryParam(const std::string& target, const std::string& name) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  for (const std::string& kv : Split(std::string_view(target).substr(q + 1), '&', true)) {
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == name && eq != std::string::npos) return PercentDecode(kv.substr(eq + 1));
  }
  return "";
}

std::string CookieValue(const std::string& header, const std::string& name) {
  for (const std::string& part : Split(header, ';', true)) {
    std::string_view kv = Trim(part);
    if (StartsWith(kv, name + "=")) return std::string(kv.substr(name.size() + 1));
  }
  return "";
}

const char kUnauthorizedPage[] =
    "<!doctype html><title>sparkctl dashboard</title><p>This dashboard needs the API key of the "
    "profile (api.key_file, or sparkctl dashboard --api-key-file). Open <code>/?key=KEY</code> "
    "once; the browser then keeps it in a cookie for this address.</p>\n";

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
    return std::equal(std::begin(v6.s6_addr), std::end(v6.s6_addr), kLoopback.s6_addr);
  }
  return false;
}

DashboardServer::DashboardServer(const DashboardOptions& options, History& history)
    : options_(options), history_(history) {}

Result<std::unique_ptr<DashboardServer>> DashboardServer::Start(const DashboardOptions& options,
                                                                History& history) {
  if (!IsLoopbackAddress(options.bind) && options.keys.empty()) {
    return InvalidArgumentError("--bind " + options.bind +
                                " is off loopback: the dashboard then needs an API key (the "
                                "profile's api.key_file, or --api-key-file FILE)");
  }
  std::unique_ptr<DashboardServer> d(new DashboardServer(options, history));
  engine::server::HttpServerOptions http;
  http.host = options.bind;
  http.port = options.port;
  http.tls = options.tls;
  http.max_body_bytes = 64 * 1024;  // nothing here takes a body
  DashboardServer* self = d.get();
  SPARK_ASSIGN_OR_RETURN(d->server_,
                         engine::server::HttpServer::Start(
                             http, [self](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                               self->Handle(std::move(r), std::move(w));
                             }));
  return d;
}

DashboardServer::~DashboardServer() { Stop(); }

void DashboardServer::Stop() {
  if (server_) server_->Stop();
  std::lock_guard lock(mu_);
  for (int id : listeners_) history_.Unlisten(id);
  listeners_.clear();
}

bool DashboardServer::Authorized(const HttpRequest& r) const {
  if (options_.keys.empty()) return true;
  if (options_.keys.Check(r.Header("authorization"))) return true;
  const std::string cookie = CookieValue(r.Header("cookie"), kCookie);
  return !cookie.empty() && options_.keys.Check("Bearer " + PercentDecode(cookie));
}

void DashboardServer::Handle(HttpRequest r, std::shared_ptr<ResponseWriter> w) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  if (r.method != "GET" && r.method != "HEAD") {
    HttpResponse resp = Text(405, "only GET\n");
    resp.headers.emplace_back("Allow", "GET, HEAD");
    return w->Send(std::move(resp));
  }
  if (!options_.keys.empty() && path == "/") {
    const std::string key = QueryParam(r.target, "key");
    if (!key.empty() && options_.keys.Check("Bearer " + key)) {
      HttpResponse resp = Text(303, "");
      resp.headers.emplace_back("Location", "/");
      resp.headers.emplace_back("Set-Cookie",
                                std::string(kCookie) + "=" + key +
                                    "; Path=/; HttpOnly; SameSite=Strict" +
                                    (options_.tls.enabled() ? "; Secure" : ""));
      return w->Send(std::move(resp));
    }
  }
  if (!Authorized(r)) {
    HttpResponse resp = Text(401, kUnauthorizedPage, "text/html; charset=utf-8");
    resp.headers.emplace_back("WWW-Authenticate", "Bearer");
    return w->Send(std::move(resp));
  }
  if (path == "/" || path == "/index.html" || path.starts_with("/assets/")) {
    const Asset* a = FindAsset(path.starts_with("/assets/") ? path.substr(8) : "index.html");
    if (!a) return w->Send(Text(404, "no such asset: " + path + "\n"));
    HttpResponse resp = Text(200, std::string(a->data), std::string(a->content_type));
    resp.headers.emplace_back("Content-Security-Policy",
                              "default-src 'self'; img-src 'self' data:; object-src 'none'");
    return w->Send(std::move(resp));
  }
  if (path == "/events") {
    w->StartStream(200, "text/event-stream");
    w->Write(history_.HelloMessage());
    const int id = history_.Listen([w](const std::string& m) { w->Write(m); });
    {
      std::lock_guard lock(mu_);
      listeners_.insert(id);
    }
    w->OnClientGone([this, id] {
      history_.Unlisten(id);
      std::lock_guard lock(mu_);
      listeners_.erase(id);
    });
    return;
  }
  const auto dump = [](const nlohmann::ordered_json& j) {
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  };
  if (path == "/api/snapshot") return w->Send(Text(200, dump(history_.Latest()), "application/json"));
  if (path == "/api/history") return w->Send(Text(200, dump(history_.Rows()), "application/json"));
  if (path == "/api/events") return w->Send(Text(200, dump(history_.Events()), "application/json"));
  if (path == "/metrics") {
    if (history_.empty()) return w->Send(Text(503, "no collector tick yet\n"));
    return w->Send(Text(200,
                        RenderClusterMetrics(history_.Latest(), history_.LatestEngineMetrics()),
                        "text/plain; version=0.0.4; charset=utf-8"));
  }
  w->Send(Text(404, "not found: " + path + "\n"));
}

const Asset* FindAsset(std::string_view name) {
  for (const Asset& a : EmbeddedAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace spark::dashboard
