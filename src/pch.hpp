// Precompiled header of the kgroup library (CI time). The standard headers most
// sources include, fmt (base/log.hpp) and the Asio headers the network, consumer and HTTP
// sources share: parsed once per build instead of once per source. Beast stays out (one source
// uses it). A build-speed device only: every source still includes what it uses (a build with
// -DKGROUP_PCH=OFF checks that), and the fuzz build compiles the codec and assignor sources
// without it, so the rule that the pure layers include no Asio is still checked there.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
