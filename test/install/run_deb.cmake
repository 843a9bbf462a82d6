# The .deb (CPack, issue 36 item 5): builds it from BUILD_DIR's install, checks its fields and
# files, asks apt whether its dependencies resolve from the configured sources (simulated), installs
# it with dpkg into a scratch root (a real install, checked against this machine's package
# database; the machine is left as it was), builds the README's quick start against that root with
# pkg-config and with find_package(kgroup), as a user of the package would, and removes it again.
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
foreach(dep libssl-dev libzstd-dev liblz4-dev libsnappy-dev zlib1g-dev libfmt-dev "libc6 ")
  if(NOT out MATCHES "${dep}")
    message(FATAL_ERROR "the package does not depend on ${dep}:\n${out}")
  endif()
endforeach()
# Not on spdlog: the stderr sink is written on fmt since issue 37.
if(out MATCHES "spdlog")
  message(FATAL_ERROR "the package depends on spdlog:\n${out}")
endif()

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

# Installed by dpkg into a scratch root, without chroot (dpkg --root): the root's package
# database starts as a copy of this machine's (its status and file lists), so dpkg checks the
# package's Depends against what is really installed here and its files against every installed
# package's, runs the whole unpack and configure, and records it; the machine itself is left as it
# was. (Triggers are not run: the root has no ldconfig, and the package ships no shared library.)
set(root ${WORK_DIR}/root)
set(admin ${root}/var/lib/dpkg)
file(MAKE_DIRECTORY ${admin}/info ${admin}/updates)
file(COPY /var/lib/dpkg/status DESTINATION ${admin})
file(GLOB host_lists /var/lib/dpkg/info/*.list)
file(COPY ${host_lists} DESTINATION ${admin}/info)
file(TOUCH ${admin}/available)
run("dpkg --root --install" dpkg --root=${root} --no-triggers --install ${deb})
run("dpkg --root --status" dpkg --root=${root} --status kgroup)
if(NOT out MATCHES "Status: install ok installed")
  message(FATAL_ERROR "dpkg did not record kgroup as installed in the scratch root:\n${out}")
endif()
# No debug sections in the packaged static library (cmake/cpack_strip_static.cmake).
run("readelf" readelf -S -W ${root}/usr/lib/libkgroup.a)
if(out MATCHES "\\.debug_info")
  message(FATAL_ERROR "the packaged libkgroup.a carries debug information")
endif()

# apt resolves every dependency from the configured sources (simulated: nothing is installed).
run("apt-get install --simulate" apt-get install --simulate --no-install-recommends ${deb})
if(NOT out MATCHES "Inst kgroup ")
  message(FATAL_ERROR "apt would not install the package:\n${out}")
endif()

# Installed in the scratch root: the CLI runs, and the quick start builds with its pkg-config file
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
  message(FATAL_ERROR "pkg-config's include path is not the installed package's: ${pc_flags}")
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

# Removed again by dpkg: nothing of it stays in the root.
run("dpkg --root --remove" dpkg --root=${root} --no-triggers --remove kgroup)
foreach(f usr/lib/libkgroup.a usr/include/kgroup/consumer.hpp usr/bin/kgroup-consume usr/lib/pkgconfig/kgroup.pc)
  if(EXISTS ${root}/${f})
    message(FATAL_ERROR "dpkg --remove left ${f} behind")
  endif()
endforeach()
message(STATUS "the .deb checks passed")
