#include "fetch/group_observer.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "assign/consumer_protocol.hpp"
#include "base/log.hpp"
#include "data/offset_fetch.hpp"
#include "kgroup/error.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {

std::int64_t millis(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

bool rebalancing(const std::string& state) {
  return state == "PreparingRebalance" || state == "CompletingRebalance";
}

bool coordinator_moved(std::int16_t code) {
  return protocol::reacts(code, protocol::reaction::coordinator_moved);
}

// The view's partitions: every owned one with its owner, and the partitions of `topics` (the
// members' subscriptions) that nobody owns, by topic then partition.
void list_partitions(std::map<TopicPartition, std::string> owner, const std::set<std::string>& topics,
                     const std::map<std::string, std::int32_t>& known_topics, base::group_view& out) {
  for (const auto& t : topics) {
    auto it = known_topics.find(t);
    if (it == known_topics.end()) continue;
    for (std::int32_t p = 0; p < it->second; ++p) owner.try_emplace(TopicPartition{t, p});
  }
  for (auto& [tp, who] : owner) {
    base::group_view_partition vp;
    vp.partition = tp;
    vp.owner = std::move(who);
    out.partitions.push_back(std::move(vp));
  }
}

// A failed describe answer: the coordinator moved or is loading (look it up again), or another error.
struct describe_failure {
  bool rediscover = false;
  std::string text;
};
describe_failure describe_error(const char* api, std::int16_t code) {
  if (coordinator_moved(code) || code == static_cast<std::int16_t>(kafka_errc::coordinator_load_in_progress))
    return {true, "coordinator not known: " + kafka_error_name(code)};
  return {false, std::string(api) + ": " + kafka_error_name(code)};
}

// Who a described member is (both describe answers name it alike).
template <class Described>
base::group_view_member member_view(const Described& m, const std::optional<std::string>& instance_id) {
  base::group_view_member vm;
  vm.member_id = m.member_id;
  vm.client_id = m.client_id;
  vm.host = m.client_host;
  vm.instance_id = instance_id;
  return vm;
}

}  // namespace

void build_members(const protocol::describe_groups_response::described_group& g,
                   const std::map<std::string, std::int32_t>& known_topics, base::group_view& out) {
  out.members.clear();
  out.partitions.clear();
  // Other protocol types (Connect, ...) put their own bytes there; only "consumer" is ours to
  // read. An empty type is what a group without members reports.
  const bool consumer = g.protocol_type.empty() || g.protocol_type == "consumer";
  std::map<TopicPartition, std::string> owner;
  std::set<std::string> topics;
  for (const auto& m : g.members) {
    auto vm = member_view(m, m.group_instance_id);
    if (!consumer) {
      vm.error =
          "protocol type \"" + g.protocol_type + "\" is not the consumer protocol; assignment not read";
    } else {
      MemberAssignment a;
      if (auto ec = assign::decode_assignment(m.member_assignment, a)) {
        vm.error = "assignment of " + std::to_string(m.member_assignment.size()) +
                   " bytes does not decode: " + ec.message();
      } else {
        for (const auto& t : a.partitions) {
          for (const auto p : t.partitions) vm.partitions.push_back({t.topic, p});
        }
        std::sort(vm.partitions.begin(), vm.partitions.end());
        vm.partitions.erase(std::unique(vm.partitions.begin(), vm.partitions.end()), vm.partitions.end());
        // A partition two members claim (a leader's bad assignment) stays with the first one
        // listed; both members still show it in their own list.
        for (const auto& tp : vm.partitions) owner.emplace(tp, vm.member_id);
      }
      // The subscription names the topics whose unowned partitions belong in the map too. It is
      // only a hint, so bytes that do not decode are not an error of their own.
      MemberSubscription s;
      if (!assign::decode_subscription(m.member_metadata, s)) topics.insert(s.topics.begin(), s.topics.end());
    }
    out.members.push_back(std::move(vm));
  }
  list_partitions(std::move(owner), topics, known_topics, out);
}

