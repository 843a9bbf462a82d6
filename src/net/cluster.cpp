#include "net/cluster.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>

#include "base/log.hpp"
#include "kgroup/config.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

bool retriable_coordinator_error(std::int16_t code) {
  return protocol::reacts(code, protocol::reaction::coordinator_moved | protocol::reaction::coordinator_busy);
}

}  // namespace

cluster_options cluster_options::from_config(const Config& cfg) {
  cluster_options o;
  for (const auto& s : cfg.get_list("bootstrap.servers")) {
    auto colon = s.rfind(':');
    std::string host = s.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    std::uint16_t port = 0;
    std::from_chars(s.data() + colon + 1, s.data() + s.size(), port);
    o.bootstrap.emplace_back(host, port);
  }
  o.connection.client_id = cfg.get("client.id");
  o.connection.wire = std::make_shared<wire_stats>();
  o.connection.request_timeout = cfg.get_ms("request.timeout.ms");
  o.connection.connect_timeout = cfg.get_ms("socket.connection.setup.timeout.ms");
  o.connection.reconnect_backoff = cfg.get_ms("reconnect.backoff.ms");
  o.connection.reconnect_backoff_max = cfg.get_ms("reconnect.backoff.max.ms");
  o.connection.max_response_size = static_cast<std::size_t>(cfg.get_int("receive.message.max.bytes"));
  o.connection.security = make_transport_security(cfg);
  o.connection.max_idle = cfg.get_ms("connections.max.idle.ms");
  o.connection.keepalive = cfg.get_bool("socket.keepalive.enable");
  o.connection.send_buffer = static_cast<int>(cfg.get_int("send.buffer.bytes"));
  o.connection.receive_buffer = static_cast<int>(cfg.get_int("receive.buffer.bytes"));
  if (cfg.get("client.dns.lookup") == "resolve_canonical_bootstrap_servers_only") {
    o.bootstrap = canonical_bootstrap(o.bootstrap);
  }
  o.retry_backoff = cfg.get_ms("retry.backoff.ms");
  o.retry_backoff_max = cfg.get_ms("retry.backoff.max.ms");
  o.metadata_max_age = cfg.get_ms("metadata.max.age.ms");
  o.allow_auto_create_topics = cfg.get_bool("allow.auto.create.topics");
  return o;
}

std::vector<std::pair<std::string, std::uint16_t>> canonical_bootstrap(
    const std::vector<std::pair<std::string, std::uint16_t>>& servers) {
  std::vector<std::pair<std::string, std::uint16_t>> out;
  auto add = [&](std::string host, std::uint16_t port) {
    auto entry = std::make_pair(std::move(host), port);
    if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(std::move(entry));
  };
  for (const auto& [host, port] : servers) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
      logger()->warn(
          "client.dns.lookup=resolve_canonical_bootstrap_servers_only: cannot resolve bootstrap server "
          "'{}' ({}); kept as given",
          host, gai_strerror(rc));
      add(host, port);
      continue;
    }
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char name[NI_MAXHOST] = {};
      // Java's getCanonicalHostName: the reverse lookup's name, or the address when there is none.
      if (getnameinfo(a->ai_addr, a->ai_addrlen, name, sizeof name, nullptr, 0, NI_NAMEREQD) != 0 &&
          getnameinfo(a->ai_addr, a->ai_addrlen, name, sizeof name, nullptr, 0, NI_NUMERICHOST) != 0) {
        continue;
      }
      logger()->debug("client.dns.lookup: bootstrap server '{}' -> '{}'", host, name);
      add(name, port);
    }
    freeaddrinfo(found);
  }
  return out;
}

struct cluster::metadata_attempt {
  std::optional<std::vector<std::string>> topics;
  clock::time_point deadline;
  done_handler done;
  int attempt = 0;
  std::error_code last_error;
};

struct cluster::coordinator_attempt {
  std::string group;
  clock::time_point deadline;
  coordinator_handler done;
  int attempt = 0;
  std::error_code last_error;
};

cluster::cluster(asio::io_context& io, cluster_options opts) : io_(io), opts_(std::move(opts)), periodic_(io) {
  std::int32_t id = -1;  // bootstrap servers get negative ids until metadata names them
  for (const auto& [host, port] : opts_.bootstrap) {
    bootstrap_.push_back(std::make_shared<connection>(io_, id--, host, port, opts_.connection));
  }
}

cluster::~cluster() { close(); }

void cluster::close() {
  if (closed_) return;
  closed_ = true;
  periodic_.cancel();
  for (auto& c : bootstrap_) c->close();
  for (auto& [k, c] : connections_) c->close();
}

std::chrono::milliseconds cluster::backoff_for(int attempt) const {
  return base::backoff(opts_.retry_backoff, opts_.retry_backoff_max).delay(attempt);
}

