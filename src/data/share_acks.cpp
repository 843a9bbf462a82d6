#include "data/share_acks.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "base/log.hpp"
#include "kgroup/error.hpp"

namespace kgroup::data::share {

namespace {

class share_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "kgroup.share"; }
  std::string message(int ev) const override {
    switch (static_cast<share_errc>(ev)) {
      case share_errc::request_in_flight:
        return "a share request to this broker is outstanding";
      case share_errc::no_session:
        return "no share session: its acquired records were released";
      case share_errc::renew_not_supported:
        return "RENEW needs ShareFetch/ShareAcknowledge v2";
      case share_errc::invalid_ack_type:
        return "invalid acknowledgement type";
      case share_errc::not_acquired:
        return "the record is not acquired by this member";
      case share_errc::not_delivered:
        return "the record has not been returned by poll()";
      case share_errc::already_acknowledged:
        return "the record was acknowledged already";
      case share_errc::malformed_acquired_records:
        return "malformed AcquiredRecords in a ShareFetch answer";
      case share_errc::acknowledgement_unanswered:
        return "the answer does not name the acknowledged partition";
      case share_errc::unexpected_answer:
        return "an answer without an outstanding request";
      case share_errc::nothing_to_send:
        return "no acknowledgements to send";
    }
    return "unknown share error " + std::to_string(ev);
  }
};

struct run {
  std::int64_t first;
  std::int64_t last;
  std::int8_t type;
};

constexpr std::int64_t max_offset = std::numeric_limits<std::int64_t>::max();

}  // namespace

const std::error_category& share_category() noexcept {
  static const share_category_impl instance;
  return instance;
}

ack_tracker::acquire_result ack_tracker::on_acquired(const TopicPartition& tp,
                                                     std::span<const acquired_range> ranges,
                                                     std::span<const std::int64_t> record_offsets) {
  acquire_result out;
  std::vector<acquired_range> sorted(ranges.begin(), ranges.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const acquired_range& a, const acquired_range& b) { return a.first_offset < b.first_offset; });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& r = sorted[i];
    const bool bad = r.first_offset < 0 || r.last_offset < r.first_offset || r.last_offset == max_offset ||
                     (i > 0 && r.first_offset <= sorted[i - 1].last_offset);
    if (bad) {
      logger()->warn(
          "{}-{}: ShareFetch answer with malformed AcquiredRecords [{}, {}] (of {} ranges); refused",
          tp.topic, tp.partition, r.first_offset, r.last_offset, sorted.size());
      ++stats_.malformed;
      out.error = share_errc::malformed_acquired_records;
      return out;
    }
  }
  if (sorted.empty()) {
    out.outside = record_offsets.size();
    return out;
  }
  std::vector<std::int64_t> offsets(record_offsets.begin(), record_offsets.end());
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());

  auto& ps = parts_[tp];
  std::size_t inside = 0;
  for (const auto& r : sorted) {
    // What this member holds inside the range already (not lost: a lost record acquired again
    // is a new acquisition), as ascending non-overlapping intervals.
    std::vector<std::pair<std::int64_t, std::int64_t>> held;
    for (auto it = ps.records.lower_bound(r.first_offset);
         it != ps.records.end() && it->first <= r.last_offset; ++it) {
      if (it->second.st != state::lost) held.emplace_back(it->first, it->first);
    }
    auto gap_overlaps = [&](std::int64_t first, std::int64_t last) {
      if (first <= r.last_offset && last >= r.first_offset)
        held.emplace_back(std::max(first, r.first_offset), std::min(last, r.last_offset));
    };
    auto g = ps.gaps.upper_bound(r.first_offset);
    if (g != ps.gaps.begin()) --g;
    for (; g != ps.gaps.end() && g->first <= r.last_offset; ++g) gap_overlaps(g->first, g->second);
    for (const auto& [first, last] : ps.gaps_taken) gap_overlaps(first, last);
    std::sort(held.begin(), held.end());

    // The free pieces of the range: records there are delivered, the rest is GAP.
    auto rec = std::lower_bound(offsets.begin(), offsets.end(), r.first_offset);
    auto fill = [&](std::int64_t first, std::int64_t last) {  // a free piece, first <= last
      std::int64_t next = first;                              // first offset not yet placed
      for (; rec != offsets.end() && *rec <= last; ++rec) {
        if (*rec < first) continue;  // inside a held interval
        ++inside;
        if (*rec > next) {
          ps.gaps.emplace(next, *rec - 1);
          out.gap_offsets += static_cast<std::uint64_t>(*rec - next);
        }
        ps.records[*rec] = held_record{r.delivery_count, state::acquired, ack_type::accept};
        out.deliver.push_back({*rec, r.delivery_count});
        next = *rec + 1;  // *rec <= last < INT64_MAX
      }
      if (next <= last) {
        ps.gaps.emplace(next, last);
        out.gap_offsets += static_cast<std::uint64_t>(last - next) + 1;
      }
    };
    std::int64_t cursor = r.first_offset;
    for (const auto& [first, last] : held) {
      if (last < cursor) continue;
      if (first > cursor) fill(cursor, first - 1);
      for (; rec != offsets.end() && *rec <= last; ++rec) {
        if (*rec >= cursor) ++inside;  // a held record sent again
      }
      out.duplicate_offsets += static_cast<std::uint64_t>(last - std::max(first, cursor)) + 1;
      cursor = last + 1;
      if (cursor > r.last_offset) break;
    }
    if (cursor <= r.last_offset) fill(cursor, r.last_offset);
  }
  out.outside = offsets.size() - inside;
  std::sort(out.deliver.begin(), out.deliver.end(),
            [](const acquired_record& a, const acquired_record& b) { return a.offset < b.offset; });

  stats_.acquired += out.deliver.size();
  stats_.gaps += out.gap_offsets;
  stats_.duplicates += out.duplicate_offsets;
  for (const auto& d : out.deliver) {
    if (d.delivery_count > 1) ++stats_.redelivered;
  }
  if (ps.empty()) parts_.erase(tp);
  return out;
}

