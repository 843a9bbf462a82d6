// A relaying proxy in front of a librdkafka mock cluster that adds DescribeGroups and
// ConsumerGroupDescribe (KIP-848), which neither librdkafka mock (2.0.2, 2.15) implements, so the
// group view (GET /group) can be tested with real members of a real group.
//
// One listener per mock broker. Every request is relayed to the broker unchanged and every answer
// comes back unchanged, except:
//   - ApiVersions answers also offer DescribeGroups 0-5 and ConsumerGroupDescribe 0;
//   - Metadata and FindCoordinator answers name the proxy's ports instead of the brokers', so
//     clients keep talking through it;
//   - DescribeGroups is answered by the proxy itself, in order with the relayed answers, from what
//     it relayed: each member's JoinGroup (client id, host, instance id, its subscription as the
//     leader saw it) and the assignment its SyncGroup answer carried, for the members that synced
//     the group's latest generation. LeaveGroup removes members. The state is "Stable" once a
//     member synced the latest generation, "Empty" without members, "CompletingRebalance" else.
//   - ConsumerGroupDescribe likewise, from the ConsumerGroupHeartbeat traffic of `consumer`
//     groups: each member's client id, host, instance id, subscribed topic names, epoch and the
//     assignment its latest heartbeat answer carried (topic ids only: the client names them); a
//     heartbeat with epoch -1 or -2 removes the member. The state is "Stable" when every member is
//     at the group's highest epoch, "Reconciling" else, "Empty" without members.
// `set_tamper` lets a test change each DescribeGroups answer before it is sent (bad assignment
// bytes, another state).
//
// Test code: blocking sockets, two threads per relayed connection. Needs Asio and kgroup's codec.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "kafka_relay.hpp"
#include "mock_cluster.hpp"
#include "protocol/headers.hpp"
#include "protocol/messages.hpp"

namespace kgroup::test {

class group_proxy {
 public:
  using described_group = protocol::describe_groups_response::described_group;
  using tamper_fn = std::function<void(described_group&)>;

