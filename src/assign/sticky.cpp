// The sticky algorithm shared by "sticky" and "cooperative-sticky".
//
// Priorities, in order: every subscribed partition assigned once and only to a subscriber;
// balance; stickiness (a partition stays with its previous owner unless balance needs it
// elsewhere); rack alignment (KIP-881), which decides which partitions move when some must and
// where unowned partitions go, but never moves a partition by itself.
//
// Two paths:
// - uniform (every member subscribes to the same topics, the common case): quotas are exact, so
//   one pass keeps what fits each member's quota and a second deals the rest. O(P + M).
// - general (mixed subscriptions): keep everything previously owned, water-fill each topic's
//   unowned partitions into its least-loaded subscribers, then move partitions one at a time to a
//   topic's least-loaded subscriber from an owner with two or more partitions more, while there is
//   one. Each move lowers the sum of squared member loads, so this ends, and when it ends no single
//   move can improve balance (Kafka's definition of balanced for mixed subscriptions). Moves are
//   not proven minimal here (the uniform path's are).
#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "assign/model.hpp"

namespace kgroup::assign {
namespace {

// Members of each rack, in member order (CSR by rack id).
struct rack_members {
  std::vector<std::uint32_t> begin;
  std::vector<std::uint32_t> members;

  explicit rack_members(const group_model& model) : begin(model.rack_count + 1, 0) {
    for (std::int32_t r : model.member_rack) {
      if (r >= 0) ++begin[static_cast<std::uint32_t>(r) + 1];
    }
    for (std::uint32_t r = 0; r < model.rack_count; ++r) begin[r + 1] += begin[r];
    members.resize(begin[model.rack_count]);
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (std::uint32_t m = 0; m < model.member_count(); ++m) {
      const std::int32_t r = model.member_rack[m];
      if (r >= 0) members[fill[static_cast<std::uint32_t>(r)]++] = m;
    }
  }
};

std::vector<std::uint32_t> uniform_assign(const group_model& model, const ownership& prior) {
  const std::uint32_t partitions = model.partition_count();
  const std::uint32_t member_count = model.member_count();
  std::vector<std::uint32_t> owner(partitions, no_member);
  if (member_count == 0 || partitions == 0) return owner;

  const std::uint32_t floor = partitions / member_count;
  std::uint32_t extra_slots = partitions % member_count;  // members that may hold floor + 1

  std::vector<std::uint32_t> owned(member_count, 0);
  if (!prior.none()) {
    for (std::uint32_t g = 0; g < partitions; ++g) {
      const std::uint32_t o = prior.prev(g);
      if (o != no_member) ++owned[o];
    }
  }
  // Moves are minimal when the floor + 1 quotas go to members that own at least that many: each
  // such member then gives up one partition fewer. Any choice among them is equally good.
  std::vector<std::uint32_t> quota(member_count, floor);
  for (std::uint32_t m = 0; m < member_count && extra_slots > 0; ++m) {
    if (owned[m] > floor) {
      quota[m] = floor + 1;
      --extra_slots;
    }
  }

  std::vector<std::uint32_t> load(member_count, 0);
  if (model.rack_aware) {
    // Over-quota members give up their cross-rack partitions first.
    for (std::uint32_t g = 0; g < partitions; ++g) {
      const std::uint32_t m = prior.prev(g);
      if (m != no_member && load[m] < quota[m] && model.aligned(g, m)) {
        owner[g] = m;
        ++load[m];
      }
    }
  }
  for (std::uint32_t g = 0; g < partitions; ++g) {
    const std::uint32_t m = prior.prev(g);
    if (m != no_member && owner[g] == no_member && load[m] < quota[m]) {
      owner[g] = m;
      ++load[m];
    }
  }

  // What is still unowned (owner[g] == no_member) is the pool the rest is dealt from, walked in
  // partition order; not copied out (a fresh group's pool is every partition: 4 MB of fresh memory
  // for a million). Its size is (sum of deficits below floor) + extra_slots: every member reaches
  // floor and exactly extra_slots more members reach floor + 1.

  if (model.rack_aware) {
    const rack_members racks(model);
    // Same-rack members below floor first, then same-rack members taking one of the extra slots.
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == 1 && extra_slots == 0) break;
      std::vector<std::uint32_t> cursor(racks.begin.begin(), racks.begin.end() - 1);
      for (std::uint32_t g = 0; g < partitions; ++g) {
        if (owner[g] != no_member) continue;
        for (std::uint16_t r : model.racks_of(g)) {
          std::uint32_t& c = cursor[r];
          const std::uint32_t end = racks.begin[r + 1];
          // Loads only grow, so a member skipped once stays skipped in this phase.
          if (phase == 0) {
            while (c < end && load[racks.members[c]] >= floor) ++c;
          } else {
            while (c < end && load[racks.members[c]] != floor) ++c;
          }
          if (c == end) continue;
          const std::uint32_t m = racks.members[c];
          owner[g] = m;
          ++load[m];
          if (phase == 1) --extra_slots;
          break;
        }
        if (phase == 1 && extra_slots == 0) break;
      }
    }
  }