void build_members(const protocol::consumer_group_describe_response::described_group& g,
                   const std::map<std::string, std::int32_t>& known_topics,
                   const std::map<protocol::uuid, std::string>& names, base::group_view& out) {
  out.members.clear();
  out.partitions.clear();
  std::map<TopicPartition, std::string> owner;
  std::set<std::string> topics;
  for (const auto& m : g.members) {
    auto vm = member_view(m, m.instance_id);
    std::vector<std::string> unknown;
    for (const auto& t : m.assignment.topic_partitions) {
      std::string name = t.topic_name;
      if (name.empty()) {
        if (auto it = names.find(t.topic_id); it != names.end()) name = it->second;
      }
      if (name.empty()) {
        unknown.push_back(t.topic_id.to_string());
        continue;
      }
      for (const auto p : t.partitions) vm.partitions.push_back({name, p});
    }
    if (!unknown.empty()) {
      vm.error = "topic id" + std::string(unknown.size() > 1 ? "s " : " ");
      for (std::size_t i = 0; i < unknown.size(); ++i) vm.error += (i ? ", " : "") + unknown[i];
      vm.error += " not in metadata; those partitions not shown";
    }
    std::sort(vm.partitions.begin(), vm.partitions.end());
    vm.partitions.erase(std::unique(vm.partitions.begin(), vm.partitions.end()), vm.partitions.end());
    for (const auto& tp : vm.partitions) owner.emplace(tp, vm.member_id);
    topics.insert(m.subscribed_topic_names.begin(), m.subscribed_topic_names.end());
    out.members.push_back(std::move(vm));
  }
  list_partitions(std::move(owner), topics, known_topics, out);
}

group_observer::group_observer(asio::io_context& io, std::shared_ptr<net::cluster> c,
                               std::shared_ptr<fetcher> f, group_observer_options opts,
                               std::function<group_identity()> identity)
    : cluster_(std::move(c)),
      fetcher_(std::move(f)),
      opts_(std::move(opts)),
      identity_(std::move(identity)),
      timer_(io) {
  view_.group_id = opts_.group_id;
}

base::group_view group_observer::view() {
  const auto now = clock::now();
  last_wanted_ = now;
  if (!stopped_ && !in_flight_ && !timer_armed_) {
    if (!last_started_ || now - *last_started_ >= opts_.refresh_interval) {
      refresh();
    } else {
      schedule();
    }
  }
  base::group_view v = view_;
  v.age_ms = gathered_at_ ? millis(now - *gathered_at_) : -1;
  v.refreshing = in_flight_;
  return v;
}

void group_observer::shutdown() {
  stopped_ = true;
  ++round_;
  timer_.cancel();
}

void group_observer::schedule() {
  if (stopped_ || timer_armed_ || in_flight_) return;
  if (!last_wanted_ || clock::now() - *last_wanted_ > opts_.wanted_for) return;  // nobody looks
  timer_armed_ = true;
  timer_.expires_at(*last_started_ + opts_.refresh_interval);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->timer_armed_ = false;
    if (ec || self->stopped_) return;
    self->refresh();
  });
}

void group_observer::refresh() {
  in_flight_ = true;
  last_started_ = clock::now();
  ++round_;
  next_ = base::group_view{};
  next_.group_id = opts_.group_id;
  if (opts_.group_id.empty()) return finish("no group.id: this consumer is not in a group", false);
  const auto who = identity_();
  next_.member_id = who.member_id;
  // The member's own coordinator when it has one; otherwise (manual assignment, or between
  // lookups) our own lookup, kept until it fails.
  if (who.coordinator) return describe(*who.coordinator);
  if (coordinator_) return describe(*coordinator_);
  cluster_->find_coordinator(
      opts_.group_id, opts_.request_timeout,
      [self = shared_from_this(), round = round_](std::error_code ec, std::int32_t node) {
        if (round != self->round_) return;
        if (ec) return self->finish("coordinator not known: " + ec.message(), false);
        self->coordinator_ = node;
        self->describe(node);
      });
}

template <class Group>
const Group* group_observer::described(const char* api, std::error_code ec, const std::vector<Group>& groups) {
  if (ec) {
    coordinator_.reset();
    finish(std::string(api) + ": " + ec.message(), false);
    return nullptr;
  }
  const auto it =
      std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.group_id == opts_.group_id; });
  if (it == groups.end()) {
    finish(std::string(api) + ": the answer lacks the group", false);
    return nullptr;
  }
  if (it->error_code != 0) {
    auto failure = describe_error(api, it->error_code);
    if (failure.rediscover) coordinator_.reset();
    if constexpr (requires { it->error_message; }) {
      if (it->error_message && !it->error_message->empty()) failure.text += " (" + *it->error_message + ")";
    }
    finish(std::move(failure.text), false);
    return nullptr;
  }
  return &*it;
}

