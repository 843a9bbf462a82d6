# Installs kgroup from BUILD_DIR into a scratch prefix, then configures, builds and runs the
# application in test/install/app against it with find_package(kgroup), as a user would; builds
# the teaching examples and kgroup-consume against it too (the examples_* entries run them).
# Arguments: SOURCE_DIR, BUILD_DIR, WORK_DIR.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# No logging library in the public headers (the LogSink interface replaced spdlog's logger), so
# applications need no logging library's headers (nor spdlog at all since issue 37), nor fmt's.
file(GLOB_RECURSE installed_headers ${prefix}/include/kgroup/*.hpp)
foreach(header IN LISTS installed_headers)
  file(STRINGS ${header} bad REGEX "#include[ \t]*[<\"](spdlog|fmt)/")
  if(bad)
    message(FATAL_ERROR "${header} includes a logging library: ${bad}")
  endif()
endforeach()

# configure_and_build(WHAT SOURCE BUILD [cmake arguments...]): a project built against the package.
function(configure_and_build what source build)
  run("configuring ${what} against the installed package" ${CMAKE_COMMAND} -S ${source} -B ${build}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${ARGN})
  run("building ${what} against the installed package" ${CMAKE_COMMAND} --build ${build} --parallel 2)
endfunction()

# The README's quick-start program (its first C++ block) must build against the package.
readme_quick_start(${WORK_DIR}/readme/consume.cpp)
configure_and_build("the application" ${SOURCE_DIR}/test/install/app ${WORK_DIR}/app-build
                    -DREADME_CONSUME_SOURCE=${WORK_DIR}/readme/consume.cpp)
run("running the application built against the installed package" ${WORK_DIR}/app-build/kgroup-install-check)
message(STATUS "application printed: ${out}")
if(NOT out MATCHES "config ok")
  message(FATAL_ERROR "the application built against the installed package did not run correctly: ${out}")
endif()

# The teaching examples (examples/teach): their own CMake project, built as a user would, warnings
# as errors. The examples_* entries run the programs built here (test/CMakeLists.txt;
# test/integration/test_examples.cpp).
configure_and_build("examples/teach" ${SOURCE_DIR}/examples/teach ${WORK_DIR}/examples-build
                    "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Wpedantic -Wshadow -Werror")
# kgroup-consume too: public headers only (examples/kgroup-consume/CMakeLists.txt).
configure_and_build("kgroup-consume" ${SOURCE_DIR}/examples/kgroup-consume ${WORK_DIR}/consume-build)
