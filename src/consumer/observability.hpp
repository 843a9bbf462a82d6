// The embedded HTTP endpoint (observability.http.listen): /metrics, /status and /group. Made and
// started by the constructor, before the background thread runs; it then lives on the background
// thread's io_context, reading metrics snapshots (`snapshot`, which takes the shared state's
// lock) and the group's view (fetch::group_observer, gathered only while asked for) there.
// Without observability.http.listen nothing is made.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "fetch/fetcher.hpp"
#include "kgroup/config.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/share_consumer.hpp"
#include "net/cluster.hpp"

namespace kgroup::http {
class server;
}
namespace kgroup::fetch {
class group_observer;
}

namespace kgroup::detail {

class observability_endpoint {
 public:
  /// Throws Error(invalid_config) for a bad address or allowed host, a port in use, or a kgroup
  /// built without the endpoint (KGROUP_HTTP=OFF) when one is configured.
  observability_endpoint(boost::asio::io_context& io, const Config& config, bool kip848,
                         std::shared_ptr<net::cluster> cluster, std::shared_ptr<fetch::fetcher> fetcher,
                         std::function<fetch::group_identity()> identity,
                         std::function<ConsumerMetrics()> snapshot);
  /// A share member's endpoint: /metrics, /status and the share dashboard of `snapshot` (no /group:
  /// the share group's view would need ShareGroupDescribe). Throws as the constructor above.
  observability_endpoint(boost::asio::io_context& io, const Config& config,
                         std::function<ShareConsumerMetrics()> snapshot);
  ~observability_endpoint();
  observability_endpoint(const observability_endpoint&) = delete;
  observability_endpoint& operator=(const observability_endpoint&) = delete;

  /// host:port it listens on; empty when none is configured.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// Background thread, before the io_context stops.
  void stop();

 private:
  std::unique_ptr<http::server> server_;
  std::shared_ptr<fetch::group_observer> observer_;
  std::string endpoint_;
};

}  // namespace kgroup::detail
