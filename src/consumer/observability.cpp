// The embedded HTTP endpoint. See observability.hpp.
#include "consumer/observability.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "fetch/group_observer.hpp"
#include "kgroup/error.hpp"
#include "kgroup_build_config.hpp"
#if KGROUP_WITH_HTTP
#include "http/render.hpp"
#include "http/server.hpp"
#endif

namespace kgroup::detail {

#if KGROUP_WITH_HTTP
namespace {

// observability.http.listen and observability.http.allowed.hosts, checked.
http::server_options server_options_of(const Config& config, const std::string& listen) {
  std::string why;
  if (!http::parse_listen_address(listen, why)) {
    throw Error(make_error_code(client_errc::invalid_config), "observability.http.listen: " + why);
  }
  http::server_options so;
  so.listen = listen;
  for (const auto& host : config.get_list("observability.http.allowed.hosts")) {
    if (!http::normalize_allowed_host(host, why)) {
      throw Error(make_error_code(client_errc::invalid_config), "observability.http.allowed.hosts: " + why);
    }
    so.allowed_hosts.push_back(host);
  }
  return so;
}

// Starts `server`; the bound address, or Error(invalid_config) when it cannot listen.
std::string start(std::unique_ptr<http::server>& server, const std::string& listen) {
  if (auto ec = server->start()) {
    server.reset();
    throw Error(make_error_code(client_errc::invalid_config),
                "observability.http.listen: cannot listen on " + listen + ": " + ec.message());
  }
  return server->endpoint();
}

}  // namespace
#endif

observability_endpoint::observability_endpoint(boost::asio::io_context& io, const Config& config, bool kip848,
                                               std::shared_ptr<net::cluster> cluster,
                                               std::shared_ptr<fetch::fetcher> fetcher,
                                               std::function<fetch::group_identity()> identity,
                                               std::function<ConsumerMetrics()> snapshot) {
  const std::string listen = config.get("observability.http.listen");
  if (listen.empty()) return;
#if !KGROUP_WITH_HTTP
  (void)io, (void)kip848, (void)cluster, (void)fetcher, (void)identity, (void)snapshot;
  throw Error(make_error_code(client_errc::invalid_config),
              "observability.http.listen: this kgroup was built without the HTTP endpoint (KGROUP_HTTP=OFF)");
#else
  auto so = server_options_of(config, listen);
  // GET /group: the whole group's view, gathered on the background thread only while asked for.
  fetch::group_observer_options go;
  go.group_id = config.get("group.id");
  go.kip848 = kip848;
  go.request_timeout = std::min(config.get_ms("request.timeout.ms"), std::chrono::milliseconds(5000));
  observer_ = std::make_shared<fetch::group_observer>(io, std::move(cluster), std::move(fetcher), go,
                                                      std::move(identity));
  so.group_view = [o = observer_] { return o->view(); };
  server_ = std::make_unique<http::server>(io, so, std::move(snapshot));
  endpoint_ = start(server_, listen);
  logger()->info("observability endpoint on http://{}/ (/metrics, /status, /group)", endpoint_);
#endif
}

observability_endpoint::observability_endpoint(boost::asio::io_context& io, const Config& config,
                                               std::function<ShareConsumerMetrics()> snapshot) {
  const std::string listen = config.get("observability.http.listen");
  if (listen.empty()) return;
#if !KGROUP_WITH_HTTP
  (void)io, (void)snapshot;
  throw Error(make_error_code(client_errc::invalid_config),
              "observability.http.listen: this kgroup was built without the HTTP endpoint (KGROUP_HTTP=OFF)");
#else
  auto so = server_options_of(config, listen);
  so.dashboard = http::server_options::dashboard_page::share;
  http::pages pages{[snapshot] { return http::render_share_prometheus(snapshot()); },
                    [snapshot] { return http::render_share_status_json(snapshot()); }};
  server_ = std::make_unique<http::server>(io, std::move(so), std::move(pages));
  endpoint_ = start(server_, listen);
  logger()->info("observability endpoint of a share member on http://{}/ (/metrics, /status)", endpoint_);
#endif
}

observability_endpoint::~observability_endpoint() = default;

void observability_endpoint::stop() {
#if KGROUP_WITH_HTTP
  if (server_) server_->stop();
  if (observer_) observer_->shutdown();
#endif
}

}  // namespace kgroup::detail
