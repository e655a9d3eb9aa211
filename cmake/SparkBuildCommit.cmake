# Script mode (cmake -DSOURCE_DIR=... -DOUTPUT=... -P SparkBuildCommit.cmake): writes the git
# commit of SOURCE_DIR ("<12 hex>", "+dirty" when tracked files changed; "unknown" outside git)
# as a C++ string literal into OUTPUT, touching it only when the text changes, so that a build
# recompiles base/build_info.cc only after a new commit.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    string(APPEND commit "+dirty")
  endif()
endif()
set(text "\"${commit}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUTPUT}" "${text}")
endif()
