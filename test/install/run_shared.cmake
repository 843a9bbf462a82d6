# Packaging checks of the library alone (issue 18): builds kgroup as a shared library with tests
# and examples off, installs it into a scratch prefix, and checks what a user would meet:
# the soname, only kgroup's API exported (no Boost.Asio symbols), version.hpp and export.hpp,
# kgroup-consume installed and runnable, pkg-config, find_package(kgroup 0.2) accepted and
# find_package(kgroup 1.0) refused, an application with its own separately compiled Asio, and
# add_subdirectory(kgroup) giving the library alone.
# Arguments: SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

# No optimisation and no debug info (CMAKE_BUILD_TYPE=None): this build is only linked and run.
# Unity batches (KGROUP_UNITY_LIBRARY) for CI's time: the exports and the soname do not depend on
# how the sources were grouped.
run("configuring the shared library" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=ON -DKGROUP_BUILD_TESTS=OFF -DKGROUP_BUILD_EXAMPLES=OFF
    -DKGROUP_UNITY_LIBRARY=ON
    -DCMAKE_INSTALL_PREFIX=${prefix})
run("building the shared library" ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 2)
run("installing the shared library" ${CMAKE_COMMAND} --install ${WORK_DIR}/build)

set(lib ${prefix}/lib/libkgroup.so)
foreach(f ${lib} ${lib}.0.2 ${prefix}/include/kgroup/version.hpp ${prefix}/include/kgroup/export.hpp
        ${prefix}/include/kgroup/consumer.hpp ${prefix}/lib/pkgconfig/kgroup.pc
        ${prefix}/lib/cmake/kgroup/kgroupConfigVersion.cmake ${prefix}/bin/kgroup-consume)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
run("readelf" readelf -d ${lib})
if(NOT out MATCHES "SONAME[^\n]*libkgroup\\.so\\.0\\.2\\]")
  message(FATAL_ERROR "libkgroup.so has no soname libkgroup.so.0.2:\n${out}")
endif()
# No spdlog (issue 37: the stderr sink is written on fmt, and mapping libspdlog.so cost an idle
# Consumer's process ~230 KB resident).
if(out MATCHES "NEEDED[^\n]*spdlog")
  message(FATAL_ERROR "libkgroup.so needs spdlog:\n${out}")
endif()
# No Asio symbol at all, and no Boost symbol that is not weak: what Boost.System and
# Boost.Exception mark visible on purpose (typeinfo, vtables and inline members of exception and
# error-category types, weak or unique) merges with an application's own copies, as header-only
# Boost does across shared libraries; a strong definition would clash.
run("nm" nm -D -C --defined-only ${lib})
string(REGEX MATCHALL "[^\n]* [TDBR] [^\n]*boost::[^\n]*|[^\n]*boost::asio::[^\n]*" leaked "${out}")
if(leaked)
  list(LENGTH leaked n)
  list(SUBLIST leaked 0 5 some)
  message(FATAL_ERROR "libkgroup.so exports ${n} Asio or strong Boost symbols, e.g.:\n${some}")
endif()
if(NOT out MATCHES "kgroup::Consumer::poll" OR NOT out MATCHES "kgroup::library_version")
  message(FATAL_ERROR "libkgroup.so does not export the API")
endif()
message(STATUS "libkgroup.so: soname libkgroup.so.0.2, no Asio or strong Boost symbol exported")

run("the installed kgroup-consume --help" ${prefix}/bin/kgroup-consume --help)
if(NOT out MATCHES "usage: kgroup-consume")
  message(FATAL_ERROR "kgroup-consume --help printed no usage:\n${out}")
endif()

# pkg-config: the README's quick start compiles and links with the flags it gives.
readme_quick_start(${WORK_DIR}/readme/consume.cpp)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run("pkg-config" pkg-config --cflags --libs kgroup)
string(STRIP "${out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("compiling the README example with pkg-config's flags"
    c++ -std=c++20 ${WORK_DIR}/readme/consume.cpp -o ${WORK_DIR}/readme/consume ${pc_flags})
message(STATUS "pkg-config: ${pc_flags}")

# find_package(kgroup 0.2), an application with its own Asio, the README example.
run("configuring the application" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/install/app -B ${WORK_DIR}/app -G Ninja
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=None -DOWN_ASIO=ON
    -DREADME_CONSUME_SOURCE=${WORK_DIR}/readme/consume.cpp)
run("building the application" ${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run("running the application" ${WORK_DIR}/app/kgroup-install-check)
if(NOT out MATCHES "config ok")
  message(FATAL_ERROR "kgroup-install-check: ${out}")
endif()
run("running the application with its own Asio" ${WORK_DIR}/app/kgroup-own-asio)
if(NOT out MATCHES "own asio ok")
  message(FATAL_ERROR "kgroup-own-asio: ${out}")
endif()

# A version the package is not compatible with is refused.
file(WRITE ${WORK_DIR}/badver/CMakeLists.txt
  "cmake_minimum_required(VERSION 3.25)\nproject(badver LANGUAGES CXX)\nfind_package(kgroup 1.0 REQUIRED)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/badver -B ${WORK_DIR}/badver/build
                -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc)
  message(FATAL_ERROR "find_package(kgroup 1.0) accepted the 0.2 package")
endif()

# add_subdirectory(kgroup): the library only; tests, examples, the CLI and HTTP are off; the
# parent's build type and BUILD_SHARED_LIBS are left alone, and nothing of kgroup is installed.
file(WRITE ${WORK_DIR}/sub/CMakeLists.txt "cmake_minimum_required(VERSION 3.25)
project(sub LANGUAGES CXX)
add_subdirectory(${SOURCE_DIR} kgroup)
if(CMAKE_BUILD_TYPE)
  message(FATAL_ERROR \"add_subdirectory(kgroup) set the parent's CMAKE_BUILD_TYPE: \${CMAKE_BUILD_TYPE}\")
endif()
get_property(shared_cached CACHE BUILD_SHARED_LIBS PROPERTY TYPE)
if(shared_cached)
  message(FATAL_ERROR \"add_subdirectory(kgroup) created the parent's BUILD_SHARED_LIBS\")
endif()
if(KGROUP_INSTALL)
  message(FATAL_ERROR \"add_subdirectory(kgroup) installs kgroup by default\")
endif()
if(NOT TARGET kgroup::kgroup)
  message(FATAL_ERROR \"no kgroup::kgroup\")
endif()
foreach(t kgroup-integration-tests kgroup-unit-tests kgroup-consume kgroup-demo kgroup-mock kgroup_http)
  if(TARGET \${t})
    message(FATAL_ERROR \"add_subdirectory(kgroup) defined \${t}\")
  endif()
endforeach()
")
run("configuring a project that adds kgroup with add_subdirectory"
    ${CMAKE_COMMAND} -S ${WORK_DIR}/sub -B ${WORK_DIR}/sub/build -G Ninja)
file(READ ${WORK_DIR}/sub/build/kgroup/cmake_install.cmake sub_install)
if(sub_install MATCHES "file\\(INSTALL")
  message(FATAL_ERROR "add_subdirectory(kgroup): `cmake --install` of the parent would install kgroup's files")
endif()
message(STATUS "packaging checks passed")
