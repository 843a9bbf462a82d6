// Long command-line options through getopt_long (glibc) for the development tools kgroup-mock and
// kgroup-demo. (kgroup-consume reads kcat's short flags too and builds on its own against an
// installed kgroup, so it has its own reading.)
#pragma once

#include <getopt.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kgroup::examples {

// Reads argv[1..argc) with getopt_long: `table` (ended by a null entry) holds the long options,
// `letters` the short ones in getopt's syntax ("h"). Calls on_option(code, value) for each option
// in order (value empty for a flag) until it returns false. A long option may be abbreviated to
// any unambiguous prefix; its value follows '=' or is the next argument. Throws
// std::invalid_argument naming the problem for an unknown or ambiguous option, a missing value, a
// value given to a flag, and any argument that is not an option; on_option's exceptions pass
// through. Not reentrant (getopt's globals).
inline void read_long_options(int argc, char** argv, const char* letters, const ::option* table,
                              const std::function<bool(int code, const std::string& value)>& on_option) {
  // The option as messages name it: "--brokers" (in full, also when abbreviated), or "-h".
  const auto name_of = [&](int code) {
    for (const ::option* o = table; o->name != nullptr; ++o) {
      if (o->val == code) return "--" + std::string(o->name);
    }
    return "-" + std::string(1, static_cast<char>(code));
  };
  // "-": other arguments come back in place as code 1 (and are refused there); ":": a missing
  // value is ':'. With opterr = 0 getopt prints nothing: the messages are ours. optind = 0 makes
  // glibc start over completely.
  const std::string optstring = std::string("-:") + letters;
  opterr = 0;
  optind = 0;
  for (;;) {
    const int at = std::max(optind, 1);  // the argument getopt reads next (kept in order)
    const std::string_view arg = at < argc ? argv[at] : "";
    const int code = ::getopt_long(argc, argv, optstring.c_str(), table, nullptr);
    if (code == -1) break;
    if (code == 1) throw std::invalid_argument("unexpected argument \"" + std::string(optarg) + "\"");
    if (code == ':') throw std::invalid_argument(name_of(optopt) + " needs a value");
    if (code != '?') {
      if (!on_option(code, optarg != nullptr ? optarg : "")) return;
      continue;
    }
    // optopt names a known long option only when it was given a value it does not take.
    if (optopt != 0 && arg.starts_with("--")) {
      throw std::invalid_argument(name_of(optopt) + " takes no value");
    }
    if (optopt != 0) throw std::invalid_argument("unknown option \"" + name_of(optopt) + "\"");
    const std::string_view name = arg.substr(0, arg.find('='));
    std::string candidates;
    for (const ::option* o = table; o->name != nullptr; ++o) {
      if (!std::string_view(o->name).starts_with(name.substr(2))) continue;
      candidates += (candidates.empty() ? "--" : ", --") + std::string(o->name);
    }
    if (candidates.find(',') != std::string::npos) {
      throw std::invalid_argument("option \"" + std::string(name) + "\" is ambiguous (" + candidates + ")");
    }
    throw std::invalid_argument("unknown option \"" + std::string(name) + "\"");
  }
  // After "--".
  if (optind < argc) throw std::invalid_argument("unexpected argument \"" + std::string(argv[optind]) + "\"");
}

// The security protocols and SASL mechanisms both tools serve through test/support/secure_front.hpp.
inline const std::vector<std::string_view> security_protocols{"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                              "SASL_SSL"};
inline const std::vector<std::string_view> sasl_mechanisms{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                                           "OAUTHBEARER"};

// `value` if it is one of `allowed`; else std::invalid_argument naming them.
inline std::string one_of(std::string_view option, const std::string& value,
                          const std::vector<std::string_view>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string names;
  for (const auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
  throw std::invalid_argument(std::string(option) + " must be one of " + names + ", not \"" + value + "\"");
}

}  // namespace kgroup::examples
