#include "data/fetch_session.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

#include "base/log.hpp"
#include "kgroup/error.hpp"
#include "kgroup/kafka_errc.hpp"

namespace kgroup::data {

namespace {

using fetch_topic = protocol::fetch_request::fetch_topic;
using forgotten_topic = protocol::fetch_request::forgotten_topic;

// Appends one partition to `req.topics`, starting a new topic entry unless the previous partition
// was of the same topic (in rotation order a topic may appear more than once).
void add_partition(protocol::fetch_request& req, const TopicPartition& tp, const partition_fetch& pf) {
  if (req.topics.empty() || req.topics.back().topic != tp.topic) {
    fetch_topic ft;
    ft.topic = tp.topic;
    ft.topic_id = pf.topic_id;
    req.topics.push_back(std::move(ft));
  }
  fetch_topic::fetch_partition p;
  p.partition = tp.partition;
  p.current_leader_epoch = pf.current_leader_epoch;
  p.fetch_offset = pf.fetch_offset;
  p.log_start_offset = pf.log_start_offset;
  p.partition_max_bytes = pf.max_bytes;
  req.topics.back().partitions.push_back(p);
}

void add_forgotten(protocol::fetch_request& req, const TopicPartition& tp, const protocol::uuid& topic_id) {
  if (req.forgotten_topics_data.empty() || req.forgotten_topics_data.back().topic != tp.topic) {
    forgotten_topic ft;
    ft.topic = tp.topic;
    ft.topic_id = topic_id;
    req.forgotten_topics_data.push_back(std::move(ft));
  }
  req.forgotten_topics_data.back().partitions.push_back(tp.partition);
}

}  // namespace

std::vector<const fetch_set::value_type*> fetch_session::in_order(const fetch_set& wanted) {
  // rank_ and `wanted` are in the same order: one walk of both drops the ranks of partitions no
  // longer wanted and ranks the new ones (in `wanted`'s order), without a look-up per partition.
  std::vector<std::pair<std::uint64_t, const fetch_set::value_type*>> ranked;
  ranked.reserve(wanted.size());
  auto it = rank_.begin();
  for (const auto& entry : wanted) {
    while (it != rank_.end() && it->first < entry.first) it = rank_.erase(it);
    if (it == rank_.end() || entry.first < it->first) it = rank_.emplace_hint(it, entry.first, next_rank_++);
    ranked.emplace_back(it->second, &entry);
    ++it;
  }
  rank_.erase(it, rank_.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<const fetch_set::value_type*> out;
  out.reserve(ranked.size());
  for (const auto& [rank, entry] : ranked) out.push_back(entry);
  return out;
}

void fetch_session::fill(protocol::fetch_request& req, std::int16_t version, const fetch_set& wanted) {
  req.topics.clear();
  req.forgotten_topics_data.clear();
  pending_ = true;
  pending_sessionless_ = version < first_session_fetch_version;
  pending_full_ = pending_sessionless_ || !incremental();
  if (pending_sessionless_) {
    req.session_id = 0;
    req.session_epoch = -1;
  } else {
    req.session_id = id_;
    req.session_epoch = epoch_;
  }
  const auto ordered = in_order(wanted);
  if (pending_full_) {
    for (const auto* entry : ordered) add_partition(req, entry->first, entry->second);
  } else {
    for (const auto* entry : ordered) {
      auto it = partitions_.find(entry->first);
      if (it == partitions_.end() || !(it->second == entry->second)) add_partition(req, entry->first, entry->second);
    }
    for (const auto& [tp, pf] : partitions_) {
      if (!wanted.count(tp)) add_forgotten(req, tp, pf.topic_id);
    }
  }
  partitions_ = wanted;
}

fetch_session::response_result fetch_session::on_response(const protocol::fetch_response& r) {
  response_result out;
  if (!pending_) {
    // Not expected from the fetcher (one request at a time); the views may differ, so start over.
    logger()->warn("broker {}: a Fetch response without an outstanding request; ignored", node_);
    out.unknown_partitions = 0;
    for (const auto& t : r.responses) out.unknown_partitions += t.partitions.size();
    out.first_unknown = "any (no request outstanding)";
    reset(false, "unexpected response");
    return out;
  }
  pending_ = false;
  if (r.error_code != 0) {
    out.error_code = r.error_code;
    if (!pending_sessionless_) {
      reset(r.error_code == static_cast<std::int16_t>(kafka_errc::fetch_session_id_not_found),
            kafka_error_name(r.error_code).c_str());
    }
    return out;
  }
  if (!pending_sessionless_) {
    if (pending_full_) {
      if (r.session_id == 0) {
        // The broker keeps no session (not supported, or its session cache is full): the next
        // request is full again and asks again.
        id_ = 0;
        epoch_ = 0;
      } else {
        if (r.session_id != id_) logger()->debug("broker {}: fetch session {} created", node_, r.session_id);
        id_ = r.session_id;
        epoch_ = 1;
      }
    } else if (r.session_id == 0) {
      logger()->debug("broker {}: fetch session {} closed by the broker; next fetch is full", node_, id_);
      id_ = 0;
      epoch_ = 0;
    } else if (r.session_id != id_) {
      logger()->warn("broker {}: incremental Fetch in session {} answered with session {}", node_, id_,
                     r.session_id);
      reset(false, "session id mismatch");
    } else {
      epoch_ = epoch_ == std::numeric_limits<std::int32_t>::max() ? 1 : epoch_ + 1;
    }
  }

  // Topic ids (Fetch v13+) resolve through the session's own partitions.
  std::map<std::string, std::string> by_id;  // uuid bytes -> topic name, built when first needed
  auto resolve = [&](const protocol::uuid& id) -> const std::string* {
    if (by_id.empty()) {
      for (const auto& [tp, pf] : partitions_) {
        if (!pf.topic_id.is_zero())
          by_id.emplace(std::string(pf.topic_id.bytes.begin(), pf.topic_id.bytes.end()), tp.topic);
      }
    }
    auto it = by_id.find(std::string(id.bytes.begin(), id.bytes.end()));
    return it == by_id.end() ? nullptr : &it->second;
  };
  std::string& first_unknown = out.first_unknown;
  for (const auto& t : r.responses) {
    const std::string* topic = &t.topic;
    if (t.topic.empty() && !t.topic_id.is_zero()) topic = resolve(t.topic_id);
    for (const auto& pd : t.partitions) {
      TopicPartition tp{topic ? *topic : t.topic_id.to_string(), pd.partition_index};
      if (topic && partitions_.count(tp)) {
        // Record bytes spent the answer's byte budget on this partition: the others go first next
        // time (see "Order" at the top of the header).
        if (pd.records && !pd.records->data.empty()) rank_[tp] = next_rank_++;
        out.partitions.emplace_back(std::move(tp), &pd);
        continue;
      }
      if (out.unknown_partitions++ == 0) first_unknown = tp.topic + "-" + std::to_string(tp.partition);
    }
  }
  if (out.unknown_partitions > 0) {
    logger()->warn(
        "broker {}: Fetch response names {} partition(s) this fetch session does not hold (first: {}); "
        "the answer is dropped",
        node_, out.unknown_partitions, first_unknown);
    out.partitions.clear();  // none of its entries can be trusted (protocol/answer_check.hpp)
    if (!pending_sessionless_) reset(false, "response names partitions outside the session");
  }
  return out;
}

void fetch_session::on_request_failed() {
  pending_ = false;
  reset(false, "request failed");  // with a session: close it and ask for a new one
}

bool fetch_session::close(protocol::fetch_request& req) {
  if (id_ == 0) return false;
  req.topics.clear();
  req.forgotten_topics_data.clear();
  req.session_id = id_;
  req.session_epoch = -1;
  id_ = 0;
  epoch_ = 0;
  partitions_.clear();
  pending_ = false;
  return true;
}

void fetch_session::reset(bool forget_id, const char* why) {
  if (id_ != 0 || epoch_ != 0) {
    logger()->debug("broker {}: fetch session {} reset ({}); next fetch is full", node_, id_, why);
  }
  if (forget_id) id_ = 0;
  epoch_ = 0;
}

}  // namespace kgroup::data
