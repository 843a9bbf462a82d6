// What the embedded HTTP endpoint serves, as pure functions of a metrics snapshot (no Beast, no
// Asio): the Prometheus text exposition for GET /metrics, the JSON document for GET /status and
// the dashboard page for GET / (with its script and style); and the group view's JSON for GET /group.
#pragma once

#include <string>
#include <string_view>

#include "base/group_view.hpp"
#include "kgroup/metrics.hpp"
#include "kgroup/share_consumer.hpp"

namespace kgroup::http {

/// Prometheus text format 0.0.4. Metric names mirror the Java client's consumer-coordinator,
/// fetch-manager and consumer metrics, prefixed `kgroup_` and suffixed with their unit
/// (`_ms`, `_seconds_ago`); every sample carries `client_id` and `group` labels.
std::string render_prometheus(const ConsumerMetrics& m);

/// The /status document: identity, assignment with positions and lag, poll timing against
/// max.poll.interval.ms, the consumer metrics and the last 50 rebalances. Always valid JSON:
/// strings escaped (control characters as \u00XX, invalid UTF-8 replaced by U+FFFD), non-finite
/// numbers as null.
std::string render_status_json(const ConsumerMetrics& m);

/// A share member's /metrics (ShareConsumer with observability.http.listen): the same labels,
/// `kgroup_share_` series for its deliveries, acknowledgements by type, requests, session resets
/// and the share session epoch per broker.
std::string render_share_prometheus(const ShareConsumerMetrics& m);

/// A share member's /status: identity, membership, assignment, the figures of /metrics and the
/// share session epoch per broker. Same escaping rules as render_status_json().
std::string render_share_status_json(const ShareConsumerMetrics& m);

/// The /group document: the group's state and protocol, its members with their partitions, and
/// per partition its owner, committed offset, end offset and lag (null where unknown), with the
/// view's age and the latest refresh's error. Same escaping rules as /status.
std::string render_group_json(const base::group_view& v);

/// The self-contained dashboard page (no external resources; nothing inline, so a strict
/// Content-Security-Policy allows it): its style is dashboard_style() (GET /dashboard.css), its
/// script dashboard_script() (GET /dashboard.js), which polls /status every second. Defined in
/// dashboard.cpp.
const std::string& dashboard_html();
const std::string& dashboard_script();
std::string_view dashboard_style();

/// A share member's dashboard page (GET / of a ShareConsumer's endpoint): the same style, its own
/// script (GET /dashboard.js), which polls the share member's /status every second and draws its
/// figures, their rates over time, the acknowledgement mix, the assignment and the share session
/// epoch per broker. Same rules (nothing external, nothing inline, text through textContent).
const std::string& share_dashboard_html();
const std::string& share_dashboard_script();

}  // namespace kgroup::http
