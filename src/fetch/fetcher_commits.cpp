// The fetcher, continued: commits and committed() (their decisions are data/committer's) and
// auto-commit's timer. See fetcher.hpp.
#include "fetch/fetcher.hpp"

#include <algorithm>
#include <optional>

#include "base/backoff.hpp"
#include "base/log.hpp"
#include "data/offset_fetch.hpp"
#include "protocol/error_reactions.hpp"

namespace kgroup::fetch {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

// ---- commits ----------------------------------------------------------------------------------------

void fetcher::coordinator_unusable(bool failed) {
  if (opts_.coordinator_unusable) opts_.coordinator_unusable(failed);
}

std::shared_ptr<net::connection> fetcher::coordinator_connection(const group_identity& who) {
  auto conn = who.coordinator ? cluster_->broker(*who.coordinator, net::channel::offsets) : nullptr;
  if (!conn) coordinator_unusable(false);
  return conn;
}

struct fetcher::retried {
  retried(const fetcher_options& o, std::optional<clock::time_point> until)
      : until(until), backoff(o.retry_backoff, o.retry_backoff_max, /*jitter=*/0.0, /*seed=*/0) {}
  std::function<void(coordinator_done)> attempt;
  std::optional<clock::time_point> until;
  base::backoff backoff;
  coordinator_done done;
};

void fetcher::attempt(std::shared_ptr<retried> r) {
  r->attempt([self = shared_from_this(), r](detail::commit_done d) {
    if (d.code && r->until && !self->stopped_ && data::commit_retriable(d.code)) {
      const auto wait = r->backoff.next();
      if (clock::now() + wait < *r->until) {
        logger()->debug("coordinator request failed ({}); retrying in {} ms", d.message, wait.count());
        auto timer = std::make_shared<asio::steady_timer>(self->io_, wait);
        timer->async_wait([self, r, timer](const boost::system::error_code& ec) {
          if (!ec && !self->stopped_) self->attempt(r);
        });
        return;
      }
    }
    r->done(std::move(d));
  });
}

void fetcher::commit(std::uint64_t id, commit_map offsets, std::optional<clock::time_point> retry_until,
                     std::uint64_t listener_seq) {
  // A timed auto-commit (id 0) is reported to the user thread when the user asked for it
  // (Consumer::set_auto_commit_callback), with the offsets it was for.
  std::optional<commit_map> report;
  if (id == 0) {
    std::lock_guard lock(shared_.mutex);
    if (shared_.report_auto_commits) report = offsets;
  }
  auto r = std::make_shared<retried>(opts_, retry_until);
  r->attempt = [self = shared_from_this(), offsets = std::move(offsets),
                listener_seq](coordinator_done done) {
    if (listener_seq != 0) {
      bool superseded = false;
      {
        std::lock_guard lock(self->shared_.mutex);
        superseded = self->shared_.late_cancels.count(listener_seq) > 0;
      }
      if (superseded) {
        auto e = data::superseded_callback_commit();
        done(detail::commit_done{0, {}, e.code, std::move(e.message)});
        return;
      }
    }
    self->commit_once(offsets, std::move(done));
  };
  r->done = [self = shared_from_this(), id, report = std::move(report)](detail::commit_done d) {
    if (id != 0) {
      d.id = id;
      self->shared_.push(std::move(d));
      return;
    }
    if (d.code) logger()->warn("auto-commit failed: {}", d.message);
    if (report) {
      d.id = detail::commit_done::auto_commit_report_id;
      d.offsets = *report;
      self->shared_.push(std::move(d));
    }
  };
  attempt(std::move(r));
}

void fetcher::commit_once(const commit_map& offsets, coordinator_done done) {
  const auto who = identity_();
  auto report = [done](std::error_code ec, std::string msg) {
    done(detail::commit_done{0, {}, ec, std::move(msg)});
  };
  if (auto refused = data::refuse_commit(who, offsets)) {
    report(refused->code, std::move(refused->message));
    return;
  }
  auto conn = coordinator_connection(who);
  if (!conn) {
    auto unknown = data::coordinator_unknown();
    report(unknown.code, std::move(unknown.message));
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
        self->auto_committer_.committed(offsets);
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

void fetcher::fetch_committed(std::uint64_t id, std::set<TopicPartition> tps,
                              std::optional<clock::time_point> retry_until) {
  auto r = std::make_shared<retried>(opts_, retry_until);
  r->attempt = [self = shared_from_this(), tps = std::move(tps)](coordinator_done done) {
    self->fetch_committed_once(tps, std::move(done));
  };
  r->done = [self = shared_from_this(), id](detail::commit_done d) {
    d.id = id;
    self->shared_.push(std::move(d));
  };
  attempt(std::move(r));
}

void fetcher::fetch_committed_once(const std::set<TopicPartition>& tps, coordinator_done done) {
  const auto who = identity_();
  auto fail = [&](data::commit_error e) { done(detail::commit_done{0, {}, e.code, std::move(e.message)}); };
  if (auto refused = data::refuse_offset_fetch(who)) return fail(std::move(*refused));
  auto conn = coordinator_connection(who);
  if (!conn) return fail(data::coordinator_unknown());
  conn->send_adjusted(
      data::make_offset_fetch_request(opts_.group_id, tps), data::adjust_offset_fetch,
      [self = shared_from_this(), done](std::error_code ec, const protocol::offset_fetch_response& r,
                                        const net::response_frame&) {
        if (ec) {
          self->coordinator_unusable(true);
          done(detail::commit_done{0, {}, ec, ec.message()});
          return;
        }
        auto answer = data::read_committed(r);
        if (answer.coordinator_gone) self->coordinator_unusable(true);
        done(detail::commit_done{0, std::move(answer.offsets), answer.error.code,
                                 std::move(answer.error.message)});
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
  const auto who = identity_();
  commit_map offsets;
  {
    std::lock_guard lock(shared_.mutex);
    offsets = auto_committer_.due(shared_.consumed, owned, who);
  }
  if (!offsets.empty()) commit(0, std::move(offsets));
}

}  // namespace kgroup::fetch
