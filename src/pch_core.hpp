// Precompiled header of the core layers (protocol, assign, base, group): standard headers only.
// No Asio, no logging: those layers must compile without them (see src/CMakeLists.txt, Layers).
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
