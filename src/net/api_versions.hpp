// The API version ranges a broker announced, and the choice of the version to use per request.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "kgroup/error.hpp"
#include "protocol/messages.hpp"

namespace kgroup::net {

class api_version_table {
 public:
  static constexpr std::size_t max_api_key = 128;

  void clear() noexcept { known_.fill(false); }
  void set(std::int16_t api_key, std::int16_t min, std::int16_t max) noexcept {
    if (api_key < 0 || static_cast<std::size_t>(api_key) >= max_api_key) return;
    known_[api_key] = true;
    min_[api_key] = min;
    max_[api_key] = max;
  }
  /// Fills from an ApiVersions response.
  void assign(const protocol::api_versions_response& r) noexcept {
    clear();
    for (const auto& k : r.api_keys) set(k.api_key, k.min_version, k.max_version);
  }
  bool supports(std::int16_t api_key) const noexcept {
    return api_key >= 0 && static_cast<std::size_t>(api_key) < max_api_key && known_[api_key];
  }
  std::int16_t broker_min(std::int16_t api_key) const noexcept { return supports(api_key) ? min_[api_key] : -1; }
  std::int16_t broker_max(std::int16_t api_key) const noexcept { return supports(api_key) ? max_[api_key] : -1; }

  /// Highest version both the broker and kgroup support for `lo..hi` of `api_key`, or -1.
  std::int16_t common(std::int16_t api_key, std::int16_t lo, std::int16_t hi) const noexcept {
    if (!supports(api_key)) return -1;
    std::int16_t top = std::min(hi, max_[api_key]);
    return top >= std::max(lo, min_[api_key]) ? top : -1;
  }

  /// Picks the version for `Request`; on no overlap returns client_errc::no_compatible_version
  /// (mismatch<Request>() describes it).
  template <class Request>
  std::error_code pick(std::int16_t& version) const noexcept {
    version = common(Request::api_key, Request::lowest_version, Request::highest_version);
    if (version < 0) return make_error_code(client_errc::no_compatible_version);
    return {};
  }

  /// "JoinGroupRequest: broker supports 0-1, kgroup 2-9" (or "broker does not support it").
  template <class Request>
  std::string mismatch() const {
    // fmt, not a chain of std::string operator+: GCC 12 at -O2 reports a false -Warray-bounds
    // in that chain once it is inlined (an error under KGROUP_WERROR, as in CI).
    if (!supports(Request::api_key)) return fmt::format("{}: broker does not support this API", Request::name);
    return fmt::format("{}: broker supports versions {}-{}, kgroup supports {}-{}", Request::name,
                       min_[Request::api_key], max_[Request::api_key], Request::lowest_version,
                       Request::highest_version);
  }

 private:
  std::array<bool, max_api_key> known_{};
  std::array<std::int16_t, max_api_key> min_{};
  std::array<std::int16_t, max_api_key> max_{};
};

}  // namespace kgroup::net
