#include "data/share_session.hpp"

#include <algorithm>
#include <limits>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"

namespace kgroup::data::share {

namespace {

bool carries_renew(const partition_acks& a) {
  for (const auto& b : a.batches) {
    if (std::find(b.types.begin(), b.types.end(), static_cast<std::int8_t>(ack_type::renew)) != b.types.end())
      return true;
  }
  return false;
}

// Appends a partition entry to a request's topic list (grouped by topic id; partitions of one
// topic are adjacent because the maps are ordered by topic name).
template <class Topic>
typename decltype(Topic::partitions)::value_type& add_partition(std::vector<Topic>& topics,
                                                                const protocol::uuid& id,
                                                                std::int32_t partition) {
  if (topics.empty() || topics.back().topic_id != id) {
    Topic t;
    t.topic_id = id;
    topics.push_back(std::move(t));
  }
  auto& p = topics.back().partitions.emplace_back();
  p.partition_index = partition;
  return p;
}

template <class Batch>
std::vector<Batch> to_wire(const std::vector<ack_batch>& in) {
  std::vector<Batch> out;
  out.reserve(in.size());
  for (const auto& b : in) out.push_back(Batch{b.first, b.last, b.types});
  return out;
}

bool resets_session(std::int16_t code) {
  return code == static_cast<std::int16_t>(kafka_errc::share_session_not_found) ||
         code == static_cast<std::int16_t>(kafka_errc::invalid_share_session_epoch) ||
         code == static_cast<std::int16_t>(kafka_errc::share_session_limit_reached);
}

std::error_code kafka_code(std::int16_t code) {
  return code == 0 ? std::error_code{} : make_error_code(static_cast<kafka_errc>(code));
}

}  // namespace

std::int32_t next_share_epoch(std::int32_t epoch) noexcept {
  if (epoch <= 0 || epoch == std::numeric_limits<std::int32_t>::max()) return 1;
  return epoch + 1;
}

std::error_code share_session::refused_epoch0_error() const {
  return reset_cause_ ? reset_cause_ : make_error_code(share_errc::no_session);
}

share_session::build_result share_session::build_fetch(protocol::share_fetch_request& req,
                                                       std::int16_t version, const fetch_params& p,
                                                       const partition_ids& wanted, const ack_map& acks) {
  build_result out;
  if (busy()) {
    out.error = share_errc::request_in_flight;
    return out;
  }
  req = protocol::share_fetch_request{};
  req.group_id = p.group_id;
  req.member_id = p.member_id;
  req.share_session_epoch = epoch_;
  req.max_wait_ms = p.max_wait_ms;
  req.min_bytes = p.min_bytes;
  req.max_bytes = p.max_bytes;
  req.max_records = p.max_records;
  req.batch_size = p.batch_size;
  if (version >= 2) req.share_acquire_mode = p.acquire_mode;

  // Which acknowledgements ride along.
  partition_ids carried;
  for (const auto& [tp, a] : acks) {
    if (a.batches.empty()) continue;
    if (epoch_ == 0) {
      out.refused.emplace_back(tp, refused_epoch0_error());
    } else if (!wanted.count(tp)) {
      out.refused.emplace_back(tp, make_error_code(share_errc::no_session));
    } else if (version < 2 && carries_renew(a)) {
      out.refused.emplace_back(tp, make_error_code(share_errc::renew_not_supported));
    } else {
      carried.emplace(tp, wanted.at(tp));
      if (carries_renew(a)) req.is_renew_ack = true;
    }
  }

  using fetch_topic = protocol::share_fetch_request::fetch_topic;
  using wire_batch = fetch_topic::fetch_partition::acknowledgement_batch;
  for (const auto& [tp, id] : wanted) {
    auto old = partitions_.find(tp);
    const bool added = epoch_ == 0 || old == partitions_.end() || old->second != id;
    const bool with_acks = carried.count(tp) != 0;
    if (!added && !with_acks) continue;
    auto& part = add_partition(req.topics, id, tp.partition);
    if (with_acks) part.acknowledgement_batches = to_wire<wire_batch>(acks.at(tp).batches);
  }
  if (epoch_ != 0) {
    // Removed partitions, and those whose topic was recreated under a new id (the old id goes).
    for (const auto& [tp, id] : partitions_) {
      auto now = wanted.find(tp);
      if (now != wanted.end() && now->second == id) continue;
      if (req.forgotten_topics_data.empty() || req.forgotten_topics_data.back().topic_id != id) {
        req.forgotten_topics_data.emplace_back().topic_id = id;
      }
      req.forgotten_topics_data.back().partitions.push_back(tp.partition);
    }
  }

  pending_ = kind::fetch;
  pending_epoch_ = epoch_;
  pending_prev_ = std::move(partitions_);
  pending_acks_ = std::move(carried);
  partitions_ = wanted;
  return out;
}

std::vector<TopicPartition> share_session::leaving(const partition_ids& wanted) const {
  std::vector<TopicPartition> out;
  if (epoch_ == 0) return out;
  for (const auto& [tp, id] : partitions_) {
    auto now = wanted.find(tp);
    if (now == wanted.end() || now->second != id) out.push_back(tp);
  }
  return out;
}

std::vector<TopicPartition> share_session::deferred_forgets(const partition_ids& wanted,
                                                            const std::set<TopicPartition>& unresolved,
                                                            const std::set<TopicPartition>& overdue) const {
  std::vector<TopicPartition> out;
  if (busy()) return out;
  for (const auto& tp : leaving(wanted)) {
    if (unresolved.count(tp) && !overdue.count(tp)) out.push_back(tp);
  }
  return out;
}

share_session::build_result share_session::build_acknowledge(protocol::share_acknowledge_request& req,
                                                             std::int16_t version, const fetch_params& p,
                                                             const ack_map& acks, bool close) {
  build_result out;
  if (busy()) {
    out.error = share_errc::request_in_flight;
    return out;
  }
  if (epoch_ == 0) {
    out.error = refused_epoch0_error();
    for (const auto& [tp, a] : acks) {
      if (!a.batches.empty()) out.refused.emplace_back(tp, out.error);
    }
    return out;
  }
  req = protocol::share_acknowledge_request{};
  req.group_id = p.group_id;
  req.member_id = p.member_id;
  req.share_session_epoch = close ? -1 : epoch_;
  partition_ids carried;
  using ack_topic = protocol::share_acknowledge_request::acknowledge_topic;
  using wire_batch = ack_topic::acknowledge_partition::acknowledgement_batch;
  for (const auto& [tp, a] : acks) {
    if (a.batches.empty()) continue;
    if (carries_renew(a)) {
      if (version < 2) {
        out.refused.emplace_back(tp, make_error_code(share_errc::renew_not_supported));
        continue;
      }
      req.is_renew_ack = true;
    }
    auto& part = add_partition(req.topics, a.topic_id, tp.partition);
    part.acknowledgement_batches = to_wire<wire_batch>(a.batches);
    carried.emplace(tp, a.topic_id);
  }
  if (carried.empty() && !close) {
    // Nothing left to send: no request.
    out.error = out.refused.empty() ? make_error_code(share_errc::nothing_to_send)
                                    : make_error_code(share_errc::renew_not_supported);
    req = protocol::share_acknowledge_request{};
    return out;
  }
  pending_ = kind::acknowledge;
  pending_epoch_ = req.share_session_epoch;
  pending_prev_ = partitions_;
  pending_acks_ = std::move(carried);
  return out;
}

void share_session::reset(answer_result& out, std::error_code why, bool closed) {
  out.reset = true;
  partition_ids all = pending_prev_;
  for (const auto& e : partitions_) all.insert(e);
  for (const auto& e : pending_acks_) all.insert(e);
  for (const auto& [tp, id] : all) out.lost.push_back(tp);
  if (!closed) {
    logger()->debug("broker {}: share session at epoch {} reset ({}); the next ShareFetch opens a new one",
                    node_, pending_epoch_, why.message());
  }
  epoch_ = 0;
  partitions_.clear();
  reset_cause_ = why;
  if (!closed) ++resets_;
}

template <class Data, class Response>
share_session::answer_result share_session::on_answer(kind k, const Response& r) {
  answer_result out;
  if (pending_ != k) {
    logger()->warn("broker {}: a {} answer without an outstanding request; ignored", node_, Response::name);
    out.error = share_errc::unexpected_answer;
    return out;
  }
  pending_ = kind::none;
  out.error = kafka_code(r.error_code);
  if constexpr (std::is_same_v<Response, protocol::share_fetch_response>) {
    out.acquisition_lock_timeout_ms = r.acquisition_lock_timeout_ms;
  } else {
    // ShareAcknowledge has the field from v2; a v1 answer decodes it as 0.
    out.acquisition_lock_timeout_ms = r.acquisition_lock_timeout_ms > 0 ? r.acquisition_lock_timeout_ms : -1;
  }

  if (r.error_code != 0) {
    for (const auto& [tp, id] : pending_acks_) out.acks.emplace_back(tp, out.error);
    if (resets_session(r.error_code)) {
      reset(out, out.error);
    } else {
      logger()->info("broker {}: {} at epoch {} failed: {}; the session stays at epoch {}", node_,
                     Response::name, pending_epoch_, kafka_error_name(r.error_code), epoch_);
      partitions_ = std::move(pending_prev_);
    }
    pending_prev_.clear();
    pending_acks_.clear();
    return out;
  }

  // Names by topic id, from the partitions the request carried.
  std::map<protocol::uuid, std::string> names;
  for (const auto* set : {&partitions_, &pending_acks_}) {
    for (const auto& [tp, id] : *set) names.emplace(id, tp.topic);
  }
  std::map<TopicPartition, std::error_code> ack_results;
  for (const auto& [tp, id] : pending_acks_)
    ack_results[tp] = make_error_code(share_errc::acknowledgement_unanswered);
  for (const auto& t : r.responses) {
    auto name = names.find(t.topic_id);
    for (const auto& pd : t.partitions) {
      if (name == names.end()) {
        ++out.unknown_partitions;
        continue;
      }
      TopicPartition tp{name->second, pd.partition_index};
      const bool in_session = partitions_.count(tp) != 0;
      auto acked = ack_results.find(tp);
      if (!in_session && acked == ack_results.end()) {
        ++out.unknown_partitions;
        continue;
      }
      if constexpr (std::is_same_v<Response, protocol::share_fetch_response>) {
        if (acked != ack_results.end()) acked->second = kafka_code(pd.acknowledge_error_code);
        out.fetched.emplace_back(tp, &pd);
      } else {
        if (acked != ack_results.end()) acked->second = kafka_code(pd.error_code);
        out.acknowledged.emplace_back(tp, &pd);
      }
    }
  }
  for (auto& e : ack_results) out.acks.emplace_back(e.first, e.second);
  if (out.unknown_partitions > 0) {
    logger()->warn("broker {}: {} names {} partition(s) the request did not carry; ignored", node_,
                   Response::name, out.unknown_partitions);
  }

  if (pending_epoch_ == -1) {
    // Closed: the broker released everything still acquired and forgot the session.
    reset(out, make_error_code(share_errc::no_session), true);
  } else {
    if (pending_epoch_ == 0) ++opens_;
    epoch_ = next_share_epoch(pending_epoch_);
  }
  pending_prev_.clear();
  pending_acks_.clear();
  return out;
}

share_session::answer_result share_session::on_fetch_answer(const protocol::share_fetch_response& r) {
  return on_answer<fetch_partition_data>(kind::fetch, r);
}

share_session::answer_result share_session::on_acknowledge_answer(
    const protocol::share_acknowledge_response& r) {
  return on_answer<ack_partition_data>(kind::acknowledge, r);
}

share_session::answer_result share_session::on_request_failed(std::error_code why) {
  answer_result out;
  if (pending_ == kind::none) {
    out.error = share_errc::unexpected_answer;
    return out;
  }
  pending_ = kind::none;
  out.error = why;
  for (const auto& [tp, id] : pending_acks_) out.acks.emplace_back(tp, why);
  reset(out, why);
  pending_prev_.clear();
  pending_acks_.clear();
  return out;
}

}  // namespace kgroup::data::share