std::shared_ptr<connection> cluster::broker(std::int32_t node_id, channel ch) {
  if (closed_) return nullptr;
  auto key = std::make_pair(node_id, static_cast<int>(ch));
  auto it = connections_.find(key);
  if (it != connections_.end()) return it->second;
  auto b = metadata_.brokers.find(node_id);
  if (b == metadata_.brokers.end()) return nullptr;
  auto c = std::make_shared<connection>(io_, node_id, b->second.host, b->second.port, opts_.connection);
  connections_.emplace(key, c);
  return c;
}

std::shared_ptr<connection> cluster::least_loaded() {
  if (closed_) return nullptr;
  std::vector<std::shared_ptr<connection>> candidates;
  for (const auto& [id, b] : metadata_.brokers) {
    if (auto c = broker(id, channel::data)) candidates.push_back(c);
  }
  for (const auto& c : bootstrap_) candidates.push_back(c);
  if (candidates.empty()) return nullptr;
  // Ready with fewest in flight first; then anything not backing off; rotate among equals so a
  // dead broker does not get every retry.
  const std::size_t n = candidates.size();
  std::shared_ptr<connection> best;
  std::size_t best_load = std::numeric_limits<std::size_t>::max();
  for (std::size_t i = 0; i < n; ++i) {
    auto& c = candidates[(rotate_ + i) % n];
    if (c->current_state() == connection::state::ready && c->in_flight() < best_load) {
      best = c;
      best_load = c->in_flight();
    }
  }
  if (!best) {
    for (std::size_t i = 0; i < n && !best; ++i) {
      auto& c = candidates[(rotate_ + i) % n];
      if (c->current_state() != connection::state::backoff) best = c;
    }
  }
  if (!best) best = candidates[rotate_ % n];
  ++rotate_;
  return best;
}

void cluster::refresh_metadata(std::optional<std::vector<std::string>> topics, std::chrono::milliseconds timeout,
                               done_handler done) {
  auto a = std::make_shared<metadata_attempt>();
  a->topics = std::move(topics);
  a->deadline = clock::now() + timeout;
  a->done = std::move(done);
  metadata_try(std::move(a));
}

void cluster::metadata_try(std::shared_ptr<metadata_attempt> a) {
  if (closed_) {
    a->done(make_error_code(client_errc::shutting_down));
    return;
  }
  auto conn = least_loaded();
  if (!conn) {
    a->done(make_error_code(client_errc::no_brokers_available));
    return;
  }
  ++a->attempt;
  protocol::metadata_request req;
  if (a->topics) {
    for (const auto& t : *a->topics) req.topics->push_back({protocol::uuid{}, t});
  } else {
    req.topics.reset();  // null: all topics
  }
  req.allow_auto_topic_creation = opts_.allow_auto_create_topics;
  conn->send_adjusted(
      std::move(req),
      [](protocol::metadata_request& r, std::int16_t version) {
        // v1-3 cannot carry allow_auto_topic_creation=false; brokers then auto-create by default.
        if (version < 4) r.allow_auto_topic_creation = true;
      },
      [self = shared_from_this(), a](std::error_code ec, const protocol::metadata_response& resp,
                                     const response_frame&) {
        if (!ec) {
          self->apply_metadata(resp, !a->topics);
          a->done({});
          if (self->on_metadata_ && !self->closed_) self->on_metadata_();
          return;
        }
        a->last_error = ec;
        if (self->closed_ || clock::now() + self->backoff_for(a->attempt) >= a->deadline ||
            ec == make_error_code(client_errc::no_compatible_version)) {
          logger()->warn("metadata refresh failed after {} attempt(s): {}", a->attempt, ec.message());
          a->done(ec);
          return;
        }
        auto t = std::make_shared<asio::steady_timer>(self->io_, self->backoff_for(a->attempt));
        t->async_wait([self, a, t](const boost::system::error_code&) { self->metadata_try(a); });
      });
}

void cluster::learn_broker(const broker_address& b) {
  auto it = metadata_.brokers.find(b.node_id);
  if (it != metadata_.brokers.end() && (it->second.host != b.host || it->second.port != b.port)) {
    // The broker moved: drop its connections so the next use connects to the new address.
    for (int ch = 0; ch < 2; ++ch) {
      auto c = connections_.find({b.node_id, ch});
      if (c != connections_.end()) {
        c->second->close();
        connections_.erase(c);
      }
    }
  }
  metadata_.brokers[b.node_id] = b;
}

