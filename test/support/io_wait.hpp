// Driving an io_context on the test thread until something happened: the helpers the
// connection-level integration tests share.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

namespace kgroup::test {

/// Runs `io` until `done()` is true or `limit` passes; returns `done()`. An io_context that ran
/// out of work (after a close) is restarted, so later work still runs.
template <class Pred>
bool run_until(boost::asio::io_context& io, Pred done,
               std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return done();
}

/// Runs `io` for `d`.
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  (void)run_until(
      io, [&] { return std::chrono::steady_clock::now() >= until; }, d + std::chrono::seconds(5));
}

/// Refreshes the metadata of `c` (a net::cluster: `topics`, or all) and runs `io` until the
/// refresh ends; its error. Fails the test if it does not end.
template <class Cluster>
std::error_code refresh(boost::asio::io_context& io, Cluster& c,
                        std::optional<std::vector<std::string>> topics = std::nullopt,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  bool done = false;
  std::error_code result;
  c.refresh_metadata(std::move(topics), timeout, [&](std::error_code ec) {
    result = ec;
    done = true;
  });
  REQUIRE(run_until(
      io, [&] { return done; }, timeout + std::chrono::seconds(5)));
  return result;
}

}  // namespace kgroup::test
