// A real MIT Kerberos KDC for the GSSAPI tests, started on loopback in a temporary directory:
// a realm made with kdb5_util, principals and keytabs made with kadmin.local, krb5kdc in the
// foreground on a free port, killed (and the directory removed) by the destructor. Debian's
// krb5-kdc and krb5-user (.ci/deps); missing() says when they are not installed, so a test can
// skip cleanly.
//
// The KDC's krb5.conf becomes the process's (KRB5_CONFIG, KRB5_KDC_PROFILE, and KRB5CCNAME for a
// ticket cache in its directory): every Kerberos user in the process (kgroup, the security front's
// acceptor, librdkafka's kinit) finds the realm there. So one test_kdc at a time per process;
// the variables are restored when it stops.
//
// Host names: krb5.conf turns DNS canonicalization and reverse lookups off, so a client that
// connects to "localhost" asks for kafka/localhost@REALM and one that connects to 127.0.0.1 for
// kafka/127.0.0.1@REALM; service_keytab() holds both.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kgroup::test {

class child_process;

struct test_kdc_options {
  std::string realm = "KGROUP.TEST";
  /// The longest ticket the KDC issues (its max_life), in seconds.
  int max_life_seconds = 10 * 3600;
};

class test_kdc {
 public:
  /// Why the tests cannot run here (a missing program, with the Debian package that has it), or
  /// nullopt.
  static std::optional<std::string> missing();

  /// Creates the realm and starts the KDC; throws std::runtime_error (with the tool's output) if
  /// it cannot.
  explicit test_kdc(test_kdc_options o = {});
  ~test_kdc();
  test_kdc(const test_kdc&) = delete;
  test_kdc& operator=(const test_kdc&) = delete;

  const std::string& realm() const { return options_.realm; }
  const std::string& dir() const { return dir_; }
  std::uint16_t port() const { return port_; }

  /// `name@REALM` for a bare name.
  std::string principal(const std::string& name) const;
  /// Adds a principal with a random key (and `max_life_seconds` if > 0).
  void add_principal(const std::string& name, int max_life_seconds = 0);
  /// Exports the current keys of `names` into a new keytab file `file` (in dir()); its path.
  std::string export_keytab(const std::string& file, const std::vector<std::string>& names);
  /// Gives `name` a new random key (a new key version): keytabs exported before no longer work.
  void change_key(const std::string& name);
  /// A keytab of the brokers' service principals kafka/localhost and kafka/127.0.0.1 (made once).
  std::string service_keytab();

  /// Stops the KDC (clients then find no KDC at its address); restart() starts it again on the
  /// same port with the same database.
  void stop();
  void restart();

  /// Runs kadmin.local with one query; its output. Throws when it fails.
  std::string kadmin(const std::string& query);

 private:
  std::string run(const std::string& program, const std::vector<std::string>& args);
  bool launch(std::string& err);

  test_kdc_options options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::string service_keytab_;
  std::unique_ptr<child_process> kdc_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_env_;
};

}  // namespace kgroup::test
