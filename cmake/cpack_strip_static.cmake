# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): strips the debug information of the static
# library in the staging directory. CPACK_STRIP_FILES strips executables only, and a
# RelWithDebInfo libkgroup.a carries about 240 MB of debug sections a package user does not need.
file(GLOB_RECURSE _kgroup_archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(_a IN LISTS _kgroup_archives)
  execute_process(COMMAND ${CPACK_KGROUP_STRIP} --strip-debug ${_a} RESULT_VARIABLE _rc)
  if(_rc)
    message(FATAL_ERROR "strip --strip-debug ${_a} failed")
  endif()
endforeach()