void group_observer::describe(std::int32_t coordinator) {
  auto conn = cluster_->broker(coordinator, net::channel::offsets);
  if (!conn) {
    coordinator_.reset();
    return finish("coordinator not known: broker " + std::to_string(coordinator) + " is not in the metadata",
                  false);
  }
  conn->when_ready([self = shared_from_this(), round = round_, conn, coordinator](std::error_code ec) {
    if (round != self->round_) return;
    if (ec) {
      self->coordinator_.reset();
      return self->finish("coordinator " + std::to_string(coordinator) + " unreachable: " + ec.message(),
                          false);
    }
    if (self->opts_.kip848) return self->describe_consumer_group(coordinator, conn);
    // Checked here rather than left to the connection, which would log an error for every
    // refresh: some brokers (librdkafka's mock among them) do not offer DescribeGroups.
    if (conn->versions().common(protocol::describe_groups_request::api_key,
                                protocol::describe_groups_request::lowest_version,
                                protocol::describe_groups_request::highest_version) < 0) {
      return self->finish("the coordinator cannot describe groups (" +
                              conn->versions().mismatch<protocol::describe_groups_request>() + ")",
                          false);
    }
    protocol::describe_groups_request req;
    req.groups = {self->opts_.group_id};
    conn->send_adjusted(
        std::move(req), [](protocol::describe_groups_request&, std::int16_t) {},
        [self, round, coordinator](std::error_code ec, const protocol::describe_groups_response& r,
                                   const net::response_frame&) {
          if (round != self->round_) return;
          if (const auto* g = self->described("DescribeGroups", ec, r.groups)) self->on_described(coordinator, *g);
        },
        self->opts_.request_timeout);
  });
}

void group_observer::on_described(std::int32_t coordinator,
                                  const protocol::describe_groups_response::described_group& g) {
  next_.state = g.group_state;
  next_.protocol_type = g.protocol_type;
  next_.protocol = g.protocol_data;
  if (rebalancing(g.group_state)) {
    // The coordinator hands out assignments only in a stable group: keep the last map (its age
    // says how old it is) and say why it is not refreshed.
    view_.state = next_.state;
    return finish("group is rebalancing: state " + g.group_state, false);
  }
  build_members(g, known_topics(), next_);
  members_built(coordinator);
}

std::map<std::string, std::int32_t> group_observer::known_topics() const {
  std::map<std::string, std::int32_t> known;
  for (const auto& [name, t] : cluster_->metadata().topics) {
    if (t.error_code == 0) known[name] = static_cast<std::int32_t>(t.partitions.size());
  }
  return known;
}

void group_observer::describe_consumer_group(std::int32_t coordinator, const std::shared_ptr<net::connection>& conn) {
  using request = protocol::consumer_group_describe_request;
  if (conn->versions().common(request::api_key, request::lowest_version, request::highest_version) < 0) {
    return finish("the coordinator cannot describe consumer groups (" + conn->versions().mismatch<request>() + ")",
                  false);
  }
  request req;
  req.group_ids = {opts_.group_id};
  conn->send_adjusted(
      std::move(req), [](request&, std::int16_t) {},
      [self = shared_from_this(), round = round_, coordinator](
          std::error_code ec, const protocol::consumer_group_describe_response& r, const net::response_frame&) {
        if (round != self->round_) return;
        if (const auto* g = self->described("ConsumerGroupDescribe", ec, r.groups)) self->on_described(coordinator, *g);
      },
      opts_.request_timeout);
}

void group_observer::on_described(std::int32_t coordinator,
                                  const protocol::consumer_group_describe_response::described_group& g) {
  // Every state has readable assignments (Stable, Assigning, Reconciling, Empty): members keep
  // their current partitions while they reconcile, so the map is always the latest.
  next_.state = g.group_state;
  next_.protocol_type = "consumer";
  next_.protocol = g.assignor_name;
  std::map<protocol::uuid, std::string> names;
  for (const auto& [name, t] : cluster_->metadata().topics) {
    if (!t.topic_id.is_zero()) names.emplace(t.topic_id, name);
  }
  build_members(g, known_topics(), names, next_);
  members_built(coordinator);
}