void cluster::apply_metadata(const protocol::metadata_response& r, bool all_topics) {
  std::map<std::int32_t, broker_address> seen;
  for (const auto& b : r.brokers) {
    broker_address a{b.node_id, b.host, static_cast<std::uint16_t>(b.port), b.rack};
    learn_broker(a);
    seen.emplace(b.node_id, a);
  }
  // Brokers that left the cluster: forget them and close their connections.
  for (auto it = metadata_.brokers.begin(); it != metadata_.brokers.end();) {
    if (!seen.count(it->first) && !r.brokers.empty()) {
      for (int ch = 0; ch < 2; ++ch) {
        auto c = connections_.find({it->first, ch});
        if (c != connections_.end()) {
          c->second->close();
          connections_.erase(c);
        }
      }
      it = metadata_.brokers.erase(it);
    } else {
      ++it;
    }
  }
  if (r.cluster_id) metadata_.cluster_id = *r.cluster_id;
  metadata_.controller_id = r.controller_id;
  for (const auto& t : r.topics) {
    if (!t.name) continue;
    topic_metadata tm;
    tm.name = *t.name;
    tm.topic_id = t.topic_id;
    tm.error_code = t.error_code;
    tm.is_internal = t.is_internal;
    for (const auto& p : t.partitions) {
      tm.partitions.push_back({p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes});
    }
    std::sort(tm.partitions.begin(), tm.partitions.end(),
              [](const partition_metadata& x, const partition_metadata& y) { return x.partition < y.partition; });
    metadata_.topics[tm.name] = std::move(tm);
  }
  if (all_topics) {
    // An answer for every topic: those it does not name were deleted (partial answers only
    // update the topics they name).
    std::erase_if(metadata_.topics, [&](const auto& t) {
      return std::none_of(r.topics.begin(), r.topics.end(), [&](const auto& rt) { return rt.name && *rt.name == t.first; });
    });
  }
  metadata_.updated = clock::now();
  ++metadata_.refreshes;
  logger()->debug("metadata: {} broker(s), {} topic(s) in response, controller {}", r.brokers.size(), r.topics.size(),
                  r.controller_id);
}

void cluster::start_periodic_refresh() {
  if (periodic_on_ || closed_) return;
  periodic_on_ = true;
  arm_periodic();
}

void cluster::arm_periodic() {
  periodic_.expires_after(opts_.metadata_max_age);
  periodic_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->refresh_metadata(std::nullopt, self->opts_.connection.request_timeout, [self](std::error_code) {
      if (!self->closed_) self->arm_periodic();
    });
  });
}

void cluster::find_coordinator(const std::string& group, std::chrono::milliseconds timeout, coordinator_handler done) {
  auto a = std::make_shared<coordinator_attempt>();
  a->group = group;
  a->deadline = clock::now() + timeout;
  a->done = std::move(done);
  coordinator_try(std::move(a));
}

void cluster::coordinator_try(std::shared_ptr<coordinator_attempt> a) {
  if (closed_) {
    a->done(make_error_code(client_errc::shutting_down), -1);
    return;
  }
  auto conn = least_loaded();
  if (!conn) {
    a->done(make_error_code(client_errc::no_brokers_available), -1);
    return;
  }
  ++a->attempt;
  auto retry = [self = shared_from_this(), a](std::error_code ec) {
    a->last_error = ec;
    if (self->closed_ || clock::now() + self->backoff_for(a->attempt) >= a->deadline) {
      logger()->warn("coordinator lookup for group '{}' failed after {} attempt(s): {}", a->group, a->attempt,
                     ec.message());
      a->done(ec, -1);
      return;
    }
    auto t = std::make_shared<asio::steady_timer>(self->io_, self->backoff_for(a->attempt));
    t->async_wait([self, a, t](const boost::system::error_code&) { self->coordinator_try(a); });
  };
  protocol::find_coordinator_request req;
  conn->send_adjusted(
      std::move(req),
      [group = a->group](protocol::find_coordinator_request& r, std::int16_t version) {
        if (version >= 4) {
          r.coordinator_keys = {group};
        } else {
          r.key = group;
        }
        r.key_type = 0;  // group
      },
      [self = shared_from_this(), a, retry](std::error_code ec, const protocol::find_coordinator_response& resp,
                                            const response_frame&) {
        if (ec) {
          if (ec == make_error_code(client_errc::no_compatible_version)) {
            a->done(ec, -1);
            return;
          }
          retry(ec);
          return;
        }
        std::int16_t err = resp.error_code;
        broker_address b{resp.node_id, resp.host, static_cast<std::uint16_t>(resp.port), std::nullopt};
        if (!resp.coordinators.empty()) {
          const auto& c = resp.coordinators.front();
          err = c.error_code;
          b = {c.node_id, c.host, static_cast<std::uint16_t>(c.port), std::nullopt};
        }
        if (err != 0) {
          auto kec = make_error_code(static_cast<kafka_errc>(err));
          if (retriable_coordinator_error(err)) {
            logger()->debug("coordinator lookup for '{}': {}, retrying", a->group, kafka_error_name(err));
            retry(kec);
          } else {
            a->done(kec, -1);
          }
          return;
        }
        if (b.node_id < 0 || b.port == 0) {
          retry(make_error_code(client_errc::coordinator_not_found));
          return;
        }
        auto known = self->metadata_.brokers.find(b.node_id);
        if (known == self->metadata_.brokers.end()) {
          self->learn_broker(b);
        } else if (known->second.host != b.host || known->second.port != b.port) {
          b.rack = known->second.rack;
          self->learn_broker(b);
        }
        logger()->debug("coordinator of group '{}' is broker {} ({}:{})", a->group, b.node_id, b.host, b.port);
        a->done({}, b.node_id);
      });
}

}  // namespace kgroup::net
