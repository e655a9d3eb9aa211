# Helpers that every folder uses: one library per folder, thin executables, labelled tests.

# Flags for the project's own C++ code (never applied to third-party code). GCC 12 reports
# impossible overlaps and sizes inside libstdc++ string code when inlining aggressively
# (-Wrestrict, -Wstringop-overflow false positives); those are not about our code.
set(SPARK_CXX_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-restrict
    -Wno-stringop-overflow)

# Release builds use -O2: as fast for this code as -O3, quicker to compile on small CI machines.
string(REPLACE "-O3" "-O2" CMAKE_CXX_FLAGS_RELEASE "${CMAKE_CXX_FLAGS_RELEASE}")

# add_subdirectory for each listed folder that exists and has a CMakeLists.txt.
function(spark_add_subdirectories)
  foreach(dir IN LISTS ARGN)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()

# spark_library(NAME name SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# Creates target spark_<name> with alias spark::<name>. Include paths are rooted at the repository
# top, so headers are included as "base/status.h", "sparkctl/ssh/transport.h", ...
function(spark_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target spark_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(spark::${ARG_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SPARK_CXX_WARNINGS}>)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# spark_executable(NAME name SOURCES ... DEPS ...): a thin main.cc that links libraries.
function(spark_executable)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SPARK_CXX_WARNINGS}>)
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# spark_test(NAME name SOURCES ... DEPS ... LABEL unit|sim|gpu|e2e [TIMEOUT s])
# One ctest entry per test binary. A binary whose tests call GTEST_SKIP (no root, no GPU, ...)
# is reported by ctest as skipped, not passed.
function(spark_test)
  cmake_parse_arguments(ARG "" "NAME;LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT SPARK_BUILD_TESTS)
    return()
  endif()
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  # GPU tests start from the engine's configuration layer (tests/testing/engine_test_main.cc).
  if(ARG_LABEL STREQUAL "gpu")
    set(main spark_engine_test_main)
  else()
    set(main GTest::gtest_main)
  endif()
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock ${main})
  target_compile_options(${ARG_NAME} PRIVATE ${SPARK_CXX_WARNINGS})
  target_compile_definitions(${ARG_NAME} PRIVATE
    SPARK_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SPARK_BINARY_DIR="${PROJECT_BINARY_DIR}"
    SPARK_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME} --gtest_brief=0)
  set_tests_properties(${ARG_NAME} PROPERTIES
    LABELS ${ARG_LABEL}
    TIMEOUT ${ARG_TIMEOUT}
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()
