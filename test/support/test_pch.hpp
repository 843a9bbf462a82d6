// Precompiled header of the test binaries (issue 12: CI time). Only headers that nearly every
// test file includes anyway and that cost the most to parse: Catch2's single header (about 17k
// lines) and the standard library. Asio and Beast stay out: only a few test files include them
// and the PCH would make every other file load them too.
// Nothing here may depend on a macro that a test file defines before its includes.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
