#include <boost/asio/io_context.hpp>

#include "base/log.hpp"
#include "kgroup/cluster.hpp"
#include "kgroup/error.hpp"
#include "net/cluster.hpp"

namespace kgroup {

namespace {

template <class Request>
ApiVersionInfo version_info(const net::api_version_table& t) {
  std::string name = Request::name;
  name.resize(name.size() - std::string("Request").size());
  ApiVersionInfo v;
  v.api_key = Request::api_key;
  v.name = std::move(name);
  v.broker_min = t.broker_min(Request::api_key);
  v.broker_max = t.broker_max(Request::api_key);
  v.client_min = Request::lowest_version;
  v.client_max = Request::highest_version;
  v.chosen = t.common(Request::api_key, Request::lowest_version, Request::highest_version);
  return v;
}

std::vector<ApiVersionInfo> all_versions(const net::api_version_table& t) {
  using namespace protocol;
  return {version_info<api_versions_request>(t),     version_info<metadata_request>(t),
          version_info<find_coordinator_request>(t), version_info<join_group_request>(t),
          version_info<sync_group_request>(t),       version_info<heartbeat_request>(t),
          version_info<leave_group_request>(t),      version_info<offset_commit_request>(t),
          version_info<offset_fetch_request>(t),     version_info<list_offsets_request>(t),
          version_info<fetch_request>(t),            version_info<offset_for_leader_epoch_request>(t),
          version_info<describe_groups_request>(t)};
}

}  // namespace

ClusterInfo describe_cluster(const Config& config, std::chrono::milliseconds timeout) {
  // The connections log on this thread (it runs the io_context): to the Config's sink.
  const detail::log_scope log_scope(config.log_sink().get());
  config.validate();
  boost::asio::io_context io;
  auto c = std::make_shared<net::cluster>(io, net::cluster_options::from_config(config));
  std::error_code result = make_error_code(client_errc::request_timed_out);
  bool metadata_done = false;
  std::size_t pending = 0;
  std::map<std::int32_t, bool> reachable;
  c->refresh_metadata(std::nullopt, timeout, [&](std::error_code ec) {
    result = ec;
    metadata_done = true;
    if (ec) return;
    for (const auto& [id, b] : c->metadata().brokers) {
      auto conn = c->broker(id);
      ++pending;
      conn->when_ready([&, id](std::error_code rec) {
        reachable[id] = !rec;
        --pending;
      });
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while ((!metadata_done || pending > 0) && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(50));
  }
  if (!metadata_done) {
    c->close();
    io.poll();
    throw Error(make_error_code(client_errc::request_timed_out), "describe_cluster: no metadata within the timeout");
  }
  if (result) {
    c->close();
    io.poll();
    throw Error(result, "describe_cluster: metadata request failed: " + result.message());
  }
  ClusterInfo info;
  const auto& md = c->metadata();
  info.cluster_id = md.cluster_id;
  info.controller_id = md.controller_id;
  for (const auto& [id, b] : md.brokers) {
    BrokerInfo bi;
    bi.node_id = id;
    bi.host = b.host;
    bi.port = b.port;
    bi.rack = b.rack;
    bi.reachable = reachable[id];
    if (auto conn = c->broker(id); conn && bi.reachable) bi.api_versions = all_versions(conn->versions());
    info.brokers.push_back(std::move(bi));
  }
  for (const auto& [name, t] : md.topics) {
    TopicInfo ti;
    ti.name = name;
    ti.topic_id = t.topic_id.is_zero() ? std::string() : t.topic_id.to_string();
    ti.error_code = t.error_code;
    ti.is_internal = t.is_internal;
    for (const auto& p : t.partitions) {
      ti.partitions.push_back({p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.error_code});
    }
    info.topics.push_back(std::move(ti));
  }
  c->close();
  io.poll();
  return info;
}

}  // namespace kgroup
