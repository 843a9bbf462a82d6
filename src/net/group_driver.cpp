#include "net/group_driver.hpp"

#include <algorithm>

#include "base/log.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

group_driver::group_driver(asio::io_context& io, std::shared_ptr<cluster> c, group_driver_options opts,
                           detail::shared_state& shared)
    : membership_driver_base(io, shared, opts.hooks,
                             opts.member),  // the consumer protocol's bytes (group/member_protocol.cpp)
      cluster_(std::move(c)),
      opts_(std::move(opts)) {
  cluster_->on_metadata([this] { on_metadata(); });
}

void group_driver::subscribe(std::vector<std::string> topics) {
  core().subscribe(clock::now(), std::move(topics));
  cluster_->start_periodic_refresh();
  process();
}

void group_driver::subscribe_pattern(std::regex pattern) {
  core().subscribe_pattern(clock::now(), std::move(pattern));
  cluster_->start_periodic_refresh();
  // The core matches the current metadata now, and again on every refresh (on_metadata).
  cluster_->refresh_metadata(std::nullopt, opts_.request_timeout, [](std::error_code) {});
  process();
}

void group_driver::on_coordinator(std::int32_t node) {
  core().coordinator_found(clock::now(), node);
  process();
}

void group_driver::apply(group::action& a) {
  apply_with(a, [&](auto& act) { apply_own(act); });
}

template <class T>
void group_driver::apply_own(T& act) {
  if constexpr (std::is_same_v<T, group::send_join_group>) {
    send_to_coordinator(
        std::move(act.request), [](protocol::join_group_request&, std::int16_t) {},
        [](group::member& m, const auto& r) { m.join_group_done(clock::now(), r); }, act.timeout);
  } else if constexpr (std::is_same_v<T, group::send_sync_group>) {
    send_to_coordinator(
        std::move(act.request), [](protocol::sync_group_request&, std::int16_t) {},
        [](group::member& m, const auto& r) { m.sync_group_done(clock::now(), r); });
  } else if constexpr (std::is_same_v<T, group::send_heartbeat>) {
    send_to_coordinator(
        std::move(act.request), [](protocol::heartbeat_request&, std::int16_t) {},
        [](group::member& m, const auto& r) { m.heartbeat_done(clock::now(), r); });
  } else if constexpr (std::is_same_v<T, group::send_leave_group>) {
    send_to_coordinator(
        std::move(act.request), group::fit_leave_group,
        [](group::member& m, const auto& r) { m.leave_group_done(clock::now(), r); });
  } else if constexpr (std::is_same_v<T, group::compute_assignment>) {
    do_compute_assignment(std::move(act));
  } else if constexpr (std::is_same_v<T, group::abandon_requests>) {
    // Callbacks of the requests sent so far are dropped (the core forgot them); failing the
    // group connection ends them now instead of at request.timeout.ms.
    abandon_requests();
    if (auto conn = cluster_->broker(act.node, channel::group)) conn->abort_requests("coordinator given up");
  }
}

void group_driver::do_compute_assignment(group::compute_assignment job) {
  // The core runs the assignor; the driver only fetches the metadata it needs.
  cluster_->refresh_metadata(
      job.topics, opts_.request_timeout, [self = shared_from_this(), job](std::error_code ec) {
        if (self->stopped_) return;
        ClusterMetadata cm;
        if (!ec) {
          const auto& md = self->cluster_->metadata();
          for (const auto& [id, b] : md.brokers) cm.brokers.push_back({id, b.rack});
          for (const auto& t : job.topics) {
            auto it = md.topics.find(t);
            if (it == md.topics.end() || it->second.error_code != 0) continue;  // unusable: no partitions
            TopicMetadata tm;
            tm.topic = t;
            tm.partition_count = static_cast<std::int32_t>(it->second.partitions.size());
            for (const auto& p : it->second.partitions) tm.replicas.push_back(p.replicas);
            cm.topics.push_back(std::move(tm));
          }
        }
        self->core().assignment_metadata(clock::now(), job.generation, ec, cm);
        self->process();
      });
}

void group_driver::on_metadata() {
  if (stopped_) return;
  const auto& md = cluster_->metadata();
  std::vector<group::topic_summary> topics;
  topics.reserve(md.topics.size());
  for (const auto& [name, t] : md.topics) topics.push_back({name, t.is_internal, t.error_code, t.partitions.size()});
  core().metadata_updated(clock::now(), topics);
  process();
}

}  // namespace kgroup::net
