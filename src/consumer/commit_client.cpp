// The user thread's half of commits. See commit_client.hpp.
#include "consumer/commit_client.hpp"

#include <algorithm>
#include <vector>

#include "base/log.hpp"

namespace kgroup::detail {

fetch::commit_map commit_client::to_commit_map(const OffsetMap& offsets) {
  fetch::commit_map m;
  for (const auto& [tp, om] : offsets) {
    // As Java's OffsetAndMetadata: a negative offset (the default -1 included) is the caller's
    // mistake, refused before anything is sent.
    if (om.offset < 0)
      throw Error(make_error_code(client_errc::invalid_argument),
                  "commit: negative offset " + std::to_string(om.offset) + " for " + tp.topic + "-" +
                      std::to_string(tp.partition));
    m[tp] = {om.offset, om.metadata, om.leader_epoch.value_or(-1)};
  }
  return m;
}

commit_done commit_client::request(std::function<void(fetch::fetcher&, std::uint64_t)> send,
                                   clock::time_point deadline, const char* what) {
  const std::uint64_t id = ++next_id_;
  to_fetcher_([send = std::move(send), id](fetch::fetcher& f) { send(f, id); });
  auto done = wait(id, deadline);
  if (!done)
    throw Error(make_error_code(client_errc::request_timed_out), std::string(what) + ": no answer in time");
  if (done->code) throw Error(done->code, done->message);
  return std::move(*done);
}

namespace {
// A commit from inside a listener callback the core superseded (listener_mailbox::running_superseded).
Error stale_callback_commit() {
  const auto e = data::superseded_callback_commit();
  return Error(e.code, e.message);
}
}  // namespace

void commit_client::commit_and_wait(fetch::commit_map offsets, clock::time_point deadline) {
  if (listeners_.running_superseded()) throw stale_callback_commit();
  // The fetcher checks the call again before each retry: the core may supersede it meanwhile.
  request([offsets = std::move(offsets), deadline, seq = listeners_.running_seq()](
              fetch::fetcher& f, std::uint64_t id) { f.commit(id, offsets, deadline, seq); },
          deadline, "commit_sync()");
}

void commit_client::commit_sync(fetch::commit_map offsets, clock::time_point deadline) {
  // As Java's commitSync(): the callbacks of earlier commit_async() calls run in here, in order,
  // once their answers are in. Commits share one coordinator connection, so those answers come
  // before this commit's.
  const std::uint64_t before = next_id_;
  try {
    commit_and_wait(std::move(offsets), deadline);
  } catch (...) {
    finish_async(before, clock::now());
    throw;
  }
  finish_async(before, deadline);
}

std::map<TopicPartition, offset_meta> commit_client::committed(std::set<TopicPartition> tps,
                                                               clock::time_point deadline) {
  return request([tps = std::move(tps), deadline](fetch::fetcher& f,
                                                  std::uint64_t id) { f.fetch_committed(id, tps, deadline); },
                 deadline, "committed()")
      .offsets;
}

OffsetMap commit_client::to_offset_map(const fetch::commit_map& offsets) {
  OffsetMap out;
  for (const auto& [tp, om] : offsets)
    out[tp] = {om.offset, om.metadata, om.epoch >= 0 ? std::optional<std::int32_t>(om.epoch) : std::nullopt};
  return out;
}

void commit_client::auto_commit(fetch::commit_map offsets, std::optional<clock::time_point> deadline,
                                const char* what) {
  if (offsets.empty()) return;
  OffsetMap user_offsets = to_offset_map(offsets);
  if (!deadline) {
    commit_async(std::move(offsets), user_offsets, [this, what](const OffsetMap& o, std::error_code ec) {
      if (ec) logger()->warn("{} failed: {}", what, ec.message());
      report_auto_commit(o, ec);
    });
    return;
  }
  std::error_code failed;
  try {
    commit_and_wait(std::move(offsets), *deadline);
  } catch (const Error& e) {
    logger()->warn("{} failed: {}", what, e.what());
    failed = e.code();
  } catch (const std::exception& e) {
    logger()->warn("{} failed: {}", what, e.what());
    failed = make_error_code(client_errc::commit_failed);
  }
  report_auto_commit(user_offsets, failed);
}

void commit_client::set_auto_commit_callback(CommitCallback cb) {
  auto_commit_cb_ = std::move(cb);
  std::lock_guard lock(shared_.mutex);
  shared_.report_auto_commits = static_cast<bool>(auto_commit_cb_);
}

void commit_client::report_auto_commit(const OffsetMap& offsets, std::error_code ec) {
  if (!auto_commit_cb_) return;
  try {
    // A copy runs: the callback may replace or remove itself (set_auto_commit_callback) inside.
    const CommitCallback cb = auto_commit_cb_;
    cb(offsets, ec);
  } catch (...) {
    listeners_.keep_error();
  }
}

void commit_client::commit_async(fetch::commit_map m, const OffsetMap& offsets, CommitCallback cb) {
  const std::uint64_t id = ++next_id_;
  async_[id] = {offsets, std::move(cb)};
  if (listeners_.running_superseded()) {
    // Refused: its callback runs from poll() (or commit_sync()/close()) like any other answer.
    const Error e = stale_callback_commit();
    shared_.push(commit_done{id, {}, e.code(), e.what()});
    return;
  }
  to_fetcher_([id, m = std::move(m)](fetch::fetcher& f) mutable { f.commit(id, std::move(m)); });
}

void commit_client::complete(const commit_done& done) {
  if (done.id == commit_done::auto_commit_report_id) {
    report_auto_commit(to_offset_map(done.offsets), done.code);
    return;
  }
  auto it = async_.find(done.id);
  if (it == async_.end()) return;
  auto [offsets, cb] = std::move(it->second);
  async_.erase(it);
  if (!cb) return;
  try {
    cb(offsets, done.code);
  } catch (...) {
    listeners_.keep_error();
  }
}

void commit_client::finish_async(std::uint64_t up_to, clock::time_point deadline) {
  for (;;) {
    std::vector<commit_done> done;
    {
      std::unique_lock lock(shared_.mutex);
      auto pending = [&] { return !async_.empty() && async_.begin()->first <= up_to; };
      auto take = [&] {
        for (auto it = shared_.events.begin(); it != shared_.events.end();) {
          auto* d = std::get_if<commit_done>(&*it);
          if (d && d->id <= up_to && async_.count(d->id)) {
            done.push_back(std::move(*d));
            it = shared_.events.erase(it);
          } else {
            ++it;
          }
        }
        return !done.empty();
      };
      if (!pending()) return;
      if (!take()) {
        if (clock::now() >= deadline) return;
        shared_.cv.wait_until(lock, deadline);
        take();
      }
    }
    // Callbacks run without the lock, in the order the commits were made.
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (const auto& d : done) complete(d);
  }
}

std::optional<commit_done> commit_client::wait(std::uint64_t id, clock::time_point deadline) {
  std::unique_lock lock(shared_.mutex);
  for (;;) {
    for (auto it = shared_.events.begin(); it != shared_.events.end(); ++it) {
      if (auto* d = std::get_if<commit_done>(&*it); d && d->id == id) {
        commit_done out = std::move(*d);
        shared_.events.erase(it);
        return out;
      }
    }
    if (clock::now() >= deadline) return std::nullopt;
    shared_.cv.wait_until(lock, deadline);
  }
}

}  // namespace kgroup::detail
