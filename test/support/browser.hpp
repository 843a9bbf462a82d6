// A real browser for tests: Debian's chromium in headless mode loads a URL, runs its scripts for
// a virtual-time budget and prints the resulting DOM. Used by the dashboard tests; the URL can be
// any running endpoint (a test server or a live Consumer's).
//
// dump_dom() throws std::runtime_error with a clear message when chromium is not installed (the
// tests must fail, not skip: .ci/deps installs it), does not finish in time, or fails.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "find_program.hpp"

extern char** environ;

namespace kgroup::test {

/// The chromium binary: $KGROUP_CHROMIUM if set, else `chromium` or `chromium-browser` on PATH.
/// Empty when none is found.
inline std::string find_chromium() {
  if (const char* env = std::getenv("KGROUP_CHROMIUM"); env != nullptr && *env != '\0') return env;
  for (const char* name : {"chromium", "chromium-browser"}) {
    if (auto found = find_on_path(name); !found.empty()) return found;
  }
  return {};
}

/// Loads `url` in headless chromium and returns the DOM after `virtual_time_budget_ms` of
/// (virtual) page time; kills the browser after `timeout` of real time.
inline std::string dump_dom(const std::string& url, std::chrono::seconds timeout = std::chrono::seconds(90),
                            int virtual_time_budget_ms = 5000) {
  const std::string binary = find_chromium();
  if (binary.empty()) {
    throw std::runtime_error(
        "chromium not found (looked for chromium and chromium-browser on PATH, and $KGROUP_CHROMIUM); "
        "install Debian's chromium package (.ci/deps does) to run the dashboard tests");
  }
  char profile_template[] = "/tmp/kgroup-chromium-XXXXXX";
  if (::mkdtemp(profile_template) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp for the chromium profile");
  }
  const std::filesystem::path profile = profile_template;
  struct cleanup {
    std::filesystem::path dir;
    ~cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_profile{profile};

  std::vector<std::string> args = {binary,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--user-data-dir=" + profile.string(),
                                   "--virtual-time-budget=" + std::to_string(virtual_time_budget_ms),
                                   "--dump-dom",
                                   url};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::system_error(rc, std::generic_category(), "starting " + binary);
  }

  // Read both pipes until the browser exits (its helper processes may keep the pipes open, so
  // EOF alone is not the end) or the deadline passes.
  std::string dom, errors;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool exited = false;
  const auto read_available = [&](int fd, std::string& into) {
    char buf[65536];
    const auto n = ::read(fd, buf, sizeof buf);
    if (n > 0) into.append(buf, static_cast<std::size_t>(n));
    return n;
  };
  bool out_open = true, err_open = true;
  while (!exited) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(out[0]);
      ::close(err[0]);
      throw std::runtime_error(
          "chromium did not finish within " + std::to_string(timeout.count()) + " s loading " + url +
          "; its stderr: " + errors.substr(errors.size() > 2000 ? errors.size() - 2000 : 0));
    }
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, 100) > 0) {
      if (out_open && (fds[0].revents & (POLLIN | POLLHUP)) != 0 && read_available(out[0], dom) <= 0)
        out_open = false;
      if (err_open && (fds[1].revents & (POLLIN | POLLHUP)) != 0 && read_available(err[0], errors) <= 0)
        err_open = false;
    }
    if (::waitpid(pid, &status, WNOHANG) == pid) exited = true;
  }
  // The browser is gone; take what is still buffered without waiting for helpers.
  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  while (out_open && read_available(out[0], dom) > 0) {
  }
  while (err_open && read_available(err[0], errors) > 0) {
  }
  ::close(out[0]);
  ::close(err[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || dom.empty()) {
    throw std::runtime_error(
        "chromium failed loading " + url + " (status " + std::to_string(status) +
        "); its stderr: " + errors.substr(errors.size() > 2000 ? errors.size() - 2000 : 0));
  }
  return dom;
}

}  // namespace kgroup::test
