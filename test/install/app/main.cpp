// Built against the installed package only: public headers, kgroup::kgroup.
#include <atomic>
#include <cstring>
#include <iostream>

#include <kgroup/cluster.hpp>
#include <kgroup/config.hpp>
#include <kgroup/error.hpp>
#include <kgroup/log.hpp>
#include <kgroup/version.hpp>

static_assert(KGROUP_VERSION >= 100, "kgroup/version.hpp defines the version");

// A log sink with nothing but the public headers.
struct counting_sink : kgroup::LogSink {
  std::atomic<int> lines{0};
  kgroup::LogLevel min_level() const noexcept override { return kgroup::LogLevel::debug; }
  void log(kgroup::LogLevel, std::string_view) override { ++lines; }
};

int main() {
  // The headers and the library linked at run time are the same release.
  if (std::strcmp(kgroup::library_version(), KGROUP_VERSION_STRING) != 0) return 4;
  kgroup::Config cfg{{"bootstrap.servers", "127.0.0.1:1"}, {"group.id", "g"}};
  cfg.validate();
  try {
    kgroup::Config bad{{"sesion.timeout.ms", "1"}};
    return 1;
  } catch (const kgroup::Error& e) {
    if (std::string(e.what()).find("session.timeout.ms") == std::string::npos) return 2;
  }
  // Nothing listens on port 1: describe_cluster must fail cleanly with a kgroup::Error (and log
  // its attempts to the Config's sink).
  auto sink = std::make_shared<counting_sink>();
  cfg.set_log_sink(sink);
  try {
    kgroup::describe_cluster(cfg, std::chrono::milliseconds(300));
    return 3;
  } catch (const kgroup::Error& e) {
    if (sink->lines == 0) return 5;
    std::cout << "config ok (kgroup " << kgroup::library_version() << "); unreachable cluster reported: "
              << e.code().message() << "\n";
  }
  return 0;
}
