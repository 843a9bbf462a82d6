# Finds kgroup's link dependencies (all Debian 12 packages). Used by the build and by the
# installed package config, so an application's find_package(kgroup) resolves the same targets.
# Except Threads, all are private: the static library's link line names them ($<LINK_ONLY:...>),
# no public header includes them (fmt and spdlog neither: kgroup/log.hpp is a plain interface).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(fmt)
find_dependency(spdlog)
find_dependency(ZLIB)
find_dependency(OpenSSL)

foreach(_kgroup_dep IN ITEMS lz4 zstd snappy)
  if(NOT TARGET kgroup_dep::${_kgroup_dep})
    find_library(KGROUP_${_kgroup_dep}_LIBRARY NAMES ${_kgroup_dep})
    if(NOT KGROUP_${_kgroup_dep}_LIBRARY)
      message(FATAL_ERROR "kgroup needs lib${_kgroup_dep} (Debian: lib${_kgroup_dep}-dev)")
    endif()
    add_library(kgroup_dep::${_kgroup_dep} UNKNOWN IMPORTED)
    set_target_properties(kgroup_dep::${_kgroup_dep} PROPERTIES
      IMPORTED_LOCATION ${KGROUP_${_kgroup_dep}_LIBRARY})
  endif()
endforeach()