std::vector<std::pair<TopicPartition, std::int64_t>> ack_tracker::begin_poll(ack_mode mode) {
  std::vector<std::pair<TopicPartition, std::int64_t>> missing;
  auto find =
      [&](const std::pair<TopicPartition, std::int64_t>& e) -> std::pair<partition_state*, held_record*> {
    auto p = parts_.find(e.first);
    if (p == parts_.end()) return {nullptr, nullptr};
    auto r = p->second.records.find(e.second);
    if (r == p->second.records.end()) return {&p->second, nullptr};
    return {&p->second, &r->second};
  };
  if (mode == ack_mode::explicit_mode) {
    for (const auto& e : poll_) {
      auto [ps, r] = find(e);
      if (r && (r->st == state::delivered || r->st == state::lost)) missing.push_back(e);
    }
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    if (missing.empty()) poll_.clear();
    return missing;
  }
  for (const auto& e : poll_) {
    auto [ps, r] = find(e);
    if (!r) continue;
    if (r->st == state::delivered) {
      r->st = state::pending;
      r->type = ack_type::accept;
      count_ack(ack_type::accept);
    } else if (r->st == state::lost) {
      add_outcome(e.first, e.second, ps->lost_error);
      ps->records.erase(e.second);
      if (ps->empty()) parts_.erase(e.first);
    }
  }
  poll_.clear();
  return missing;
}

std::size_t ack_tracker::on_polled(const TopicPartition& tp, std::span<const std::int64_t> offsets) {
  std::size_t ignored = 0;
  auto p = parts_.find(tp);
  for (std::int64_t o : offsets) {
    if (p == parts_.end()) {
      ++ignored;
      continue;
    }
    auto r = p->second.records.find(o);
    if (r == p->second.records.end() || r->second.st != state::acquired) {
      ++ignored;
      continue;
    }
    r->second.st = state::delivered;
    poll_.emplace_back(tp, o);
  }
  return ignored;
}

bool lock_expired(std::error_code ec) noexcept {
  return ec == kafka_errc::invalid_record_state;
}

