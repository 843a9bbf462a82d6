// The group view behind GET /group (base/group_view.hpp), gathered on the background thread:
// DescribeGroups at the group coordinator for the members and their assignments (decoded with
// the consumer protocol), or ConsumerGroupDescribe for a KIP-848 group (group.protocol=consumer:
// assignments by topic id and name, no bytes to decode), OffsetFetch there for the group's
// committed offsets, and ListOffsets
// (latest, with the consumer's isolation level) at each partition's leader for the end offsets.
//
// Only while someone looks: view() (one call per GET /group) marks the view wanted; the observer
// then refreshes it at most every `refresh_interval`, and stops once nobody asked for
// `wanted_for`. view() never waits for the network: it returns the latest gathered view with its
// age and the latest refresh's error, so an HTTP request never holds up the background thread.
//
// Not thread-safe: every call on the io_context's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/group_view.hpp"
#include "fetch/fetcher.hpp"
#include "net/cluster.hpp"

namespace kgroup::fetch {

struct group_observer_options {
  std::string group_id;
  /// group.protocol=consumer: describe with ConsumerGroupDescribe (KIP-848).
  bool kip848 = false;
  std::chrono::milliseconds refresh_interval{2000};
  std::chrono::milliseconds wanted_for{30000};
  /// Bound on each step of a refresh (coordinator lookup, DescribeGroups, offsets).
  std::chrono::milliseconds request_timeout{5000};
};

/// Builds the members and partitions of a view from one DescribeGroups group entry: decodes every
/// member's assignment (a member whose bytes do not decode gets an error, the others are kept),
/// and lists every assigned partition plus the partitions of `known_topics` (topic -> partition
/// count) that nobody owns. Pure; committed and end offsets are left unknown.
void build_members(const protocol::describe_groups_response::described_group& g,
                   const std::map<std::string, std::int32_t>& known_topics, base::group_view& out);

/// The same from one ConsumerGroupDescribe group entry (KIP-848): each member's current
/// assignment, a topic named by the answer or else through `names` (topic id -> name, from
/// metadata); a topic id neither knows is that member's error, its other topics are kept. The
/// unowned partitions listed are those of the members' subscribed topic names.
void build_members(const protocol::consumer_group_describe_response::described_group& g,
                   const std::map<std::string, std::int32_t>& known_topics,
                   const std::map<protocol::uuid, std::string>& names, base::group_view& out);

class group_observer : public std::enable_shared_from_this<group_observer> {
 public:
  group_observer(boost::asio::io_context& io, std::shared_ptr<net::cluster> c, std::shared_ptr<fetcher> f,
                 group_observer_options opts, std::function<group_identity()> identity);

  /// The latest view, with its age; marks it wanted and starts a refresh when the last one is
  /// older than refresh_interval. Never blocks.
  base::group_view view();

  /// Stops refreshing; pending requests complete into nothing.
  void shutdown();

 private:
  void refresh();
  void describe(std::int32_t coordinator);
  void on_described(std::int32_t coordinator, const protocol::describe_groups_response::described_group& g);
  void describe_consumer_group(std::int32_t coordinator, const std::shared_ptr<net::connection>& conn);
  /// The group's entry in a describe answer; nullptr after finishing the refresh with why not
  /// (a failed request, the group missing, an error code: the coordinator is looked up again
  /// when it moved).
  template <class Group>
  const Group* described(const char* api, std::error_code ec, const std::vector<Group>& groups);
  void on_described(std::int32_t coordinator, const protocol::consumer_group_describe_response::described_group& g);
  /// After members: this consumer's generation (member epoch) if it is one of them, then offsets.
  void members_built(std::int32_t coordinator);
  /// Topic partition count per topic name, from metadata.
  std::map<std::string, std::int32_t> known_topics() const;
  void query_offsets(std::int32_t coordinator);
  /// Ends a refresh: `error` empty means it succeeded; with `gathered`, `next_` replaces the view.
  void finish(std::string error, bool gathered);
  void schedule();

  std::shared_ptr<net::cluster> cluster_;
  std::shared_ptr<fetcher> fetcher_;
  group_observer_options opts_;
  std::function<group_identity()> identity_;
  boost::asio::steady_timer timer_;

  base::group_view view_;  // the latest gathered view (members, partitions, offsets)
  base::group_view next_;  // the one a refresh is building
  std::optional<std::chrono::steady_clock::time_point> gathered_at_;
  std::optional<std::chrono::steady_clock::time_point> last_wanted_;
  std::optional<std::chrono::steady_clock::time_point> last_started_;
  std::optional<std::int32_t> coordinator_;  // found by our own lookup, when the member knows none
  std::uint64_t round_ = 0;                  // refreshes started; a late answer of an old one is ignored
  bool in_flight_ = false;
  bool timer_armed_ = false;
  bool stopped_ = false;
};

}  // namespace kgroup::fetch