void group_observer::members_built(std::int32_t coordinator) {
  const auto who = identity_();
  const bool member =
      !who.member_id.empty() && std::any_of(next_.members.begin(), next_.members.end(),
                                            [&](const auto& m) { return m.member_id == who.member_id; });
  next_.generation = member ? who.generation : -1;
  if (next_.partitions.empty()) return finish("", true);
  query_offsets(coordinator);
}

void group_observer::query_offsets(std::int32_t coordinator) {
  // OffsetFetch (coordinator) and ListOffsets (leaders) run side by side; the last one to answer
  // finishes the refresh.
  struct join {
    int pending = 2;
    std::string committed_error;
    std::string end_error;
    std::map<TopicPartition, std::int64_t> committed;
    fetcher::offsets_result ends;
  };
  auto j = std::make_shared<join>();
  auto one_done = [self = shared_from_this(), round = round_, j] {
    if (round != self->round_ || --j->pending > 0) return;
    for (auto& p : self->next_.partitions) {
      if (auto c = j->committed.find(p.partition); c != j->committed.end()) p.committed = c->second;
      if (auto e = j->ends.find(p.partition); e != j->ends.end()) p.end_offset = e->second.first;
      if (p.committed >= 0 && p.end_offset >= 0)
        p.lag = std::max<std::int64_t>(0, p.end_offset - p.committed);
    }
    std::string error = j->committed_error;
    if (!j->end_error.empty()) error += (error.empty() ? "" : "; ") + j->end_error;
    self->finish(std::move(error), true);
  };

  std::map<TopicPartition, std::int64_t> latest;
  for (const auto& p : next_.partitions) latest.emplace(p.partition, -1);
  fetcher_->query_offsets(
      latest, clock::now() + opts_.request_timeout,
      [j, one_done](std::error_code ec, const std::string& message, fetcher::offsets_result r) {
        if (ec) j->end_error = "end offsets: " + (message.empty() ? ec.message() : message);
        j->ends = std::move(r);
        one_done();
      });

  auto conn = cluster_->broker(coordinator, net::channel::offsets);
  if (!conn) {
    j->committed_error = "committed offsets: coordinator unknown";
    return one_done();
  }
  protocol::offset_fetch_request req;
  req.group_id = opts_.group_id;
  std::map<std::string, std::size_t> index;
  for (const auto& p : next_.partitions) {
    auto [it, inserted] = index.emplace(p.partition.topic, req.topics->size());
    if (inserted) req.topics->push_back({p.partition.topic, {}});
    (*req.topics)[it->second].partition_indexes.push_back(p.partition.partition);
  }
  // Not require_stable: a view shows what is committed now, even with a transaction pending.
  req.require_stable = false;
  conn->send_adjusted(
      std::move(req), data::adjust_offset_fetch,
      [j, one_done](std::error_code ec, const protocol::offset_fetch_response& r,
                    const net::response_frame&) {
        std::int16_t top = r.error_code;
        if (!r.groups.empty()) top = r.groups.front().error_code;
        if (ec) {
          j->committed_error = "committed offsets: " + ec.message();
        } else if (top != 0) {
          j->committed_error = "committed offsets: " + kafka_error_name(top);
        } else {
          data::for_each_committed(r, [&](const std::string& topic, std::int32_t p, std::int64_t offset,
                                    const std::optional<std::string>&, std::int32_t, std::int16_t err) {
            if (err == 0 && offset >= 0) j->committed[{topic, p}] = offset;
          });
        }
        one_done();
      },
      opts_.request_timeout);
}

void group_observer::finish(std::string error, bool gathered) {
  in_flight_ = false;
  if (gathered) {
    view_ = std::move(next_);
    gathered_at_ = clock::now();
  }
  if (!error.empty() && error != view_.error) logger()->debug("group view of {}: {}", opts_.group_id, error);
  view_.error = std::move(error);
  schedule();
}

}  // namespace kgroup::fetch
