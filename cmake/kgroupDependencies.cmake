# Finds kgroup's link dependencies (all Debian 12 packages). Used by the build and by the
# installed package config, so an application's find_package(kgroup) resolves the same targets.
# Except Threads, all are private: the static library's link line names them ($<LINK_ONLY:...>),
# no public header includes them (fmt neither: kgroup/log.hpp is a plain interface).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(fmt)
find_dependency(ZLIB)
# 3.0: the SCRAM and TLS code calls OpenSSL 3.0's API (EVP_MD_get_size, ...).
find_dependency(OpenSSL 3.0)

# The compression libraries, each as kgroup_dep::<name> (the name the exported link line uses):
# from the CMake package the library ships where it ships one (zstd, Snappy), else from its
# pkg-config file (lz4), else by its file name (a system without either).
function(_kgroup_compression_dep name)
  if(TARGET kgroup_dep::${name})
    return()
  endif()
  set(found "")
  if(name STREQUAL "zstd")
    find_package(zstd CONFIG QUIET)
    foreach(t zstd::libzstd_shared zstd::libzstd_static zstd::libzstd)
      if(NOT found AND TARGET ${t})
        set(found ${t})
      endif()
    endforeach()
  elseif(name STREQUAL "snappy")
    find_package(Snappy CONFIG QUIET)
    if(TARGET Snappy::snappy)
      set(found Snappy::snappy)
    endif()
  endif()
  if(NOT found)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      set(module lib${name})
      if(name STREQUAL "snappy")
        set(module snappy)
      endif()
      pkg_check_modules(KGROUP_PC_${name} QUIET IMPORTED_TARGET ${module})
      if(TARGET PkgConfig::KGROUP_PC_${name})
        set(found PkgConfig::KGROUP_PC_${name})
      endif()
    endif()
  endif()
  if(NOT found)
    find_library(KGROUP_${name}_LIBRARY NAMES ${name})
    if(NOT KGROUP_${name}_LIBRARY)
      message(FATAL_ERROR "kgroup needs lib${name} (Debian: lib${name}-dev)")
    endif()
    add_library(kgroup_dep_${name}_file UNKNOWN IMPORTED)
    set_target_properties(kgroup_dep_${name}_file PROPERTIES IMPORTED_LOCATION ${KGROUP_${name}_LIBRARY})
    set(found kgroup_dep_${name}_file)
  endif()
  add_library(kgroup_dep::${name} INTERFACE IMPORTED)
  set_target_properties(kgroup_dep::${name} PROPERTIES INTERFACE_LINK_LIBRARIES ${found})
endfunction()

foreach(_kgroup_dep IN ITEMS lz4 zstd snappy)
  _kgroup_compression_dep(${_kgroup_dep})
endforeach()

# MIT Kerberos' GSS-API (sasl.mechanism=GSSAPI), when kgroup was built with it
# (KGROUP_WITH_GSSAPI, set by the build or by the installed kgroupConfig.cmake); an empty target
# otherwise, so the link line is the same either way.
if(NOT TARGET kgroup_dep::gssapi)
  add_library(kgroup_dep::gssapi INTERFACE IMPORTED)
  if(KGROUP_WITH_GSSAPI)
    find_package(PkgConfig REQUIRED)
    pkg_check_modules(KGROUP_PC_gssapi REQUIRED IMPORTED_TARGET krb5-gssapi krb5)
    set_target_properties(kgroup_dep::gssapi PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::KGROUP_PC_gssapi)
  endif()
endif()
