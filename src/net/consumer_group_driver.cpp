#include "net/consumer_group_driver.hpp"

#include <random>

#include "base/log.hpp"
#include "kgroup/error.hpp"

namespace kgroup::net {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
namespace k = group::kip848;

std::string make_member_id() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<std::uint64_t>(clock::now().time_since_epoch().count()));
  for (;;) {
    protocol::uuid id;
    for (std::size_t i = 0; i < id.bytes.size(); i += 8) {
      std::uint64_t r = gen();
      for (std::size_t j = 0; j < 8; ++j) id.bytes[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
    }
    id.bytes[6] = static_cast<std::uint8_t>((id.bytes[6] & 0x0F) | 0x40);  // version 4
    id.bytes[8] = static_cast<std::uint8_t>((id.bytes[8] & 0x3F) | 0x80);  // IETF variant
    std::string s = id.to_string();
    if (!s.empty() && s.front() != '-') return s;
  }
}

group::kip848::consumer_member_options consumer_group_driver::with_member_id(
    group::kip848::consumer_member_options member) {
  if (member.member_id.empty()) member.member_id = make_member_id();
  return member;
}

consumer_group_driver::consumer_group_driver(asio::io_context& io, std::shared_ptr<cluster> c,
                                             consumer_group_driver_options opts, detail::shared_state& shared)
    : base(io, shared, opts.hooks, with_member_id(opts.member)),
      cluster_(std::move(c)),
      opts_(std::move(opts)) {
  // Every refresh (periodic, or another part of the client's) may name topic ids the core waits for.
  cluster_->on_metadata([this] { feed_names(); });
}

void consumer_group_driver::subscribe(std::vector<std::string> topics) {
  core().subscribe(clock::now(), std::move(topics));
  cluster_->start_periodic_refresh();
  process();
}

void consumer_group_driver::subscribe_pattern(std::string broker_pattern) {
  core().subscribe_regex(clock::now(), std::move(broker_pattern));
  cluster_->start_periodic_refresh();
  process();
}

void consumer_group_driver::on_coordinator(std::int32_t node) {
  parts::on_coordinator(*this, node);
}

void consumer_group_driver::send_heartbeat(k::send_consumer_group_heartbeat hb) {
  parts::send_heartbeat(*this, std::move(hb.request));
}

void consumer_group_driver::resolve_names() {
  parts::resolve_names(*this, "group");
}

void consumer_group_driver::feed_names() {
  parts::feed_names(*this);
}

void consumer_group_driver::apply(k::action& a) {
  apply_with(a, [&](auto& act) {
    using T = std::decay_t<decltype(act)>;
    if constexpr (std::is_same_v<T, k::send_consumer_group_heartbeat>) {
      send_heartbeat(std::move(act));
    } else if constexpr (std::is_same_v<T, k::need_topic_names>) {
      resolve_names();
    }
  });
}

}  // namespace kgroup::net
