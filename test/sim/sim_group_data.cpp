// The group simulation's real data path (kgroup-sim --group --real-data): each member runs the
// real data reader (detail::data_reader: its position table and record cursor, drain(), the
// commit positions) on its application's thread, and the fetcher's real cores
// (data::fetch_positions, data::fetch_planner, data::position_requests for OffsetFetch, ListOffsets
// and OffsetForLeaderEpoch, fetch::position_calls for the reader's calls) on its background thread,
// as sim_world.cpp runs them for one member; the rest of the fetcher's glue is mirrored below
// (Fetch, metadata refreshes, the retry timer). Three
// brokers serve the partitions' logs (sim_log.hpp), each partition from its leader. The data
// path's faults, in the fault phase: clean leader changes (the leader moves, a new leader epoch
// starts at the log's end; requests to the old leader or with an old epoch are refused until the
// member's metadata refresh finds the new one, and positions are validated), lost Fetch requests
// (timed out after 1 s), slow answers, transient partition errors in Fetch answers
// (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH); OffsetFetch fails with the coordinator's
// faults; in half of the seeds (a PRNG stream of their own) unclean elections: the new leader's
// log ends up to 30 records short of the old one's, with a new leader epoch starting there, so later
// appends diverge from what members fetched (sim_log.hpp's unclean_election, the data sim's); the
// members find it through KIP-320 validation (of their positions, and of committed offsets with
// their leader epochs) and the real reader's truncation handling; in a third (a stream of its
// own too) retention: the log's start moves forward, and positions below it are reset. Not yet:
// compaction.
// Every Fetch answer is encoded to bytes (v12) and decoded from that frame.
//
// What the real path makes checkable, beside G1-G7 (sim_group.cpp):
//   1   every record's id was appended at its partition and offset (the data sim's invariant 1);
//   G8  an application is given records only of partitions it owns (between the assigned call
//       and the revoked or lost one, as its listener saw them) and has not paused;
//   G9  no skip: each record is at the application's position, which starts where OffsetFetch
//       (or the reset) put it and moves only through records and its own seeks; and a member
//       starts a partition at an offset below which every record was given to some application
//       already (at least once across hand-overs);
//   3   no record of a truncated branch after the member's reader applied the divergence (the
//       data sim's invariant 3, per member);
//   5   fetch_positions::invalid_transitions() stays 0 (the data sim's invariant 5).
// Records an unclean election truncated are no longer in the log: G6 and G9 ask for every record
// of the log as it is (a truncated offset holds the new branch's record once appended again), and
// a member may start at a committed offset of a truncated branch: its fetcher validates it (the
// commit's leader epoch) and the cut it finds is checked instead. A commit may move back to where
// a cut or a reset moved its member's position. Records retention deleted count as given (nobody
// can be given them any more), and a position below the log's start is checked once reset.
// G3 is adapted to the applications' seeks (a commit may go back to where its member seeked) and
// checks auto-commit against the position; G6's "every offset given to an application" and
// "committed at the end" now hold for records the real reader returned.
//
// The applications (between polls, in the fault phase): seek back, seek_to_beginning(), pause(),
// resume(), commit_sync() of an explicit offset; every partition is resumed once the faults stop.
// In half of the seeds (a stream of their own) also seek() forward (to an offset past the
// position, within the log or past its end) and seek_to_end(); with unclean elections only
// seek_to_end(). The records a member skips so on purpose count as given for G6 and G9: from the
// position to a seek's target once the reader applied it (also those appended there later), and
// from the position (or where the log diverged from it) to where a seek_to_end() resolved, once
// it did. G3 lets a commit go back where a seek_to_end() from past the log's end, or the reset
// after a fetch found the log ending below the position, moved the position; a member may start
// at a committed offset past the log's end where an application seeked (its fetcher then finds
// the end below it, and the reset that follows is checked).
#include "sim_group.hpp"

#include <charconv>

#include "protocol/messages.hpp"

namespace kgroup::sim {
bool group_real_data = false;
}  // namespace kgroup::sim