  // Deal the rest in partition order, so each member's new partitions are consecutive: its
  // assignment then names few topics, which keeps SyncGroup small.
  std::uint32_t m = 0;
  std::uint32_t g = 0;
  for (; g < partitions; ++g) {
    if (owner[g] != no_member) continue;
    while (m < member_count && load[m] >= floor) ++m;
    if (m == member_count) break;
    owner[g] = m;
    ++load[m];
  }
  m = 0;
  for (; g < partitions; ++g) {
    if (owner[g] != no_member) continue;
    while (m < member_count && load[m] != floor) ++m;
    if (m == member_count) break;  // unreachable: the counts above add up
    owner[g] = m;
    ++load[m];
  }
  return owner;
}

class general_assigner {
 public:
  general_assigner(const group_model& model, const ownership& prior)
      : model_(model),
        prior_(prior),
        owner_(model.partition_count(), no_member),
        load_(model.member_count(), 0) {}

  std::vector<std::uint32_t> run() {
    keep_previous();
    fill_unowned();
    balance();
    return std::move(owner_);
  }

 private:
  void give(std::uint32_t g, std::uint32_t m) {
    owner_[g] = m;
    ++load_[m];
  }

  void keep_previous() {
    for (std::uint32_t g = 0; g < model_.partition_count(); ++g) {
      const std::uint32_t m = prior_.prev(g);
      if (m != no_member) give(g, m);
    }
  }

  // Topics with the fewest subscribers first: they have the least choice, so they should not find
  // their subscribers already loaded by topics that could have gone elsewhere.
  void fill_unowned() {
    std::vector<std::uint32_t> topics(model_.topic_count());
    std::iota(topics.begin(), topics.end(), 0u);
    std::stable_sort(topics.begin(), topics.end(), [&](std::uint32_t a, std::uint32_t b) {
      return model_.subscribers_of(a).size() < model_.subscribers_of(b).size();
    });
    std::vector<std::uint32_t> order, add;
    for (std::uint32_t t : topics) {
      const std::uint32_t base = model_.topic_base[t], end = model_.topic_base[t + 1];
      std::uint32_t unowned = 0;
      for (std::uint32_t g = base; g < end; ++g) unowned += owner_[g] == no_member ? 1 : 0;
      if (unowned == 0) continue;
      const auto subs = model_.subscribers_of(t);
      water_fill(subs, unowned, order, add);
      deal(t, subs, add);
    }
  }

