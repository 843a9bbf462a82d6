// The fetcher, continued: commits and committed() (their decisions are data/committer's) and
// auto-commit's timer. See fetcher.hpp.
#include "fetch/fetcher.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "fetch/offset_fetch.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

// ---- commits ----------------------------------------------------------------------------------------

void fetcher::coordinator_unusable(bool failed) {
  if (opts_.coordinator_unusable) opts_.coordinator_unusable(failed);
}

void fetcher::commit(std::uint64_t id, commit_map offsets) {
  const auto who = identity_();
  auto report = [this, id](std::error_code ec, std::string msg) {
    if (id != 0)
      shared_.push(detail::commit_done{id, {}, ec, std::move(msg)});
    else if (ec)
      logger()->warn("auto-commit failed: {}", msg);
  };
  if (auto refused = data::refuse_commit(who, offsets)) {
    report(refused->code, std::move(refused->message));
    return;
  }
  auto conn = who.coordinator ? cluster_->broker(*who.coordinator, net::channel::offsets) : nullptr;
  if (!conn) {
    coordinator_unusable(false);
    report(make_error_code(kafka_errc::coordinator_not_available), "the group coordinator is not known yet");
    return;
  }
  conn->send_adjusted(
      data::make_commit_request(opts_.group_id, who, offsets), data::fit_offset_commit,
      [self = shared_from_this(), report, offsets, started = std::chrono::steady_clock::now(),
       generation = who.subscribed ? who.generation : -1](
          std::error_code ec, const protocol::offset_commit_response& r, const net::response_frame&) {
        if (ec) {
          self->coordinator_unusable(true);
          report(ec, "OffsetCommit failed: " + ec.message());
          return;
        }
        if (auto failed = data::read_commit_response(r)) {
          if (failed->coordinator_gone) self->coordinator_unusable(true);
          if (generation >= 0 && self->opts_.commit_error) self->opts_.commit_error(generation, failed->kafka_code);
          report(failed->error.code, std::move(failed->error.message));
          return;
        }
        for (const auto& [tp, om] : offsets) self->last_auto_committed_[tp] = om.offset;
        {
          const double took =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
          std::lock_guard lock(self->shared_.mutex);
          auto& m = self->shared_.metrics;
          ++m.commits;
          m.commit_latency_total_ms += took;
          m.commit_latency_max_ms = std::max(m.commit_latency_max_ms, took);
          m.commit_hist.observe(took / 1000.0);
          for (const auto& [tp, om] : offsets) m.committed[tp] = om.offset;
        }
        report({}, "");
      });
}

void fetcher::fetch_committed(std::uint64_t id, std::set<TopicPartition> tps) {
  const auto who = identity_();
  auto conn = who.coordinator ? cluster_->broker(*who.coordinator, net::channel::offsets) : nullptr;
  if (!who.group_mode || !conn) {
    if (who.group_mode) coordinator_unusable(false);
    shared_.push(
        detail::commit_done{id,
                            {},
                            make_error_code(who.group_mode ? kafka_errc::coordinator_not_available
                                                           : kafka_errc::invalid_group_id),
                            who.group_mode ? "the group coordinator is not known yet" : "no group.id"});
    return;
  }
  protocol::offset_fetch_request req;
  req.group_id = opts_.group_id;
  // KIP-447: offsets of pending transactional commits come back as UNSTABLE_OFFSET_COMMIT
  // (retried) instead of a stale committed offset (issue 13, item 8).
  req.require_stable = true;
  std::map<std::string, std::size_t> index;
  for (const auto& tp : tps) {
    auto [it, inserted] = index.emplace(tp.topic, req.topics->size());
    if (inserted) req.topics->push_back({tp.topic, {}});
    (*req.topics)[it->second].partition_indexes.push_back(tp.partition);
  }
  conn->send_adjusted(
      std::move(req), adjust_offset_fetch,
      [self = shared_from_this(), id](std::error_code ec, const protocol::offset_fetch_response& r,
                                      const net::response_frame&) {
        detail::commit_done done{id, {}, ec, ec ? ec.message() : ""};
        std::int16_t top = r.error_code;
        if (!r.groups.empty()) top = r.groups.front().error_code;
        if (ec || protocol::reacts(top, protocol::reaction::coordinator_moved)) self->coordinator_unusable(true);
        if (!ec && top != 0) {
          done.code = make_error_code(static_cast<kafka_errc>(top));
          done.message = "OffsetFetch failed: " + kafka_error_name(top);
        }
        auto add = [&](const std::string& topic, std::int32_t p, std::int64_t off,
                       const std::optional<std::string>& m, std::int32_t epoch, std::int16_t err) {
          if (err == 0 && off >= 0) done.offsets[{topic, p}] = {off, m.value_or(""), epoch};
          // A partition's error (UNSTABLE_OFFSET_COMMIT under require_stable, ...) fails the call
          // instead of passing for "nothing committed".
          if (err != 0 && !done.code) {
            done.code = make_error_code(static_cast<kafka_errc>(err));
            done.message =
                "OffsetFetch of " + topic + "-" + std::to_string(p) + " failed: " + kafka_error_name(err);
          }
        };
        for_each_committed(r, add);
        self->shared_.push(std::move(done));
      });
}

void fetcher::arm_auto_commit() {
  if (!opts_.auto_commit || auto_commit_armed_ || stopped_) return;
  arm(auto_commit_timer_, &fetcher::auto_commit_armed_, opts_.auto_commit_interval, [](fetcher& f) {
    f.auto_commit();
    f.arm_auto_commit();
  });
}

void fetcher::auto_commit() {
  std::set<TopicPartition> owned;
  for (const auto& [tp, p] : positions_.parts()) owned.insert(owned.end(), tp);
  commit_map offsets;
  {
    std::lock_guard lock(shared_.mutex);
    offsets = data::auto_commit_due(shared_.consumed, owned, last_auto_committed_);
  }
  const auto who = identity_();
  if (offsets.empty() || !who.stable) return;
  commit(0, std::move(offsets));
}

}  // namespace kgroup::fetch
