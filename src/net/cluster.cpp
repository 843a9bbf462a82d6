#include "net/cluster.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <set>

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

bool is_rebootstrap_required(std::int16_t code) {
  return code == static_cast<std::int16_t>(kafka_errc::rebootstrap_required);
}

std::string servers_text(const std::vector<std::pair<std::string, std::uint16_t>>& servers) {
  std::string out;
  for (const auto& [host, port] : servers) {
    if (!out.empty()) out += ',';
    out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
    out += ':' + std::to_string(port);
  }
  return out;
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
    o.canonicalize = o.bootstrap;
    o.bootstrap = canonical_bootstrap(o.bootstrap);
  }
  o.recovery.recovery = cfg.get("metadata.recovery.strategy") == "none"
                            ? metadata_recovery::strategy::none
                            : metadata_recovery::strategy::rebootstrap;
  o.recovery.trigger = cfg.get_ms("metadata.recovery.rebootstrap.trigger.ms");
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

cluster::cluster(asio::io_context& io, cluster_options opts)
    : io_(io), opts_(std::move(opts)), recovery_(opts_.recovery), periodic_(io) {}

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

std::shared_ptr<connection> cluster::make_connection(std::int32_t node_id, const std::string& host,
                                                     std::uint16_t port) {
  if (!opts_.connection.on_rebootstrap_required) {
    opts_.connection.on_rebootstrap_required = [w = weak_from_this()](std::int32_t node) {
      if (auto self = w.lock()) self->rebootstrap_required(node);
    };
  }
  return std::make_shared<connection>(io_, node_id, host, port, opts_.connection);
}

std::shared_ptr<connection> cluster::broker(std::int32_t node_id, channel ch) {
  if (closed_) return nullptr;
  auto key = std::make_pair(node_id, static_cast<int>(ch));
  auto it = connections_.find(key);
  if (it != connections_.end()) return it->second;
  auto b = metadata_.brokers.find(node_id);
  if (b == metadata_.brokers.end()) return nullptr;
  auto c = make_connection(node_id, b->second.host, b->second.port);
  connections_.emplace(key, c);
  return c;
}

std::vector<metadata_recovery::broker_link> cluster::known_brokers() const {
  std::vector<metadata_recovery::broker_link> out;
  for (const auto& [id, b] : metadata_.brokers) {
    auto it = connections_.find({id, static_cast<int>(channel::data)});
    if (it == connections_.end()) {
      out.push_back({});
    } else {
      out.push_back({it->second->current_state(), it->second->failed_attempts()});
    }
  }
  return out;
}

