# What the packaging checks share (run.cmake, run_shared.cmake, run_deb.cmake), included by them.

# run(WHAT COMMAND...): runs COMMAND, fails the check naming WHAT with its output if it fails;
# sets `out` in the caller to its standard output.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# readme_quick_start(FILE): writes the README's quick-start program (its first C++ block) to FILE.
function(readme_quick_start file)
  file(READ ${SOURCE_DIR}/README.md readme)
  string(REGEX MATCH "```cpp\n([^`]*)```" _ "${readme}")
  if(NOT CMAKE_MATCH_1)
    message(FATAL_ERROR "no C++ example found in README.md")
  endif()
  file(WRITE ${file} "${CMAKE_MATCH_1}")
endfunction()
