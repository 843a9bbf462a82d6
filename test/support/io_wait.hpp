// Driving an io_context on the test thread until something happened: the one helper the
// connection-level integration tests share.
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>

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

}  // namespace kgroup::test