std::error_code ack_tracker::acknowledge(const TopicPartition& tp, std::int64_t offset, ack_type type) {
  const auto t = static_cast<std::int8_t>(type);
  if (!valid_ack_type(t) || type == ack_type::gap) return share_errc::invalid_ack_type;
  if (type == ack_type::renew && !renew_supported_) return share_errc::renew_not_supported;
  auto p = parts_.find(tp);
  if (p == parts_.end()) return share_errc::not_acquired;
  auto r = p->second.records.find(offset);
  if (r == p->second.records.end()) return share_errc::not_acquired;
  switch (r->second.st) {
    case state::acquired:
      return share_errc::not_delivered;
    case state::pending:
    case state::in_flight:
      return share_errc::already_acknowledged;
    case state::lost:
      add_outcome(tp, offset, p->second.lost_error);
      p->second.records.erase(r);
      if (p->second.empty()) parts_.erase(p);
      return {};
    case state::delivered:
      break;
  }
  r->second.st = state::pending;
  r->second.type = type;
  count_ack(type);
  return {};
}

bool ack_tracker::has_pending(const TopicPartition& tp) const {
  auto p = parts_.find(tp);
  if (p == parts_.end() || p->second.in_flight) return false;
  if (!p->second.gaps.empty()) return true;
  return std::any_of(p->second.records.begin(), p->second.records.end(),
                     [](const auto& e) { return e.second.st == state::pending; });
}

std::vector<TopicPartition> ack_tracker::pending_partitions() const {
  std::vector<TopicPartition> out;
  for (const auto& [tp, ps] : parts_) {
    if (has_pending(tp)) out.push_back(tp);
  }
  return out;
}

std::vector<ack_batch> ack_tracker::take(const TopicPartition& tp, std::int64_t max_mixed) {
  std::vector<ack_batch> out;
  auto p = parts_.find(tp);
  if (p == parts_.end() || p->second.in_flight) return out;
  auto& ps = p->second;
  std::vector<run> runs;
  for (auto& [offset, r] : ps.records) {
    if (r.st != state::pending) continue;
    r.st = state::in_flight;
    runs.push_back({offset, offset, static_cast<std::int8_t>(r.type)});
  }
  for (const auto& [first, last] : ps.gaps) {
    runs.push_back({first, last, static_cast<std::int8_t>(ack_type::gap)});
    ps.gaps_taken.emplace_back(first, last);
  }
  ps.gaps.clear();
  if (runs.empty()) return out;
  ps.in_flight = true;
  std::sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.first < b.first; });

  // Runs of one type, then batches.
  std::vector<run> merged;
  for (const auto& r : runs) {
    if (!merged.empty() && merged.back().type == r.type && merged.back().last + 1 == r.first) {
      merged.back().last = r.last;
    } else {
      merged.push_back(r);
    }
  }
  max_mixed = std::max<std::int64_t>(max_mixed, 1);
  for (std::size_t i = 0; i < merged.size();) {
    // Join adjacent runs while the batch spans at most max_mixed offsets; a longer run stands
    // alone with one type (its length is unbounded: a GAP range may be huge).
    std::size_t j = i + 1;
    while (j < merged.size() && merged[j].first == merged[j - 1].last + 1 &&
           merged[j].last - merged[i].first < max_mixed) {
      ++j;
    }
    ack_batch b;
    b.first = merged[i].first;
    b.last = merged[j - 1].last;
    if (j == i + 1) {
      b.types = {merged[i].type};
    } else {
      b.types.reserve(static_cast<std::size_t>(b.last - b.first + 1));
      for (std::size_t k = i; k < j; ++k)
        b.types.insert(b.types.end(), static_cast<std::size_t>(merged[k].last - merged[k].first + 1),
                       merged[k].type);
    }
    out.push_back(std::move(b));
    i = j;
  }
  return out;
}

void ack_tracker::complete(const TopicPartition& tp, std::error_code ec) {
  auto p = parts_.find(tp);
  if (p == parts_.end() || !p->second.in_flight) return;
  auto& ps = p->second;
  for (auto it = ps.records.begin(); it != ps.records.end();) {
    if (it->second.st != state::in_flight) {
      ++it;
      continue;
    }
    if (!it->second.silent) add_outcome(tp, it->first, ec);
    if (!ec && it->second.type == ack_type::renew) {
      // Still acquired, with a fresh lock: the application acknowledges it again.
      it->second.st = state::delivered;
      poll_.emplace_back(tp, it->first);
      ++it;
    } else {
      it = ps.records.erase(it);
    }
  }
  ps.gaps_taken.clear();
  ps.in_flight = false;
  if (ps.empty()) parts_.erase(p);
}