  explicit group_proxy(const mock_cluster& mc) {
    for (std::int32_t id = 1; id <= mc.broker_count(); ++id) {
      auto l = std::make_unique<listener>();
      l->upstream = mc.address_of(id);
      l->acceptor.emplace(io_, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
      l->port = l->acceptor->local_endpoint().port();
      port_map_[l->upstream.port] = l->port;
      listeners_.push_back(std::move(l));
    }
    for (auto& l : listeners_) l->thread = std::thread([this, lp = l.get()] { accept_loop(*lp); });
  }

  ~group_proxy() { stop(); }
  group_proxy(const group_proxy&) = delete;
  group_proxy& operator=(const group_proxy&) = delete;

  /// "127.0.0.1:PORT,..." of the proxy's listeners, for clients' bootstrap.servers.
  std::string bootstrap_servers() const {
    std::string out;
    for (const auto& l : listeners_) out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(l->port);
    return out;
  }

  /// The listeners' addresses in broker id order (to chain another front in front of this one).
  std::vector<broker_address> addresses() const {
    std::vector<broker_address> out;
    for (const auto& l : listeners_) out.push_back({"127.0.0.1", l->port});
    return out;
  }

  void set_tamper(tamper_fn f) {
    std::lock_guard lock(state_mutex_);
    tamper_ = std::move(f);
  }

  /// DescribeGroups and ConsumerGroupDescribe requests answered so far.
  int describe_requests() const { return describes_; }

  void stop() {
    if (stopped_.exchange(true)) return;
    for (auto& l : listeners_) {
      try {  // a blocking accept() is not woken by closing the acceptor: connect once
        boost::asio::io_context io;
        boost::asio::ip::tcp::socket s(io);
        s.connect({boost::asio::ip::make_address("127.0.0.1"), l->port});
      } catch (const std::exception&) {
      }
      if (l->thread.joinable()) l->thread.join();
    }
    std::vector<std::shared_ptr<relay>> relays;
    {
      std::lock_guard lock(relays_mutex_);
      relays.swap(relays_);
    }
    for (auto& r : relays) r->shut();
    for (auto& r : relays) {
      if (r->up.joinable()) r->up.join();
      if (r->down.joinable()) r->down.join();
    }
  }

 private:
  using bytes = kafka_relay::bytes;
  using tcp = boost::asio::ip::tcp;

  struct listener {
    broker_address upstream;
    std::optional<tcp::acceptor> acceptor;
    std::uint16_t port = 0;
    std::thread thread;
  };

  // What a relayed request tells us once its answer arrives.
  struct pending {
    std::int16_t api_key = 0;
    std::int16_t version = 0;
    std::optional<bytes> answer;  // answered by the proxy (DescribeGroups)
    std::string group, member_id, client_id;
    std::optional<std::string> instance_id;
    std::int32_t generation = -1;
    std::optional<std::vector<std::string>> subscribed;  // ConsumerGroupHeartbeat's topic names
  };

  struct relay {
    relay(boost::asio::io_context& io) : client(io), broker(io) {}
    tcp::socket client;
    tcp::socket broker;
    std::string host;  // the client's address, as Kafka shows it: "/127.0.0.1"
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<pending> queue;
    bool closed = false;
    std::thread up, down;
    void shut() {
      {
        std::lock_guard lock(mutex);
        closed = true;
      }
      cv.notify_all();
      boost::system::error_code ignored;
      client.shutdown(tcp::socket::shutdown_both, ignored);
      broker.shutdown(tcp::socket::shutdown_both, ignored);
    }
  };

  struct member_rec {
    std::string client_id, host;
    std::optional<std::string> instance_id;
    std::int32_t generation = -1;  // the generation it synced
    bytes assignment;
  };
  // A KIP-848 member, from its ConsumerGroupHeartbeats.
  struct consumer_member_rec {
    std::string client_id, host;
    std::optional<std::string> instance_id;
    std::int32_t epoch = 0;
    std::vector<std::string> subscribed;
    std::vector<protocol::consumer_group_heartbeat_response::topic_partitions_t> assignment;
  };
  struct group_rec {
    std::map<std::string, consumer_member_rec> consumer_members;  // group.protocol=consumer
    std::string protocol;
    std::int32_t generation = -1;
    std::map<std::string, member_rec> members;
    std::map<std::string, bytes> subscriptions;  // as the leader's JoinGroup answer listed them
  };

  std::int32_t proxy_port(std::int32_t port) const {
    auto it = port_map_.find(static_cast<std::uint16_t>(port));
    return it == port_map_.end() ? port : it->second;
  }

  void accept_loop(listener& l) {
    while (!stopped_) {
      auto r = std::make_shared<relay>(io_);
      boost::system::error_code ec;
      l.acceptor->accept(r->client, ec);
      if (ec || stopped_) return;
      r->broker.connect({boost::asio::ip::make_address(l.upstream.host), l.upstream.port}, ec);
      if (ec) continue;  // the broker is down: the client sees its connection closed
      r->host = "/" + r->client.remote_endpoint(ec).address().to_string();
      std::lock_guard lock(relays_mutex_);
      if (stopped_) return;
      r->up = std::thread([this, r] { upstream(*r); });
      r->down = std::thread([this, r] { downstream(*r); });
      relays_.push_back(std::move(r));
    }
  }

  // Client -> broker: relays requests, notes what their answers will tell, answers DescribeGroups.
  void upstream(relay& r) {
    bytes frame;
    while (kafka_relay::read_frame(r.client, frame)) {
      kafka_relay::request_start start;
      if (!kafka_relay::peek_request(frame, start)) break;
      pending p;
      p.api_key = start.api_key;
      p.version = start.version;
      const std::int32_t corr = start.correlation_id;
      p.client_id = kafka_relay::client_id_of(frame);
      if (p.api_key == protocol::describe_groups_request::api_key) {
        protocol::describe_groups_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) p.answer = describe(req, p.version, corr);
        ++describes_;
      } else if (p.api_key == protocol::consumer_group_describe_request::api_key) {
        protocol::consumer_group_describe_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) p.answer = describe_consumer(req, p.version, corr);
        ++describes_;
      } else if (p.api_key == protocol::consumer_group_heartbeat_request::api_key) {
        protocol::consumer_group_heartbeat_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) {
          p.group = req.group_id;
          p.member_id = req.member_id;
          p.instance_id = req.instance_id;
          p.generation = req.member_epoch;
          p.subscribed = req.subscribed_topic_names;
          if (req.member_epoch < 0) {  // leaving
            std::lock_guard lock(state_mutex_);
            groups_[req.group_id].consumer_members.erase(req.member_id);
          }
        }
      } else if (p.api_key == protocol::join_group_request::api_key) {
        protocol::join_group_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) {
          p.group = req.group_id;
          p.instance_id = req.group_instance_id;
        }
      } else if (p.api_key == protocol::sync_group_request::api_key) {
        protocol::sync_group_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) {
          p.group = req.group_id;
          p.member_id = req.member_id;
          p.instance_id = req.group_instance_id;
          p.generation = req.generation_id;
        }
      } else if (p.api_key == protocol::leave_group_request::api_key) {
        protocol::leave_group_request req;
        if (kafka_relay::decode_request(frame, p.version, req)) {
          std::lock_guard lock(state_mutex_);
          auto& g = groups_[req.group_id];
          g.members.erase(req.member_id);
          for (const auto& m : req.members) g.members.erase(m.member_id);
        }
      }
      const bool answered = p.answer.has_value();
      {
        std::lock_guard lock(r.mutex);
        r.queue.push_back(std::move(p));
      }
      r.cv.notify_all();
      if (!answered && !kafka_relay::write_frame(r.broker, frame)) break;
    }
    r.shut();
  }

  // Broker -> client: answers in request order, rewritten where the header comment says.
  void downstream(relay& r) {
    bytes frame;
    while (true) {
      pending p;
      {
        std::unique_lock lock(r.mutex);
        r.cv.wait(lock, [&] { return r.closed || !r.queue.empty(); });
        if (r.queue.empty()) break;
        p = std::move(r.queue.front());
        r.queue.pop_front();
      }
      if (p.answer) {
        if (!kafka_relay::write_frame(r.client, *p.answer)) break;
        continue;
      }
      if (!kafka_relay::read_frame(r.broker, frame)) break;
      rewrite(r, p, frame);
      if (!kafka_relay::write_frame(r.client, frame)) break;
    }
    r.shut();
  }

  void rewrite(relay& r, const pending& p, bytes& frame) {
    protocol::response_header h;
    if (p.api_key == protocol::api_versions_response::api_key) {
      protocol::api_versions_response m;
      if (!kafka_relay::decode_response(frame, p.version, h, m) || m.error_code != 0) return;
      std::erase_if(m.api_keys, [](const auto& k) { return k.api_key == protocol::describe_groups_request::api_key; });
      m.api_keys.push_back({protocol::describe_groups_request::api_key, 0, 5});
      std::erase_if(m.api_keys,
                    [](const auto& k) { return k.api_key == protocol::consumer_group_describe_request::api_key; });
      m.api_keys.push_back({protocol::consumer_group_describe_request::api_key, 0, 0});
      if (auto out = kafka_relay::encode_response(m, p.version, h.correlation_id); !out.empty()) frame = std::move(out);
    } else if (p.api_key == protocol::metadata_response::api_key ||
               p.api_key == protocol::find_coordinator_response::api_key) {
      kafka_relay::rewrite_broker_addresses(p.api_key, p.version, frame, [this](std::int32_t port) { return proxy_port(port); });
    } else if (p.api_key == protocol::join_group_response::api_key) {
      protocol::join_group_response m;
      if (!kafka_relay::decode_response(frame, p.version, h, m) || m.error_code != 0) return;
      std::lock_guard lock(state_mutex_);
      auto& g = groups_[p.group];
      g.generation = m.generation_id;
      g.protocol = m.protocol_name.value_or("");
      auto& rec = g.members[m.member_id];
      rec.client_id = p.client_id;
      rec.host = r.host;
      rec.instance_id = p.instance_id;
      if (!m.members.empty()) {
        g.subscriptions.clear();
        for (const auto& jm : m.members) g.subscriptions[jm.member_id] = jm.metadata;
      }
    } else if (p.api_key == protocol::consumer_group_heartbeat_response::api_key) {
      protocol::consumer_group_heartbeat_response m;
      if (!kafka_relay::decode_response(frame, p.version, h, m) || m.error_code != 0 || p.generation < 0) return;
      std::lock_guard lock(state_mutex_);
      auto& rec = groups_[p.group].consumer_members[m.member_id.value_or(p.member_id)];
      rec.client_id = p.client_id;
      rec.host = r.host;
      rec.instance_id = p.instance_id;
      rec.epoch = m.member_epoch;
      if (p.subscribed) rec.subscribed = *p.subscribed;
      if (m.assignment) rec.assignment = m.assignment->topic_partitions;
    } else if (p.api_key == protocol::sync_group_response::api_key) {
      protocol::sync_group_response m;
      if (!kafka_relay::decode_response(frame, p.version, h, m) || m.error_code != 0) return;
      std::lock_guard lock(state_mutex_);
      auto& rec = groups_[p.group].members[p.member_id];
      rec.client_id = p.client_id;
      rec.host = r.host;
      rec.instance_id = p.instance_id;
      rec.generation = p.generation;
      rec.assignment = m.assignment;
    }
  }

  bytes describe(const protocol::describe_groups_request& req, std::int16_t version, std::int32_t corr) {
    protocol::describe_groups_response resp;
    std::lock_guard lock(state_mutex_);
    for (const auto& id : req.groups) {
      described_group d;
      d.group_id = id;
      auto it = groups_.find(id);
      if (it == groups_.end()) {
        d.group_state = "Dead";
      } else {
        const auto& g = it->second;
        d.protocol_type = "consumer";
        d.protocol_data = g.protocol;
        for (const auto& [member_id, m] : g.members) {
          if (m.generation != g.generation) continue;
          protocol::describe_groups_response::described_group::described_group_member dm;
          dm.member_id = member_id;
          dm.group_instance_id = m.instance_id;
          dm.client_id = m.client_id;
          dm.client_host = m.host;
          if (auto s = g.subscriptions.find(member_id); s != g.subscriptions.end()) dm.member_metadata = s->second;
          dm.member_assignment = m.assignment;
          d.members.push_back(std::move(dm));
        }
        d.group_state = !d.members.empty() ? "Stable" : g.members.empty() ? "Empty" : "CompletingRebalance";
      }
      if (tamper_) tamper_(d);
      resp.groups.push_back(std::move(d));
    }
    return kafka_relay::encode_response(resp, version, corr);
  }

  bytes describe_consumer(const protocol::consumer_group_describe_request& req, std::int16_t version,
                          std::int32_t corr) {
    using response = protocol::consumer_group_describe_response;
    response resp;
    std::lock_guard lock(state_mutex_);
    for (const auto& id : req.group_ids) {
      response::described_group d;
      d.group_id = id;
      auto it = groups_.find(id);
      if (it == groups_.end() || it->second.consumer_members.empty()) {
        d.group_state = "Empty";
      } else {
        std::int32_t top = 0, low = INT32_MAX;
        for (const auto& [member_id, m] : it->second.consumer_members) {
          response::described_group::member dm;
          dm.member_id = member_id;
          dm.instance_id = m.instance_id;
          dm.member_epoch = m.epoch;
          dm.client_id = m.client_id;
          dm.client_host = m.host;
          dm.subscribed_topic_names = m.subscribed;
          for (const auto& t : m.assignment) dm.assignment.topic_partitions.push_back({t.topic_id, "", t.partitions});
          top = std::max(top, m.epoch);
          low = std::min(low, m.epoch);
          d.members.push_back(std::move(dm));
        }
        d.group_epoch = top;
        d.assignment_epoch = top;
        d.group_state = low == top ? "Stable" : "Reconciling";
      }
      resp.groups.push_back(std::move(d));
    }
    return kafka_relay::encode_response(resp, version, corr);
  }

  boost::asio::io_context io_;  // only for constructing sockets; all I/O is blocking
  std::vector<std::unique_ptr<listener>> listeners_;
  std::map<std::uint16_t, std::uint16_t> port_map_;  // broker port -> proxy port
  std::atomic<bool> stopped_{false};
  std::atomic<int> describes_{0};
  std::mutex relays_mutex_;
  std::vector<std::shared_ptr<relay>> relays_;
  std::mutex state_mutex_;  // groups_ and tamper_
  std::map<std::string, group_rec> groups_;
  tamper_fn tamper_;
};

}  // namespace kgroup::test
