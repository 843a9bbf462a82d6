// Checks an assignment before the leader sends it: the built-ins satisfy these by construction, a
// user's PartitionAssignor may not. Pure code.
#pragma once

#include <string>

#include "kgroup/assignor.hpp"

namespace kgroup::assign {

/// Returns an empty string if `assignment` is valid for this group, else what is wrong (the first
/// problem found). Valid means: each entry names a member of the group, no member twice; every
/// partition exists and goes to at most one member, and only to a member subscribed to its topic.
/// With RebalanceProtocol::cooperative also (KIP-429, as the Java client checks it): no partition
/// is both revoked from one member (owned but not assigned) and added to another (assigned but not
/// owned) in the same round. Throws std::invalid_argument for invalid metadata or duplicate member
/// ids, as PartitionAssignor::assign does.
std::string check_assignment(const ClusterMetadata& cluster, const GroupSubscription& group,
                             const GroupAssignment& assignment, RebalanceProtocol protocol);

}  // namespace kgroup::assign
