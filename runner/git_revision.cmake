# Run at every build (cmake -P): writes git_revision.cpp only when the revision changed, so that a
# run records the revision of the binary that produced it without rebuilding anything otherwise.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR rev STREQUAL "")
  set(rev "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(rev "${rev}-dirty")
  endif()
endif()
set(text "#include \"build_info.hpp\"\nconst char* attnlab::build_info::git_revision() { return \"${rev}\"; }\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
