// standalone_coordinator: FindCoordinator for commits outside a subscription.
#include "fetch/standalone_coordinator.hpp"

namespace kgroup::fetch {

void standalone_coordinator::need(bool failed) {
  if (failed && lookup_.known()) lookup_.forget();
  if (group_id_.empty() || !lookup_.start()) return;
  cluster_->find_coordinator(group_id_, request_timeout_, [this](std::error_code ec, std::int32_t node) {
    if (ec) {
      lookup_.forget();
    } else {
      lookup_.found(node);
    }
    on_answer_();
  });
}

}  // namespace kgroup::fetch
