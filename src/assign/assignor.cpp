// The public PartitionAssignor defaults and the four built-ins. Each built-in is a thin shell: build
// the dense model, run the algorithm, turn owners back into the public result.
#include "kgroup/assignor.hpp"

#include "assign/model.hpp"
#include "assign/sticky_user_data.hpp"

namespace kgroup {

std::vector<RebalanceProtocol> PartitionAssignor::supported_protocols() const {
  return {RebalanceProtocol::eager};
}

std::optional<std::vector<std::uint8_t>> PartitionAssignor::user_data(const MemberState&) const {
  return std::nullopt;
}

namespace {

// The stateless assignors: a name, whether the model carries racks, and the placement.
class plain_assignor final : public PartitionAssignor {
 public:
  using place_fn = std::vector<std::uint32_t> (*)(const assign::group_model&);
  plain_assignor(const char* name, bool want_racks, place_fn place) : name_(name), want_racks_(want_racks), place_(place) {}
  std::string name() const override { return name_; }
  GroupAssignment assign(const ClusterMetadata& cluster, const GroupSubscription& group) const override {
    const auto model = assign::build_model(cluster, group, want_racks_);
    return assign::build_assignment(model, place_(model));
  }

 private:
  const char* name_;
  bool want_racks_;  // rack-aware placement (range only, as in Java)
  place_fn place_;
};

// Eager: members revoke everything before rejoining, so their subscriptions own nothing; what
// they owned travels in StickyAssignorUserData, as with Java's StickyAssignor.
class sticky_assignor final : public PartitionAssignor {
 public:
  std::string name() const override { return "sticky"; }
  std::optional<std::vector<std::uint8_t>> user_data(const MemberState& self) const override {
    // Like Java: nothing until the member had an assignment.
    if (self.generation < 0 && self.owned_partitions.empty()) return std::nullopt;
    return assign::encode_sticky_user_data(self.owned_partitions, self.generation);
  }
  GroupAssignment assign(const ClusterMetadata& cluster, const GroupSubscription& group) const override {
    const auto model = assign::build_model(cluster, group, true);
    const auto prior = assign::resolve_claims(model, assign::claim_source::user_data_then_owned);
    return assign::build_assignment(model, assign::sticky_assign(model, prior));
  }
};

class cooperative_sticky_assignor final : public PartitionAssignor {
 public:
  std::string name() const override { return "cooperative-sticky"; }
  std::vector<RebalanceProtocol> supported_protocols() const override {
    return {RebalanceProtocol::cooperative, RebalanceProtocol::eager};
  }
  // The generation alone, as Java writes it: leaders that only read Subscription v0/v1 find it
  // here; ownership itself is in the subscription's owned partitions.
  std::optional<std::vector<std::uint8_t>> user_data(const MemberState& self) const override {
    return assign::encode_generation_user_data(self.generation);
  }
  GroupAssignment assign(const ClusterMetadata& cluster, const GroupSubscription& group) const override {
    const auto model = assign::build_model(cluster, group, true);
    const auto prior = assign::resolve_claims(model, assign::claim_source::owned_then_user_data);
    auto owner = assign::sticky_assign(model, prior);
    assign::withhold_transfers(prior, owner);
    return assign::build_assignment(model, owner);
  }
};

}  // namespace

std::shared_ptr<PartitionAssignor> make_range_assignor() {
  return std::make_shared<plain_assignor>("range", true, &assign::range_assign);
}
std::shared_ptr<PartitionAssignor> make_roundrobin_assignor() {
  return std::make_shared<plain_assignor>("roundrobin", false, &assign::roundrobin_assign);
}
std::shared_ptr<PartitionAssignor> make_sticky_assignor() { return std::make_shared<sticky_assignor>(); }
std::shared_ptr<PartitionAssignor> make_cooperative_sticky_assignor() {
  return std::make_shared<cooperative_sticky_assignor>();
}

std::shared_ptr<PartitionAssignor> make_assignor(std::string_view name) {
  if (name == "range") return make_range_assignor();
  if (name == "roundrobin") return make_roundrobin_assignor();
  if (name == "sticky") return make_sticky_assignor();
  if (name == "cooperative-sticky") return make_cooperative_sticky_assignor();
  return nullptr;
}

}  // namespace kgroup
