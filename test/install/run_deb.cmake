# The .deb (CPack, issue 36 item 5): builds it from BUILD_DIR's install, checks its fields and
# files, asks apt whether its dependencies resolve (a simulated install: the machine is left as
# it was), unpacks it into a scratch root, and builds the README's quick start against that root
# with pkg-config and with find_package(kgroup), as a user of the package would.
# Arguments: SOURCE_DIR, BUILD_DIR, WORK_DIR, VERSION.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

run("cpack" cpack -G DEB --config ${BUILD_DIR}/CPackConfig.cmake -B ${WORK_DIR}/pkg)
file(GLOB debs ${WORK_DIR}/pkg/*.deb)
list(LENGTH debs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "cpack made ${n} .deb files: ${debs}")
endif()
set(deb ${debs})
message(STATUS "package: ${deb}")

run("dpkg-deb --field" dpkg-deb --field ${deb} Package Version Depends)
if(NOT out MATCHES "Package: kgroup\n" OR NOT out MATCHES "Version: ${VERSION}\n")
  message(FATAL_ERROR "the package's name or version is not kgroup ${VERSION}:\n${out}")
endif()
foreach(dep libssl-dev libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev libspdlog-dev libfmt-dev "libc6 ")
  if(NOT out MATCHES "${dep}")
    message(FATAL_ERROR "the package does not depend on ${dep}:\n${out}")
  endif()
endforeach()

run("dpkg-deb --contents" dpkg-deb --contents ${deb})
foreach(f usr/lib/libkgroup.a usr/include/kgroup/consumer.hpp usr/include/kgroup/version.hpp
        usr/lib/cmake/kgroup/kgroupConfig.cmake usr/lib/cmake/kgroup/kgroupConfigVersion.cmake
        usr/lib/pkgconfig/kgroup.pc usr/bin/kgroup-consume)
  if(NOT out MATCHES " \\./${f}\n")
    message(FATAL_ERROR "not in the package: ${f}\n${out}")
  endif()
endforeach()
# Nothing of the tests or the librdkafka tools.
if(out MATCHES "rdkafka|kgroup-mock|kgroup-demo|catch2|kgroup-unit-tests")
  message(FATAL_ERROR "the package holds test or demo files:\n${out}")
endif()

# No debug sections in the packaged static library (cmake/cpack_strip_static.cmake).
set(root ${WORK_DIR}/root)
run("dpkg-deb --extract" dpkg-deb --extract ${deb} ${root})
run("readelf" readelf -S -W ${root}/usr/lib/libkgroup.a)
if(out MATCHES "\\.debug_info")
  message(FATAL_ERROR "the packaged libkgroup.a carries debug information")
endif()

# apt resolves every dependency from the configured sources (simulated: nothing is installed).
run("apt-get install --simulate" apt-get install --simulate --no-install-recommends ${deb})
if(NOT out MATCHES "Inst kgroup ")
  message(FATAL_ERROR "apt would not install the package:\n${out}")
endif()

# Unpacked into a scratch root: the CLI runs, and the quick start builds with its pkg-config file
# (relocatable: its prefix follows the file) and with its CMake package.
run("kgroup-consume --help from the package" ${root}/usr/bin/kgroup-consume --help)
if(NOT out MATCHES "usage: kgroup-consume")
  message(FATAL_ERROR "the packaged kgroup-consume printed no usage:\n${out}")
endif()

readme_quick_start(${WORK_DIR}/readme/consume.cpp)
set(ENV{PKG_CONFIG_PATH} ${root}/usr/lib/pkgconfig)
run("pkg-config" pkg-config --cflags --libs --static kgroup)
string(STRIP "${out}" pc_flags)
if(NOT pc_flags MATCHES "-I${root}/usr/lib/pkgconfig/\\.\\./\\.\\./include|-I${root}/usr/include")
  message(FATAL_ERROR "pkg-config's include path is not the unpacked package's: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("compiling the README's quick start with the package's pkg-config flags"
    c++ -std=c++20 ${WORK_DIR}/readme/consume.cpp -o ${WORK_DIR}/readme/consume ${pc_flags})

run("configuring an application with find_package(kgroup) from the package"
    ${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/install/app -B ${WORK_DIR}/app -G Ninja
    -DCMAKE_PREFIX_PATH=${root}/usr -DCMAKE_BUILD_TYPE=None -DREADME_CONSUME_SOURCE=${WORK_DIR}/readme/consume.cpp)
run("building it" ${CMAKE_COMMAND} --build ${WORK_DIR}/app)
run("running it" ${WORK_DIR}/app/kgroup-install-check)
if(NOT out MATCHES "config ok \\(kgroup ${VERSION}\\)")
  message(FATAL_ERROR "kgroup-install-check against the package: ${out}")
endif()
message(STATUS "the .deb checks passed")
