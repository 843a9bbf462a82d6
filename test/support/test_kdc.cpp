#include "test_kdc.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "child_process.hpp"

namespace kgroup::test {

namespace {

using namespace std::chrono_literals;

// Where Debian puts the tools, by package.
const std::vector<std::pair<std::string, std::string>>& tools() {
  static const std::vector<std::pair<std::string, std::string>> t = {
      {"/usr/sbin/krb5kdc", "krb5-kdc"},
      {"/usr/sbin/kdb5_util", "krb5-kdc"},
      {"/usr/sbin/kadmin.local", "krb5-admin-server"},
      {"/usr/bin/kinit", "krb5-user"},
  };
  return t;
}

// A loopback port nobody listens on now (TCP; the KDC takes the same UDP port).
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("test_kdc: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("test_kdc: cannot find a free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool accepts_connections(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error("test_kdc: cannot write " + path);
}

}  // namespace

std::optional<std::string> test_kdc::missing() {
  for (const auto& [path, package] : tools()) {
    if (::access(path.c_str(), X_OK) != 0) return path + " is missing (Debian package " + package + ")";
  }
  return std::nullopt;
}

test_kdc::test_kdc(test_kdc_options o) : options_(std::move(o)) {
  if (auto why = missing()) throw std::runtime_error("test_kdc: " + *why);
  std::string tmpl = (std::filesystem::temp_directory_path() / "kgroup-kdc-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("test_kdc: mkdtemp failed");
  dir_ = tmpl;
  const std::string& realm = options_.realm;
  const std::string krb5_conf = dir_ + "/krb5.conf";
  const std::string kdc_conf = dir_ + "/kdc.conf";
  for (const char* name :
       {"KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME", "KRB5_KTNAME", "KRB5_CLIENT_KTNAME"}) {
    const char* v = std::getenv(name);
    saved_env_.emplace_back(name, v != nullptr ? std::optional<std::string>(v) : std::nullopt);
  }
  ::setenv("KRB5_CONFIG", krb5_conf.c_str(), 1);
  ::setenv("KRB5_KDC_PROFILE", kdc_conf.c_str(), 1);
  ::setenv("KRB5CCNAME", ("FILE:" + dir_ + "/ccache").c_str(), 1);
  ::unsetenv("KRB5_KTNAME");
  ::unsetenv("KRB5_CLIENT_KTNAME");

  for (int attempt = 0;; ++attempt) {
    port_ = free_port();
    const std::string port = std::to_string(port_);
    std::string kdc_text = "[kdcdefaults]\n";
    kdc_text += " kdc_listen = 127.0.0.1:" + port + "\n";
    kdc_text += " kdc_tcp_listen = 127.0.0.1:" + port + "\n";
    kdc_text += "[realms]\n " + realm + " = {\n";
    kdc_text += "  database_name = " + dir_ + "/principal\n";
    kdc_text += "  key_stash_file = " + dir_ + "/stash\n";
    kdc_text += "  acl_file = " + dir_ + "/kadm5.acl\n";
    kdc_text += "  max_life = " + std::to_string(options_.max_life_seconds) + "s\n";
    kdc_text += "  max_renewable_life = 0\n";
    kdc_text += "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n";
    kdc_text += " }\n";
    kdc_text += "[logging]\n kdc = FILE:" + dir_ + "/kdc.log\n";
    write_file(kdc_conf, kdc_text);
    std::string conf = "[libdefaults]\n";
    conf += " default_realm = " + realm + "\n";
    conf += " dns_lookup_kdc = false\n";
    conf += " dns_lookup_realm = false\n";
    conf += " dns_canonicalize_hostname = false\n";
    conf += " rdns = false\n";
    conf += " udp_preference_limit = 1\n";  // TCP: the KDC's UDP port may be taken by then
    conf += " kdc_timeout = 2000\n";
    conf += " max_retries = 1\n";
    // A second of clock skew, not five minutes: MIT's acceptor adds the skew to a context's
    // lifetime, which would hide a short ticket's end.
    conf += " clockskew = 1\n";
    conf += "[realms]\n " + realm + " = {\n  kdc = 127.0.0.1:" + port + "\n }\n";
    conf += "[domain_realm]\n localhost = " + realm + "\n 127.0.0.1 = " + realm + "\n";
    write_file(krb5_conf, conf);
    write_file(dir_ + "/kadm5.acl", "");
    if (attempt == 0) run("/usr/sbin/kdb5_util", {"create", "-s", "-r", realm, "-P", "kdc-master-password"});
    std::string err;
    if (launch(err)) break;
    if (attempt == 2) throw std::runtime_error("test_kdc: krb5kdc did not start: " + err);
  }
}

bool test_kdc::launch(std::string& err) {
  kdc_ = std::make_unique<child_process>("/usr/sbin/krb5kdc",
                                         std::vector<std::string>{"-n", "-r", options_.realm},
                                         [](const std::string&, bool) {});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (accepts_connections(port_)) return true;
    if (kdc_->wait_exit(20ms)) break;  // it ended: the port was taken after all
  }
  err = kdc_->stderr_text();
  kdc_.reset();
  return false;
}

void test_kdc::stop() {
  if (!kdc_) return;
  kdc_->send(SIGTERM);
  (void)kdc_->wait_exit(3000ms);
  kdc_.reset();
}

void test_kdc::restart() {
  stop();
  std::string err;
  if (!launch(err)) throw std::runtime_error("test_kdc: krb5kdc did not start again: " + err);
}

test_kdc::~test_kdc() {
  stop();
  for (const auto& [name, value] : saved_env_) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string test_kdc::run(const std::string& program, const std::vector<std::string>& args) {
  child_process p(program, args, [](const std::string&, bool) {});
  const auto rc = p.wait_exit(30s);
  if (rc != 0) {
    throw std::runtime_error("test_kdc: " + program + " failed (" + (rc ? std::to_string(*rc) : "timeout") +
                             "): " + p.stdout_text() + p.stderr_text());
  }
  return p.stdout_text() + p.stderr_text();
}

std::string test_kdc::kadmin(const std::string& query) {
  std::string out = run("/usr/sbin/kadmin.local", {"-r", options_.realm, "-q", query});
  return out;
}

std::string test_kdc::principal(const std::string& name) const {
  return name.find('@') == std::string::npos ? name + "@" + options_.realm : name;
}

void test_kdc::add_principal(const std::string& name, int max_life_seconds) {
  std::string q = "addprinc -randkey";
  if (max_life_seconds > 0) q += " -maxlife \"" + std::to_string(max_life_seconds) + " seconds\"";
  const std::string out = kadmin(q + " " + principal(name));
  if (out.find("created") == std::string::npos && out.find("already exists") == std::string::npos) {
    throw std::runtime_error("test_kdc: addprinc " + name + ": " + out);
  }
}

std::string test_kdc::export_keytab(const std::string& file, const std::vector<std::string>& names) {
  const std::string path = dir_ + "/" + file;
  for (const auto& n : names) kadmin("ktadd -k " + path + " -norandkey " + principal(n));
  if (!std::filesystem::exists(path)) throw std::runtime_error("test_kdc: no keytab " + path);
  return path;
}

void test_kdc::change_key(const std::string& name) {
  kadmin("cpw -randkey " + principal(name));
}

std::string test_kdc::service_keytab() {
  if (service_keytab_.empty()) {
    add_principal("kafka/localhost");
    add_principal("kafka/127.0.0.1");
    service_keytab_ = export_keytab("kafka.keytab", {"kafka/localhost", "kafka/127.0.0.1"});
  }
  return service_keytab_;
}

}  // namespace kgroup::test
