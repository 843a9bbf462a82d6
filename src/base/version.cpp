#include "kgroup/version.hpp"

namespace kgroup {

const char* library_version() noexcept {
  return KGROUP_VERSION_STRING;
}

}  // namespace kgroup
