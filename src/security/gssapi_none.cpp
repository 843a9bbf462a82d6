// Built without MIT Kerberos (KGROUP_GSSAPI=OFF, or AUTO without libkrb5-dev): no Kerberos login.
// Config refuses sasl.mechanism=GSSAPI before this is reached; the message here says the same.
#include "security/gssapi.hpp"

namespace kgroup::security {

bool kerberos_available() noexcept {
  return false;
}

std::shared_ptr<kerberos_login> make_kerberos_login(const kerberos_settings&, std::string& error) {
  error =
      "sasl.mechanism=GSSAPI: this kgroup was built without Kerberos (MIT Kerberos' GSS-API, Debian's "
      "libkrb5-dev, "
      "was not found when it was built; rebuild with it, or with -DKGROUP_GSSAPI=ON to require it)";
  return nullptr;
}

}  // namespace kgroup::security