void ack_tracker::forget(const TopicPartition& tp, std::error_code why) {
  auto p = parts_.find(tp);
  if (p == parts_.end()) return;
  auto& ps = p->second;
  for (auto it = ps.records.begin(); it != ps.records.end();) {
    switch (it->second.st) {
      case state::acquired:
        it = ps.records.erase(it);
        continue;
      case state::delivered:
        it->second.st = state::lost;
        ++stats_.lost;
        break;
      case state::pending:
      case state::in_flight:
        if (!it->second.silent) add_outcome(tp, it->first, why);
        it = ps.records.erase(it);
        continue;
      case state::lost:
        break;
    }
    ++it;
  }
  ps.lost_error = why;
  ps.gaps.clear();
  ps.gaps_taken.clear();
  ps.in_flight = false;
  if (ps.empty()) parts_.erase(p);
}

std::size_t ack_tracker::drop_undelivered(const TopicPartition& tp) {
  auto p = parts_.find(tp);
  if (p == parts_.end()) return 0;
  auto& ps = p->second;
  const auto before = ps.records.size();
  std::erase_if(ps.records, [](const auto& e) { return e.second.st == state::acquired; });
  const auto dropped = before - ps.records.size();
  if (ps.empty()) parts_.erase(p);
  return dropped;
}

std::size_t ack_tracker::release_undelivered(const TopicPartition& tp) {
  auto p = parts_.find(tp);
  if (p == parts_.end()) return 0;
  std::size_t released = 0;
  for (auto& [offset, r] : p->second.records) {
    if (r.st != state::acquired) continue;
    r.st = state::pending;
    r.type = ack_type::release;
    r.silent = true;
    count_ack(ack_type::release);
    ++released;
  }
  return released;
}

bool ack_tracker::unresolved(const TopicPartition& tp) const {
  auto p = parts_.find(tp);
  if (p == parts_.end()) return false;
  const auto& ps = p->second;
  if (!ps.gaps.empty() || !ps.gaps_taken.empty()) return true;
  return std::any_of(ps.records.begin(), ps.records.end(), [](const auto& e) {
    return e.second.st == state::delivered || e.second.st == state::pending ||
           e.second.st == state::in_flight;
  });
}

void ack_tracker::release_all() {
  for (auto p = parts_.begin(); p != parts_.end();) {
    auto& ps = p->second;
    for (auto it = ps.records.begin(); it != ps.records.end();) {
      if (it->second.st == state::acquired || it->second.st == state::delivered) {
        it->second.st = state::pending;
        it->second.type = ack_type::release;
        count_ack(ack_type::release);
      } else if (it->second.st == state::lost) {
        add_outcome(p->first, it->first, ps.lost_error);
        it = ps.records.erase(it);
        continue;
      }
      ++it;
    }
    p = ps.empty() ? parts_.erase(p) : std::next(p);
  }
  poll_.clear();
}

std::vector<ack_outcome> ack_tracker::take_outcomes() {
  for (auto& o : outcomes_) std::sort(o.offsets.begin(), o.offsets.end());
  return std::exchange(outcomes_, {});
}

std::size_t ack_tracker::held(const TopicPartition& tp) const {
  auto p = parts_.find(tp);
  return p == parts_.end() ? 0 : p->second.records.size();
}

std::int16_t ack_tracker::delivery_count(const TopicPartition& tp, std::int64_t offset) const {
  auto p = parts_.find(tp);
  if (p == parts_.end()) return 0;
  auto r = p->second.records.find(offset);
  return r == p->second.records.end() ? 0 : r->second.delivery_count;
}

void ack_tracker::add_outcome(const TopicPartition& tp, std::int64_t offset, std::error_code ec) {
  if (ec) ++stats_.failed;
  if (lock_expired(ec)) ++stats_.lock_expired;
  if (outcomes_.empty() || outcomes_.back().tp != tp || outcomes_.back().error != ec) {
    outcomes_.push_back(ack_outcome{tp, {}, ec});
  }
  outcomes_.back().offsets.push_back(offset);
}

void ack_tracker::count_ack(ack_type t) {
  switch (t) {
    case ack_type::accept:
      ++stats_.accepted;
      break;
    case ack_type::release:
      ++stats_.released;
      break;
    case ack_type::reject:
      ++stats_.rejected;
      break;
    case ack_type::renew:
      ++stats_.renewed;
      break;
    case ack_type::gap:
      break;
  }
}

}  // namespace kgroup::data::share
