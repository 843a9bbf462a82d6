# Installs kgroup from BUILD_DIR into a scratch prefix, then configures, builds and runs the
# application in test/install/app against it with find_package(kgroup), as a user would.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed")
endif()
# No logging library in the public headers (issue 17: the LogSink interface replaced spdlog's
# logger), so applications need neither spdlog's nor fmt's headers.
file(GLOB_RECURSE installed_headers ${WORK_DIR}/prefix/include/kgroup/*.hpp)
foreach(header IN LISTS installed_headers)
  file(STRINGS ${header} bad REGEX "#include[ \t]*[<\"](spdlog|fmt)/")
  if(bad)
    message(FATAL_ERROR "${header} includes a logging library: ${bad}")
  endif()
endforeach()
# The README's quick-start program (its first C++ block) must build against the package.
file(READ ${SOURCE_DIR}/README.md readme)
string(REGEX MATCH "```cpp\n([^`]*)```" _ "${readme}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "no C++ example found in README.md")
endif()
file(WRITE ${WORK_DIR}/readme/consume.cpp "${CMAKE_MATCH_1}")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/install/app -B ${WORK_DIR}/app-build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                        -DREADME_CONSUME_SOURCE=${WORK_DIR}/readme/consume.cpp
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the application against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/app-build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the application against the installed package failed")
endif()
execute_process(COMMAND ${WORK_DIR}/app-build/kgroup-install-check OUTPUT_VARIABLE out RESULT_VARIABLE rc)
message(STATUS "application printed: ${out}")
if(rc OR NOT out MATCHES "config ok")
  message(FATAL_ERROR "the application built against the installed package did not run correctly")
endif()
# The teaching examples (examples/teach): their own CMake project, configured and built against the
# installed package as a user would, warnings as errors. The examples_* entries run the programs
# built here (test/CMakeLists.txt; test/integration/test_examples.cpp).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/teach -B ${WORK_DIR}/examples-build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                        "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Wpedantic -Wshadow -Werror"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring examples/teach against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/examples-build --parallel 2 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building examples/teach against the installed package failed")
endif()
# kgroup-consume too: public headers only, so it builds against the installed package
# (examples/kgroup-consume/CMakeLists.txt).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/kgroup-consume -B ${WORK_DIR}/consume-build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring kgroup-consume against the installed package failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consume-build --parallel 2 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building kgroup-consume against the installed package failed")
endif()