  // Raises the lowest loads among `subs` with `units` partitions, as evenly as possible:
  // add[i] is what subscriber i gets.
  void water_fill(std::span<const std::uint32_t> subs, std::uint32_t units, std::vector<std::uint32_t>& order,
                  std::vector<std::uint32_t>& add) const {
    const auto k = static_cast<std::uint32_t>(subs.size());
    order.resize(k);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const std::uint32_t la = load_[subs[a]], lb = load_[subs[b]];
      return la != lb ? la < lb : a < b;
    });
    std::uint64_t remaining = units;
    std::uint64_t level = load_[subs[order[0]]];
    std::uint32_t width = 1;  // order[0 .. width) are at `level` after raising
    while (true) {
      while (width < k && load_[subs[order[width]]] <= level) ++width;
      if (width == k) break;
      const std::uint64_t next = load_[subs[order[width]]];
      const std::uint64_t need = (next - level) * width;
      if (need > remaining) break;
      remaining -= need;
      level = next;
    }
    level += remaining / width;
    const std::uint64_t extra = remaining % width;
    add.assign(k, 0);
    for (std::uint32_t j = 0; j < width; ++j) {
      const std::uint32_t i = order[j];
      add[i] = static_cast<std::uint32_t>(level - load_[subs[i]] + (j < extra ? 1 : 0));
    }
  }

  // Hands topic t's unowned partitions to its subscribers, add[i] each: same-rack partitions
  // first, the rest in partition order.
  void deal(std::uint32_t t, std::span<const std::uint32_t> subs, std::vector<std::uint32_t>& add) {
    const std::uint32_t base = model_.topic_base[t], end = model_.topic_base[t + 1];
    const auto k = static_cast<std::uint32_t>(subs.size());
    if (model_.rack_aware) {
      // Unowned partitions of t per rack.
      bucket_begin_.assign(model_.rack_count + 1, 0);
      for (std::uint32_t g = base; g < end; ++g) {
        if (owner_[g] != no_member) continue;
        for (std::uint16_t r : model_.racks_of(g)) ++bucket_begin_[r + 1u];
      }
      for (std::uint32_t r = 0; r < model_.rack_count; ++r) bucket_begin_[r + 1] += bucket_begin_[r];
      bucket_.resize(bucket_begin_[model_.rack_count]);
      std::vector<std::uint32_t> fill(bucket_begin_.begin(), bucket_begin_.end() - 1);
      for (std::uint32_t g = base; g < end; ++g) {
        if (owner_[g] != no_member) continue;
        for (std::uint16_t r : model_.racks_of(g)) bucket_[fill[r]++] = g;
      }
      std::vector<std::uint32_t> cursor(bucket_begin_.begin(), bucket_begin_.end() - 1);
      for (std::uint32_t i = 0; i < k; ++i) {
        const std::int32_t r = model_.member_rack[subs[i]];
        if (r < 0) continue;
        const auto ru = static_cast<std::uint32_t>(r);
        while (add[i] > 0 && cursor[ru] < bucket_begin_[ru + 1]) {
          const std::uint32_t g = bucket_[cursor[ru]++];
          if (owner_[g] != no_member) continue;
          give(g, subs[i]);
          --add[i];
        }
      }
    }
    std::uint32_t g = base;
    for (std::uint32_t i = 0; i < k; ++i) {
      for (; add[i] > 0; --add[i]) {
        while (owner_[g] != no_member) ++g;
        give(g, subs[i]);
      }
    }
  }

  // First with moves of partitions nobody owned before only: the imbalance one topic shows may be
  // fixed by such moves in other topics, without costing any stickiness. Then with any partition.
  void balance() {
    for (const bool fresh_only : {true, false}) {
      bool moved = true;
      while (moved) {
        moved = false;
        for (std::uint32_t t = 0; t < model_.topic_count(); ++t) moved = balance_topic(t, fresh_only) || moved;
      }
    }
  }

  // Moves partitions of t, one at a time, from its most-loaded owner to its least-loaded
  // subscriber while they differ by two or more. Within the giver's partitions: first those it did
  // not own before (moving them costs no stickiness; in a cooperative follow-up round these are the
  // ones just handed out), then (racks) one in the receiver's rack, one outside the giver's rack,
  // then the lowest id.
  //
  // One batch per call, O(n log n + moves log k) for n partitions and k subscribers: a receiver
  // ends at most one above the minimum, so it never becomes a giver, and the most-loaded giver,
  // once it gave, stays within one of every other giver, so it never becomes a receiver.
  bool balance_topic(std::uint32_t t, bool fresh_only) {
    const auto subs = model_.subscribers_of(t);
    const std::uint32_t base = model_.topic_base[t], end = model_.topic_base[t + 1];
    std::uint32_t low = load_[subs[0]];
    for (std::uint32_t m : subs) low = std::min(low, load_[m]);
    auto movable = [&](std::uint32_t g) { return !fresh_only || prior_.prev(g) != owner_[g]; };
    bool needed = false;
    for (std::uint32_t g = base; g < end && !needed; ++g) needed = load_[owner_[g]] >= low + 2 && movable(g);
    if (!needed) return false;

    // Movable partitions grouped by owner, each owner's in preference order.
    candidates_.clear();
    for (std::uint32_t g = base; g < end; ++g) {
      if (movable(g)) candidates_.push_back(g);
    }
    const auto rank = [&](std::uint32_t g) {
      const std::uint32_t o = owner_[g];
      std::uint32_t r = prior_.prev(g) != o ? 0 : 2;
      if (model_.rack_aware && model_.aligned(g, o)) r += 1;
      return r;
    };
    std::sort(candidates_.begin(), candidates_.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (owner_[a] != owner_[b]) return owner_[a] < owner_[b];
      const std::uint32_t ra = rank(a), rb = rank(b);
      return ra != rb ? ra < rb : a < b;
    });

    // Givers: max-heap of (load, -member) over owners with candidates, each with its range.
    struct giver {
      std::uint32_t load, member, next, end;
    };
    auto giver_less = [](const giver& a, const giver& b) {
      return a.load != b.load ? a.load < b.load : a.member > b.member;
    };
    std::vector<giver> givers;
    for (std::size_t i = 0; i < candidates_.size();) {
      std::size_t j = i;
      const std::uint32_t o = owner_[candidates_[i]];
      while (j < candidates_.size() && owner_[candidates_[j]] == o) ++j;
      givers.push_back({load_[o], o, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
      i = j;
    }
    std::make_heap(givers.begin(), givers.end(), giver_less);

    // Receivers: min-heap of (load, member) over subscribers.
    using entry = std::pair<std::uint32_t, std::uint32_t>;
    std::vector<entry> receivers;
    receivers.reserve(subs.size());
    for (std::uint32_t m : subs) receivers.emplace_back(load_[m], m);
    std::make_heap(receivers.begin(), receivers.end(), std::greater<>());

    bool moved = false;
    while (!givers.empty()) {
      std::pop_heap(givers.begin(), givers.end(), giver_less);
      giver& from = givers.back();
      if (from.load != load_[from.member]) {  // stale: re-queue with the current load
        from.load = load_[from.member];
        std::push_heap(givers.begin(), givers.end(), giver_less);
        continue;
      }
      std::pop_heap(receivers.begin(), receivers.end(), std::greater<>());
      while (receivers.back().first != load_[receivers.back().second]) {
        receivers.back().first = load_[receivers.back().second];
        std::push_heap(receivers.begin(), receivers.end(), std::greater<>());
        std::pop_heap(receivers.begin(), receivers.end(), std::greater<>());
      }
      const std::uint32_t to = receivers.back().second;
      if (from.load < load_[to] + 2) break;

      // A same-rack partition for the receiver, if one is near the front of the giver's list.
      if (model_.rack_aware) {
        const std::uint32_t limit = std::min(from.end, from.next + 16);
        for (std::uint32_t i = from.next; i < limit; ++i) {
          if (rank(candidates_[i]) != rank(candidates_[from.next])) break;
          if (model_.aligned(candidates_[i], to)) {
            std::swap(candidates_[i], candidates_[from.next]);
            break;
          }
        }
      }
      const std::uint32_t g = candidates_[from.next++];
      --load_[from.member];
      give(g, to);
      moved = true;
      receivers.back().first = load_[to];
      std::push_heap(receivers.begin(), receivers.end(), std::greater<>());
      from.load = load_[from.member];
      if (from.next < from.end) {
        std::push_heap(givers.begin(), givers.end(), giver_less);
      } else {
        givers.pop_back();
      }
    }
    return moved;
  }

  const group_model& model_;
  const ownership& prior_;
  std::vector<std::uint32_t> owner_;
  std::vector<std::uint32_t> load_;  // partitions per member
  std::vector<std::uint32_t> bucket_begin_, bucket_, candidates_;
};

}  // namespace

std::vector<std::uint32_t> sticky_assign(const group_model& model, const ownership& prior) {
  if (model.uniform) return uniform_assign(model, prior);
  return general_assigner(model, prior).run();
}

}  // namespace kgroup::assign