namespace kgroup::sim::group_sim {

using pstate = data::fetch_state;
using partition_data = protocol::fetch_response::fetchable_topic_response::partition_data;

member_data::member_data(simulation& s, sim_member& owner)
    : fetcher_calls(fp, chains, owner.shared),
      sim(s),
      m(owner),
      fp(data::reset_policy::earliest, [this](const std::string& r) { refused = r; }),
      reader(owner.shared, stats, *this) {}

void member_data::post(std::string what, std::function<void()> f) {
  sim.data_post(m, std::move(what), std::move(f));
}

void member_data::pump() {
  sim.data_pump(m);
}

// ---- the world -------------------------------------------------------------------------------------

void simulation::data_setup() {
  for (auto& [tp, end] : log_end_) {
    auto& l = logs_[tp];
    l.epoch_start[0] = 0;
    l.batch_starts.insert(0);
    for (std::int64_t o = 0; o < end; ++o) {
      l.entries.push_back({next_id_++, 0});
      appended_at_.emplace_back(tp, o);
    }
  }
  for (std::int32_t b = 1; b <= 3; ++b) md_.brokers[b].node_id = b;
  for (const auto& [t, n] : topics_) {
    auto& tm = md_.topics[t];
    tm.name = t;
    for (std::int32_t p = 0; p < n; ++p)
      tm.partitions.push_back(data::partition_metadata{p, 0, 1, 0, {1}, {1}});
  }
  md_.refreshes = 1;
}

void simulation::data_produce(const TopicPartition& tp, std::int64_t n) {
  auto& l = logs_.at(tp);
  l.batch_starts.insert(l.end());
  for (std::int64_t i = 0; i < n; ++i) {
    appended_at_.emplace_back(tp, l.end());
    l.entries.push_back({next_id_++, l.epoch});
  }
}

// ---- the background thread: fetcher.cpp's glue ------------------------------------------------------

void simulation::data_post(sim_member& m, std::string what, std::function<void()> f) {
  auto& d = *m.data;
  d.last_post = std::max(now_ + milliseconds(rng_.below(2)), d.last_post);
  at_member(m, d.last_post, [this, &m, what = std::move(what), f = std::move(f)] {
    data_only();
    if (verbose_) notef("{}: bg: {}", m.name, what);
    f();
  });
}

void simulation::data_assign(sim_member& m, const partition_set& owned) {
  // fetcher::assign: the position table keeps what stays owned, forgets the rest (its queued data,
  // its consumed position, auto-commit's memory of it) and asks for the start of what is new.
  if (m.data->calls().assign(owned, m.auto_committer)) data_pump(m);
}

void simulation::data_pump(sim_member& m) {
  data_offset_fetch(m);
  data_list_offsets(m);
  data_validations(m);
  data_fetches(m);
}

void simulation::data_refresh(sim_member& m) {
  auto& d = *m.data;
  if (d.refresh_in_flight || now_ - d.last_refresh < milliseconds(500)) return;
  d.last_refresh = now_;
  d.refresh_in_flight = true;
  at_member(m, now_ + latency(), [this, &m] {
    data_only();
    auto& d = *m.data;
    d.refresh_in_flight = false;
    const auto refreshes = d.md.refreshes + 1;
    d.md = md_;
    d.md.refreshes = refreshes;
    d.md.updated = now_;
    data_pump(m);
  });
}

void simulation::data_retry_at(sim_member& m, time_point t) {
  auto& d = *m.data;
  if (d.retry_armed) return;
  d.retry_armed = true;
  const auto after = std::chrono::ceil<milliseconds>(std::max(t - now_, time_point::duration::zero()));
  at_member(m, now_ + after, [this, &m] {
    data_only();
    m.data->retry_armed = false;
    data_pump(m);
  });
}

// fetcher_offsets.cpp's glue around the library's position_requests core (OffsetFetch, ListOffsets,
// OffsetForLeaderEpoch): its requests are answered from the coordinator's committed offsets and
// the brokers' logs, and what the core makes of the answers is carried out as the driver does.
static const std::error_code request_failed = make_error_code(client_errc::request_timed_out);

void simulation::data_offset_fetch(sim_member& m) {
  auto& d = *m.data;
  const auto wanted = d.requests.committed_wanted();
  if (wanted.empty()) return;
  auto req = d.requests.request_committed(wanted);
  const bool fails = fault_phase() && rng_.chance(0.05);
  at_member(m, now_ + latency(), [this, &m, req = std::move(req), fails] {
    data_only();
    auto& d = *m.data;
    const bool failed = fails || not_serving(coord_node_);
    protocol::offset_fetch_response r;
    if (!failed) {
      for (const auto& t : *req.topics) {
        auto& rt = r.topics.emplace_back();
        rt.name = t.name;
        for (const auto p : t.partition_indexes) {
          const TopicPartition tp{t.name, p};
          const auto c = committed_.find(tp);
          const std::int64_t offset = c == committed_.end() ? -1 : c->second;
          // The commit's leader epoch (OffsetFetch v5+), in the seeds with unclean elections.
          const auto ce = committed_epoch_.find(tp);
          const std::int32_t epoch =
              unclean_ && offset >= 0 && ce != committed_epoch_.end() ? ce->second : -1;
          rt.partitions.push_back({p, offset, epoch, std::string{}, 0});
        }
      }
    }
    const auto got = d.requests.on_committed(failed ? request_failed : std::error_code{}, r);
    for (const auto& c : got.offsets) {
      notef("{}: {} committed at {}", m.name, name(c.tp), c.offset);
      m.shared.push(detail::position_event{c.tp, c.offset, false, c.epoch});
    }
    if (got.retry) data_retry_at(m, now_ + milliseconds(100));
    if (!failed) data_pump(m);  // after a failure, the retry timer asks again
  });
}

void simulation::data_wants(sim_member& m, const data::position_wants& wants) {
  if (!wants.reports.empty())
    fail("driver", "a partition reported (missing from metadata, or no reset policy)");
  if (wants.missing) {
    data_refresh(m);
    data_retry_at(m, now_ + milliseconds(100));
  }
}

void simulation::data_list_offsets(sim_member& m) {
  // To the leader in the fetcher's metadata: a leader that moved, or a leader epoch the metadata
  // has not caught up with, refuses it (sim_log.hpp's list_offsets).
  auto& d = *m.data;
  const auto wants = d.requests.resets_wanted(d.md);
  data_wants(m, wants);
  for (const auto& [leader, tps] : wants.by_leader) {
    auto sent = std::make_shared<const data::sent_resets>(d.requests.request_resets(leader, tps, d.md, 0));
    at_member(m, now_ + latency(), [this, &m, sent] {
      data_only();
      auto& d = *m.data;
      const auto r = answer_list_offsets(logs_, sent->node, sent->request);
      const auto got = d.requests.on_resets(*sent, {}, r);
      for (const auto& p : got.positions) {
        notef("{}: {} reset to {}", m.name, name(p.tp), p.offset);
        m.shared.push(detail::position_event{p.tp, p.offset, true, p.epoch});
      }
      if (got.refresh_metadata) data_refresh(m);
      if (got.retry) data_retry_at(m, now_ + milliseconds(100));
      data_pump(m);
    });
  }
}

void simulation::data_validations(sim_member& m) {
  // KIP-320, to the leader in the fetcher's metadata. A position past an unclean election's
  // truncation diverged: the cut goes to the user thread.
  auto& d = *m.data;
  const auto wants = d.requests.validations_wanted(d.md);
  data_wants(m, wants);
  for (const auto& [leader, tps] : wants.by_leader) {
    auto sent =
        std::make_shared<const data::sent_validations>(d.requests.request_validations(leader, tps, d.md));
    at_member(m, now_ + latency(), [this, &m, sent] {
      data_only();
      auto& d = *m.data;
      const auto r = answer_offset_for_leader_epoch(logs_, sent->node, sent->request);
      const auto got = d.requests.on_validations(*sent, {}, r);
      for (const auto& v : got.results) {
        const auto& sp = sent->sent.at(v.tp);
        notef("{}: bg: {} validated at {} epoch {}: error {}, end epoch {} offset {}", m.name, name(v.tp),
              sp.position, sp.epoch, v.error_code, v.end_epoch, v.end_offset);
        if (const auto& cut = v.outcome.cut) {
          notef("{}: bg: cut {} at {} epoch {} (diverged)", m.name, name(v.tp), cut->offset, cut->epoch);
          d.div.pushed(v.tp, now_);
          m.shared.push_cut(v.tp, cut->offset, cut->epoch, detail::cut_kind::diverged, cut->halted);
        }
      }
      if (got.refresh_metadata) data_refresh(m);
      if (got.retry) data_retry_at(m, now_ + milliseconds(100));
      data_pump(m);
    });
  }
}

// The log of a partition `r` picks.
static std::pair<const TopicPartition, partition_log>& pick_log(std::map<TopicPartition, partition_log>& logs,
                                                                prng& r) {
  auto it = logs.begin();
  std::advance(it, r.below(static_cast<std::int64_t>(logs.size())));
  return *it;
}

// A clean leader change (fault phase): the partition's leader moves to a broker of the three and
// its leader epoch starts at the log's end; old-epoch requests are fenced, and each member's
// fetcher finds the new leader through a metadata refresh.
void simulation::data_fault() {
  if (!fault_phase()) return;
  auto& [tp, l] = pick_log(logs_, rng_);
  l.leader = static_cast<std::int32_t>(rng_.between(1, 3));
  ++l.epoch;
  l.epoch_start[l.epoch] = l.end();
  data_new_leader(tp, l);
  notef("FAULT clean leader change {}: leader {} epoch {}", name(tp), l.leader, l.epoch);
  at(now_ + milliseconds(rng_.between(300, 3000)), [this] { data_fault(); });
}

void simulation::data_new_leader(const TopicPartition& tp, const partition_log& l) {
  auto& pi = md_.topics.at(tp.topic).partitions.at(static_cast<std::size_t>(tp.partition));
  pi.leader = l.leader;
  pi.leader_epoch = l.epoch;
  pi.replicas = pi.isr = {l.leader};
}

// An unclean election (fault phase, the seeds with unclean elections; every draw from their own
// stream): the new leader's log ends at a random offset up to 30 records below the old one's, and
// its new leader epoch starts there. The truncated records are gone from the log the checks hold
// the members to (G6, G9): what is appended at their offsets next is another record.
void simulation::data_unclean() {
  if (!fault_phase()) return;
  auto& u = unclean_rng_;
  auto& [tp, l] = pick_log(logs_, u);
  const std::int64_t cut = u.between(std::max(l.log_start, l.end() - 30), l.end());
  const auto leader = static_cast<std::int32_t>(u.between(1, 3));
  truncated_.truncated(unclean_election(l, cut, leader), now_);
  log_end_[tp] = cut;
  // A seek_to_end() not resolved yet skips the records from the cut on, at most.
  for (auto& m : members_) {
    if (!m->data) continue;
    if (const auto te = m->data->to_end.find(tp); te != m->data->to_end.end())
      te->second = std::min(te->second, cut);
  }
  processed_[tp].resize(static_cast<std::size_t>(cut));
  data_new_leader(tp, l);
  notef("FAULT unclean election {}: truncated to {}, leader {} epoch {}", name(tp), cut, l.leader, l.epoch);
  at(now_ + milliseconds(u.between(500, 4000)), [this] { data_unclean(); });
}

// Retention (fault phase, the seeds with retention; every draw from their own stream): the log's
// start moves forward, up to its end. Nobody can be given the records it deleted any more, so G6
// and G9 count them as given (a member whose position fell below the log's start is reset to it).
void simulation::data_retention() {
  if (!fault_phase()) return;
  auto& r = retention_rng_;
  auto& [tp, l] = pick_log(logs_, r);
  const std::int64_t to = r.between(l.log_start, l.end());
  delete_records_before(l, to);
  auto& seen = processed_[tp];
  std::fill(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(to), true);
  notef("FAULT retention {}: log start {}", name(tp), to);
  at(now_ + milliseconds(r.between(1000, 8000)), [this] { data_retention(); });
}

bool simulation::data_diverged(const TopicPartition& tp, std::int64_t offset, std::int32_t epoch) const {
  const auto& l = logs_.at(tp);
  return offset < l.log_start || offset > l.end() || (epoch >= 0 && l.end_of_epoch(epoch).second < offset);
}

void simulation::data_fetches(sim_member& m) {
  // send_fetches: the planner's requests, while the buffer has room.
  auto& d = *m.data;
  if (m.shared.buffered_bytes >= 16 * 1024) return;
  auto plan = d.planner.plan(now_, d.md);
  if (!plan.report_missing.empty()) fail("driver", "a partition reported missing from metadata");
  if (plan.refresh_metadata) data_refresh(m);
  if (plan.retry_at) data_retry_at(m, *plan.retry_at);
  if (plan.validate) data_validations(m);
  for (auto& f : plan.requests) {
    const auto node = f.node;
    auto sent = f.partitions;
    protocol::fetch_request req = std::move(f.request);
    d.planner.fill(node, req, 12, *sent);
    if (fault_phase() && rng_.chance(0.02)) {
      at_member(m, now_ + milliseconds(1000), [this, &m, node, sent] {
        data_only();
        notef("{}: bg: fetch from {} failed (request timed out)", m.name, node);
        data_answer(m, node, make_error_code(client_errc::request_timed_out), {}, nullptr, *sent);
      });
      continue;
    }
    at_member(m, now_ + latency(), [this, &m, node, sent] {
      data_only();
      // The broker holds a Fetch without data up to fetch.max.wait.ms (long poll).
      const bool no_data = std::all_of(sent->begin(), sent->end(), [this, node](const auto& e) {
        const auto& l = logs_.at(e.first);
        return l.leader == node && e.second.current_leader_epoch == l.epoch &&
               e.second.fetch_offset == l.end();
      });
      if (no_data) {
        at_member(m, now_ + milliseconds(rng_.between(20, 500)), [this, &m, node, sent] {
          data_only();
          data_deliver(m, node, sent);
        });
        return;
      }
      data_deliver(m, node, sent);
    });
  }
}

void simulation::data_deliver(sim_member& m, std::int32_t node, std::shared_ptr<const data::fetch_set> sent) {
  protocol::fetch_response r;
  // Each partition's records until the answer is encoded (reused from answer to answer).
  auto& buffers = answer_buffers_;
  std::size_t buffers_used = 0;
  if (buffers.size() < sent->size()) buffers.resize(sent->size());
  r.responses.reserve(sent->size());  // (at most one topic per partition: no reallocation)
  for (const auto& [tp, pf] : *sent) {
    const auto& l = logs_.at(tp);
    partition_data pd;
    pd.partition_index = tp.partition;
    pd.high_watermark = l.end();
    pd.last_stable_offset = l.end();
    pd.log_start_offset = l.log_start;
    pd.error_code = fetch_error(l, node, pf.current_leader_epoch, pf.fetch_offset, [&]() -> std::int16_t {
      if (!fault_phase() || !rng_.chance(0.03)) return 0;
      const auto e =
          code(rng_.chance(0.5) ? kafka_errc::not_leader_or_follower : kafka_errc::unknown_leader_epoch);
      notef("{}: bg: broker {} answers {} with error {}", m.name, node, name(tp), e);
      return e;
    });
    if (pd.error_code == 0 && pf.fetch_offset < l.end()) {
      auto& buf = buffers[buffers_used++];
      buf.clear();
      const auto w = write_batches(l, pf.fetch_offset, rng_.between(1, 40), -1, buf);
      if (w.error) fail("codec", w.error);
      pd.records = protocol::records_view{buf};
    }
    if (r.responses.empty() || r.responses.back().topic != tp.topic) {
      r.responses.emplace_back();
      r.responses.back().topic = tp.topic;
      r.responses.back().partitions.reserve(sent->size());
    }
    r.responses.back().partitions.push_back(std::move(pd));
  }
  // Encoded and decoded as the driver receives it: the fetched data keeps spans into the frame.
  auto frame = std::make_shared<protocol::bytes>();
  std::size_t size = 64;  // room for the frame (fewer reallocations while it is written)
  for (const auto& t : r.responses) size += 32 + t.topic.size() + 64 * t.partitions.size();
  for (std::size_t i = 0; i < buffers_used; ++i) size += buffers[i].size();
  frame->reserve(size);
  if (protocol::encode(r, 12, *frame)) fail("codec", "Fetch answer does not encode");
  protocol::fetch_response decoded;
  std::size_t trailing = 0;
  if (auto ec = protocol::decode(*frame, 12, decoded, &trailing))
    fail("codec", "Fetch answer does not decode: " + ec.message());
  data_answer(m, node, {}, decoded, frame, *sent);
}

void simulation::data_answer(sim_member& m, std::int32_t node, std::error_code ec,
                             const protocol::fetch_response& r, std::shared_ptr<const protocol::bytes> frame,
                             const data::fetch_set& sent) {
  auto& d = *m.data;
  const auto answer = d.planner.on_answer(now_, d.md, node, ec, r, sent);
  for (const auto& n : answer.notes) {
    if (n.what == data::fetch_note::kind::log_end_cut) {
      notef("{}: bg: cut {} at {} (log end)", m.name, name(n.tp), n.end);
      m.shared.push_cut(n.tp, n.end, -1, detail::cut_kind::log_end, n.halted);
    } else if (n.what == data::fetch_note::kind::out_of_range) {
      notef("{}: bg: {} offset {} out of range: reset", m.name, name(n.tp), n.offset);
    }
  }
  if (answer.refresh_metadata) data_refresh(m);
  if (answer.retry_at) data_retry_at(m, *answer.retry_at);
  d.calls().deliver(answer.slices, frame, node);
  if (answer.plan_again) data_pump(m);
}

// ---- the application: consumer_poll.cpp's order ------------------------------------------------------

void simulation::data_event(sim_member& m, detail::user_event& e) {
  auto& d = *m.data;
  if (auto* de = std::get_if<detail::data_error>(&e)) {
    d.reader.push_error(*de);
    return;
  }
  auto* pe = std::get_if<detail::position_event>(&e);
  if (pe == nullptr) return;
  const auto& tp = pe->tp;
  const bool diverged = pe->cut == detail::cut_kind::diverged;
  const auto cut_time = diverged ? d.div.take(tp) : std::nullopt;
  const auto before = d.reader.positions().position(tp);
  d.reader.position_event(*pe, m.bg_owned.count(tp) > 0);
  const auto after = d.reader.positions().position(tp);
  if (cut_time && !pe->seek_applied) d.div.applied(tp, *cut_time);
  // The log ends below the application's position (a seek forward past its end): the reader
  // applies the reset policy (earliest). Its commits may move back to where the reset puts it
  // once resolved, as after a seek_to_beginning().
  if (pe->cut == detail::cut_kind::log_end && before && before->offset > pe->offset && !after)
    seek_floors_[tp].push_back({m.index, logs_.at(tp).log_start, unresolved});
  if (pe->seek_applied || !after || (before && before->offset == after->offset)) return;
  // A seek_to_end() resolved: the records from the position it was called at to the end it found
  // were skipped on purpose (nobody is owed them; the log holds them as they are now).
  if (const auto te = d.to_end.find(tp);
      te != d.to_end.end() && pe->forced && pe->cut == detail::cut_kind::none) {
    auto& seen = processed_[tp];
    const auto from = std::clamp<std::int64_t>(te->second, 0, static_cast<std::int64_t>(seen.size()));
    const auto to = std::clamp<std::int64_t>(after->offset, from, static_cast<std::int64_t>(seen.size()));
    std::fill(seen.begin() + static_cast<std::ptrdiff_t>(from),
              seen.begin() + static_cast<std::ptrdiff_t>(to), true);
    notef("{}: seek_to_end({}) resolved at {}: offsets [{}, {}) skipped on purpose", m.name, name(tp),
          after->offset, te->second, after->offset);
    d.to_end.erase(te);
  }
  notef("{}: position of {} is {} ({})", m.name, name(tp), after->offset,
        pe->cut != detail::cut_kind::none ? "a cut"
        : pe->forced                      ? "reset"
                                          : "committed offset");
  // G9: a member starts where every record below was given to an application already (the
  // committed offset never passes what its committer's application processed).
  if (!m.app_owned.count(tp))
    fail("G8 (records only of owned partitions)",
         fmt::format("{}: the reader took a position for {}, which its application does not own", m.name,
                     name(tp)));
  // Its commits may move the committed offset back to where a divergence moved it, or a reset
  // after one (unknown divergence; a committed offset of a truncated branch past the log's end).
  if (diverged || (unclean_ && pe->forced))
    seek_floors_[tp].push_back({m.index, after->offset, commits_sent_});
  if ((unclean_ || retention_) && data_diverged(tp, after->offset, after->epoch)) {
    // A position the fetcher does not read from as it is: in a branch an unclean election
    // truncated (a committed offset, or a cut or reset an election overtook since), validated
    // first (its leader epoch; one past the log's end is out of range, and reset), or below the
    // log's start (out of range, reset). The position that follows is checked instead.
    notef("{}: {} is at {}, of a truncated branch or below the log's start: not checked", m.name, name(tp),
          after->offset);
  } else {
    // (Records an application skipped by its own seek forward count as given.)
    const auto upto = std::min<std::int64_t>(std::max<std::int64_t>(after->offset, 0),
                                             static_cast<std::int64_t>(processed_[tp].size()));
    if (const auto gap = data_first_gap(tp, upto); gap != upto)
      fail("G9 (no skip)", fmt::format("{} starts {} at {}, but offset {} was never given to an application",
                                       m.name, name(tp), after->offset, gap));
    // A committed offset past the log's end where an application seeked forward is not one: its
    // fetcher finds the log's end below it, and the reset policy applies (checked then).
    const auto pe_target = past_end_targets_.find(tp);
    const bool seeked_there = !pe->forced && pe->cut == detail::cut_kind::none &&
                              pe_target != past_end_targets_.end() && pe_target->second.count(after->offset);
    if (seeked_there && after->offset > log_end_[tp])
      notef("{}: {} is at {}, past the log's end {}, where an application seeked: not checked", m.name,
            name(tp), after->offset, log_end_[tp]);
    else if (after->offset > log_end_[tp])
      fail("G9 (no skip)", fmt::format("{} starts {} at {}, past the log's end {}", m.name, name(tp),
                                       after->offset, log_end_[tp]));
  }
  d.expected[tp] = after->offset;
  data_sync_pos(m);
  if (pe->forced) {
    for (auto& s : seek_floors_[tp])
      if (s.member == m.index && s.after == unresolved) s.after = commits_sent_;
  }
}

bool simulation::data_poll(sim_member& m) {
  auto& d = *m.data;
  try {
    d.reader.raise_data_error();
  } catch (const std::exception& x) {
    fail("data error", fmt::format("{}: poll() raised: {}", m.name, x.what()));
  }
  auto batch = d.reader.drain();
  if (batch.records.empty()) return false;
  record_lookup look;
  for (const auto& r : batch.records) data_record(m, r, look);
  if (verbose_) {
    std::string got;
    for (const auto& r : batch.records) got += fmt::format(" {}-{}@{}", r.topic, r.partition, r.offset);
    notef("{}: poll returns{}", m.name, got);
  }
  data_sync_pos(m);
  return true;
}

void simulation::data_record(sim_member& m, const ConsumerRecord& r, record_lookup& look) {
  auto& d = *m.data;
  if (!look.valid || look.tp.partition != r.partition || look.tp.topic != r.topic) {
    look = record_lookup{};
    look.valid = true;
    look.tp = TopicPartition{std::string(r.topic), r.partition};
    look.owned = m.app_owned.count(look.tp) > 0;
    look.paused = d.paused.count(look.tp) > 0;
    look.expected = d.expected.find(look.tp);
  }
  const TopicPartition& tp = look.tp;
  ++records_returned_;
  std::int64_t id = -1;
  if (r.value) {
    const auto& v = *r.value;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
    if (ec != std::errc{} || end != v.data() + v.size()) id = -1;
  }
  const bool known = id >= 1 && static_cast<std::uint64_t>(id) <= appended_at_.size();
  const auto* w = known ? &appended_at_[static_cast<std::size_t>(id - 1)] : nullptr;
  if (w == nullptr || w->first != tp || w->second != r.offset)
    fail("1 (offsets)",
         fmt::format(
             "{}: {} offset {} holds id {}, appended at {}", m.name, name(tp), r.offset, id,
             w == nullptr ? std::string("nowhere") : fmt::format("{} offset {}", name(w->first), w->second)));
  if (!look.owned)
    fail("G8 (records only of owned partitions)",
         fmt::format("{}: poll() returned {} offset {}, a partition its application does not own (owned: {})",
                     m.name, name(tp), r.offset, names(m.app_owned)));
  if (look.paused)
    fail("G8 (records only of owned partitions)",
         fmt::format("{}: poll() returned {} offset {}, which its application paused", m.name, name(tp),
                     r.offset));
  const auto exp = look.expected;
  if (exp == d.expected.end() || exp->second != r.offset)
    fail("G9 (no skip)", fmt::format("{}: poll() returned {} offset {}, the application's position is {}",
                                     m.name, name(tp), r.offset, exp == d.expected.end() ? -1 : exp->second));
  if (const auto seen = d.div.returned_past(tp, truncated_, id))
    fail("3 (no record past a detected divergence)",
         fmt::format("{}: {} offset {} (id {}) was truncated at {:.3f} ms, before the divergence its reader "
                     "applied (found at {:.3f} ms)",
                     m.name, name(tp), r.offset, id, ms(truncated_.died.at(id)), ms(*seen)));
  exp->second = r.offset + 1;
  if (unclean_) {
    if (!look.returned_epochs) look.returned_epochs = &d.returned_epochs[tp];
    look.returned_epochs->set(r.offset, r.leader_epoch);
  }
  // A record of a truncated branch is not the one its offset holds now.
  if (!truncated_.died.count(id)) {
    if (!look.processed) look.processed = &processed_[tp];
    (*look.processed)[static_cast<std::size_t>(r.offset)] = true;
  }
}

bool simulation::data_app_action(sim_member& m, const std::function<void()>& next) {
  auto& d = *m.data;
  if (!fault_phase()) {
    if (!d.paused.empty()) {
      notef("{}: the application resumes {} (no more faults)", m.name, names(d.paused));
      d.reader.resume(d.paused);
      d.paused.clear();
    }
    return false;
  }
  if (m.app_owned.empty() || !rng_.chance(0.05)) return false;
  auto it = m.app_owned.begin();
  std::advance(it, rng_.below(static_cast<std::int64_t>(m.app_owned.size())));
  const TopicPartition tp = *it;
  // In the seeds with seeks forward, a third of the actions (drawn from their own stream, so the
  // other seeds keep their schedules).
  if (seeks_forward_ && seek_rng_.chance(0.3)) {
    data_seek_forward(m, tp);
    return false;
  }
  const auto kind = rng_.below(100);
  if (kind >= 85) {
    // commit_sync() of an explicit offset: the record after the last one it processed (Java's
    // record.offset() + 1).
    const auto p = d.reader.positions().position(tp);
    if (!m.sync_commits || !p) return false;
    commit_sync(m, {{tp, {p->offset, "", p->epoch}}}, "commit_sync of an explicit offset", false, next);
    return true;
  }
  if (kind < 25) {
    // seek() back to a record it processed (or to its position): the records after it again.
    const auto p = d.reader.positions().position(tp);
    if (!p) return false;
    std::int64_t target = rng_.between(std::max<std::int64_t>(0, p->offset - 20), p->offset);
    // With unclean elections: the epoch of the record before the target (Java's
    // seek(OffsetAndMetadata)), so the fetcher validates the target; the position itself when
    // the application was not given that record.
    std::int32_t epoch = -1;
    if (unclean_ && target > 0) {
      const auto& e = d.returned_epochs[tp];
      if (const auto* r = e.find(target - 1)) {
        epoch = *r;
      } else {
        target = p->offset;
        epoch = p->epoch;
      }
    }
    notef("{}: the application seeks {} to {}{} (position {})", m.name, name(tp), target,
          unclean_ ? fmt::format(" epoch {}", epoch) : std::string(), p->offset);
    d.reader.seek(tp, target, epoch);
    d.expected[tp] = target;
    d.to_end.erase(tp);
    seek_floors_[tp].push_back({m.index, target, commits_sent_});
    data_sync_pos(m);
  } else if (kind < 35) {
    notef("{}: the application calls seek_to_beginning({})", m.name, name(tp));
    d.reader.seek_to({tp}, true);
    d.expected.erase(tp);
    d.to_end.erase(tp);
    // Its commits may move back once it resolved (until then auto-commit commits what was consumed).
    seek_floors_[tp].push_back({m.index, logs_.at(tp).log_start, unresolved});
  } else if (kind < 60) {
    if (d.paused.count(tp)) return false;
    notef("{}: the application pauses {}", m.name, name(tp));
    d.paused.insert(tp);
    d.reader.pause({tp});
  } else {
    if (!d.paused.count(tp) && !rng_.chance(0.1)) return false;
    notef("{}: the application resumes {}{}", m.name, name(tp),
          d.paused.count(tp) ? "" : " (not paused: nothing to do)");
    d.paused.erase(tp);
    d.reader.resume({tp});
  }
  return false;
}

void simulation::data_seek_forward(sim_member& m, const TopicPartition& tp) {
  auto& d = *m.data;
  auto& r = seek_rng_;
  const auto p = d.reader.positions().position(tp);
  if (!p) return;
  const auto& l = logs_.at(tp);
  // seek_to_end() (the only one with unclean elections: a seek forward without the leader epoch of
  // the record before its target could land in a branch an election truncates, unvalidated).
  if (unclean_ || r.chance(0.4)) {
    notef("{}: the application calls seek_to_end({}) (position {}, log end {})", m.name, name(tp), p->offset,
          l.end());
    d.reader.seek_to({tp}, false);
    d.expected.erase(tp);
    // The records it skips start at its position, or where the log diverged from it (a position
    // in a branch an unclean election truncated: the member would read on from there).
    std::int64_t from = std::min(p->offset, l.end());
    // (A leader that cannot tell where: the reset policy, earliest.)
    if (unclean_ && p->epoch >= 0) from = std::min(from, l.end_of_epoch(p->epoch).second);
    d.to_end[tp] = std::max(from, l.log_start);
    // From past the log's end (after a seek forward past it) the end is behind the position: the
    // application's explicit step back, which its commits may follow once it resolved.
    if (p->offset > l.end()) seek_floors_[tp].push_back({m.index, l.end(), unresolved});
    return;
  }
  // seek() forward: within the log (up to its end), or now and then past its end (the log may
  // reach the target before the fetcher asks, or its end is found below it: the reset policy).
  const std::int64_t end = l.end();
  const bool past_end = p->offset >= end || r.chance(0.2);
  const std::int64_t target = past_end
                                  ? r.between(std::max(end, p->offset) + 1, std::max(end, p->offset) + 20)
                                  : r.between(p->offset + 1, end);
  notef("{}: the application seeks {} forward to {} (position {}, log end {})", m.name, name(tp), target,
        p->offset, end);
  d.reader.seek(tp, target, -1);
  d.expected[tp] = target;
  d.to_end.erase(tp);
  seek_skips_[tp].emplace_back(p->offset, target);
  if (target > end) past_end_targets_[tp].insert(target);
  data_sync_pos(m);
}

std::int64_t simulation::data_first_gap(const TopicPartition& tp, std::int64_t upto) const {
  const auto pr = processed_.find(tp);
  if (pr == processed_.end()) return upto;
  const auto& seen = pr->second;
  const auto sk = seek_skips_.find(tp);
  const auto n = std::min<std::int64_t>(upto, static_cast<std::int64_t>(seen.size()));
  for (std::int64_t o = 0; o < n; ++o) {
    if (seen[static_cast<std::size_t>(o)]) continue;
    if (sk != seek_skips_.end() && std::any_of(sk->second.begin(), sk->second.end(),
                                               [o](const auto& s) { return s.first <= o && o < s.second; }))
      continue;
    return o;
  }
  return upto;
}

bool simulation::data_commit_back_sanctioned(const sim_member& m, const TopicPartition& tp,
                                             std::int64_t offset) {
  const auto f = seek_floors_.find(tp);
  return f != seek_floors_.end() && std::any_of(f->second.begin(), f->second.end(), [&](const seek_floor& s) {
           return s.member == m.index && commit_first_sent_ > s.after && offset >= s.offset;
         });
}

void simulation::data_sync_pos(sim_member& m) {
  auto& d = *m.data;
  for (auto it = m.pos.begin(); it != m.pos.end();)
    it = m.app_owned.count(it->first) ? std::next(it) : m.pos.erase(it);
  for (const auto& tp : m.app_owned) {
    if (const auto p = d.reader.positions().position(tp)) {
      m.pos[tp] = p->offset;
      d.last_pos[tp] = *p;
      auto& r = d.reached[tp];
      r = std::max(r, p->offset);
    }
  }
  for (auto it = d.expected.begin(); it != d.expected.end();)
    it = m.app_owned.count(it->first) ? std::next(it) : d.expected.erase(it);
  for (auto it = d.to_end.begin(); it != d.to_end.end();)
    it = m.app_owned.count(it->first) ? std::next(it) : d.to_end.erase(it);
}

}  // namespace kgroup::sim::group_sim
