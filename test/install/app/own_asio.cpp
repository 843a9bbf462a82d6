// An application that compiles Boost.Asio itself (BOOST_ASIO_SEPARATE_COMPILATION and
// asio/impl/src.hpp, so it defines every Asio symbol) and uses kgroup, which compiles its own
// Asio inside the shared library: nothing may clash at link or at run time.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <iostream>

#include <kgroup/cluster.hpp>
#include <kgroup/config.hpp>
#include <kgroup/error.hpp>

int main() {
  boost::asio::io_context io;
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(10));
  bool fired = false;
  timer.async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
  // kgroup runs its own io_context on its own thread meanwhile.
  kgroup::Config cfg{{"bootstrap.servers", "127.0.0.1:1"}};
  try {
    kgroup::describe_cluster(cfg, std::chrono::milliseconds(300));
    return 1;
  } catch (const kgroup::Error& e) {
    io.run();
    if (!fired) return 2;
    std::cout << "own asio ok; kgroup reported: " << e.code().message() << "\n";
  }
  return 0;
}