std::shared_ptr<connection> cluster::least_loaded() {
  if (closed_) return nullptr;
  if (const auto why = recovery_.before_request(clock::now(), known_brokers());
      why != metadata_recovery::reason::none) {
    rebootstrap(why);
  }
  std::vector<std::shared_ptr<connection>> candidates;
  for (const auto& [id, b] : metadata_.brokers) {
    if (auto c = broker(id, channel::data)) candidates.push_back(c);
  }
  if (recovery_.use_bootstrap_servers()) {
    if (bootstrap_.empty()) {
      std::int32_t id = -1;  // bootstrap servers get negative ids: metadata has not named them
      for (const auto& [host, port] : opts_.bootstrap)
        bootstrap_.push_back(make_connection(id--, host, port));
    }
    candidates.insert(candidates.end(), bootstrap_.begin(), bootstrap_.end());
  }
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

bool cluster::rebootstrap_required(std::int32_t node_id) {
  if (closed_) return false;
  const auto why = recovery_.rebootstrap_required(clock::now());
  if (why == metadata_recovery::reason::none) {
    logger()->warn(
        "broker {} answered REBOOTSTRAP_REQUIRED; metadata.recovery.strategy=none: not rebootstrapping",
        node_id);
    return false;
  }
  rebootstrap(why, node_id);
  return true;
}

void cluster::rebootstrap(metadata_recovery::reason why, std::int32_t node_id) {
  // Java logs its rebootstraps at info too: rare, and what an operator looks for after a move.
  logger()->info(
      "rebootstrapping from bootstrap.servers {} ({}{}): forgetting the {} broker(s) known from metadata",
      servers_text(opts_.canonicalize.empty() ? opts_.bootstrap : opts_.canonicalize), to_string(why),
      node_id >= 0 ? ", broker " + std::to_string(node_id) : std::string(), metadata_.brokers.size());
  if (opts_.connection.wire) ++opts_.connection.wire->rebootstraps;
  // Their connections stay: one that works (the coordinator's, a fetch in flight) keeps serving
  // until an answer says the broker is gone or moved (apply_metadata). New connections go only to
  // brokers the next answer names.
  metadata_.brokers.clear();
  // Every connect resolves its name again (client.dns.lookup=use_all_dns_ips), so the bootstrap
  // connections are kept, with their backoff: a bootstrap server that keeps failing, or keeps
  // asking for a rebootstrap, is not hammered. Canonical names are resolved again (blocking, as
  // when the consumer was made); connections to names that changed are replaced.
  if (!opts_.canonicalize.empty()) {
    auto fresh = canonical_bootstrap(opts_.canonicalize);
    if (fresh != opts_.bootstrap) {
      logger()->info("bootstrap.servers resolve to {} now (was {})", servers_text(fresh),
                     servers_text(opts_.bootstrap));
      opts_.bootstrap = std::move(fresh);
      for (auto& c : bootstrap_) c->close();
      bootstrap_.clear();  // made again by least_loaded()
    }
  }
}

void cluster::refresh_metadata(std::optional<std::vector<std::string>> topics, std::chrono::milliseconds timeout,
                               done_handler done) {
  recovery_.refresh_started(clock::now());
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
      [self = shared_from_this(), a, node = conn->node_id()](
          std::error_code ec, const protocol::metadata_response& resp, const response_frame&) {
        if (!ec && resp.error_code != 0) {
          // A top-level error (Metadata v13+, KIP-1102): nothing of the answer is applied.
          ec = make_error_code(static_cast<kafka_errc>(resp.error_code));
          if (is_rebootstrap_required(resp.error_code)) self->rebootstrap_required(node);
        }
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

void cluster::drop_connections(std::int32_t node_id) {
  auto it = connections_.lower_bound({node_id, 0});
  while (it != connections_.end() && it->first.first == node_id) {
    it->second->close();
    it = connections_.erase(it);
  }
}

void cluster::learn_broker(const broker_address& b) {
  // The broker moved: drop its connections so the next use connects to the new address. Their
  // own address is compared (a rebootstrap forgets the brokers but keeps the connections).
  auto c = connections_.lower_bound({b.node_id, 0});
  if (c != connections_.end() && c->first.first == b.node_id &&
      (c->second->host() != b.host || c->second->port() != b.port)) {
    drop_connections(b.node_id);
  }
  metadata_.brokers[b.node_id] = b;
}

void cluster::apply_metadata(const protocol::metadata_response& r, bool all_topics) {
  if (!r.brokers.empty()) {
    std::set<std::int32_t> seen;
    for (const auto& b : r.brokers) seen.insert(b.node_id);
    // Brokers that left the cluster, or that a rebootstrap forgot and the answer does not name:
    // forget them and close their connections.
    std::erase_if(metadata_.brokers, [&](const auto& e) { return !seen.count(e.first); });
    std::set<std::int32_t> gone;
    for (const auto& [key, c] : connections_) {
      if (!seen.count(key.first)) gone.insert(key.first);
    }
    for (const std::int32_t node : gone) drop_connections(node);
    for (const auto& b : r.brokers) {
      learn_broker({b.node_id, b.host, static_cast<std::uint16_t>(b.port), b.rack});
    }
    recovery_.brokers_learned();
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
      [self = shared_from_this(), a, retry, node = conn->node_id()](
          std::error_code ec, const protocol::find_coordinator_response& resp, const response_frame&) {
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
          if (retriable_coordinator_error(err) ||
              (is_rebootstrap_required(err) && self->rebootstrap_required(node))) {
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
