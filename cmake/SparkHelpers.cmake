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
# Each binary finds shared libraries first in $ORIGIN/../lib, as a DT_RPATH (not DT_RUNPATH:
# an RPATH of the executable also serves the libraries' own dependencies). A bundle
# (docs/bundles.md) puts its libraries there; in the build tree ../lib does not exist and the
# system's libraries are used.
function(spark_executable)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SPARK_CXX_WARNINGS}>)
  target_link_options(${ARG_NAME} PRIVATE "LINKER:--disable-new-dtags")
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin
                        BUILD_RPATH "\$ORIGIN/../lib")
endfunction()

# spark_test(NAME name SOURCES ... DEPS ... LABEL unit|sim|gpu|e2e [TIMEOUT s]
#            [ENVIRONMENT VAR=value ...])
# One ctest entry per test case (gtest_discover_tests, listed when ctest starts), named
# <name>.<Suite>.<Case>, so a case that calls GTEST_SKIP is reported skipped on its own and can
# never hide a failing neighbour; `ctest -R <name>` still selects the whole binary. The cases of
# one binary run one at a time (RESOURCE_LOCK): they may share a simulated cluster or a folder;
# sim and e2e cases run alone (RUN_SERIAL).
function(spark_test)
  cmake_parse_arguments(ARG "" "NAME;LABEL;TIMEOUT" "SOURCES;DEPS;ENVIRONMENT" ${ARGN})
  if(NOT SPARK_BUILD_TESTS)
    return()
  endif()
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # Cross builds compile and run (emulated) only the tests of tests/emulated_tests.cmake, with
  # the label aarch64 and the filter given there.
  set(filter)
  if(CMAKE_CROSSCOMPILING)
    set(entry)
    foreach(e IN LISTS SPARK_EMULATED_TESTS)
      if(e MATCHES "^${ARG_NAME}=(.*)$")
        set(entry "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(NOT entry)
      return()
    endif()
    set(ARG_LABEL ${CMAKE_SYSTEM_PROCESSOR})
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 4")
    if(NOT entry STREQUAL "*")
      set(filter FILTER "${entry}")
    endif()
    set_property(GLOBAL APPEND PROPERTY SPARK_EMULATED_TARGETS ${ARG_NAME})
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
  spark_gtest_cases(${ARG_NAME} PREFIX ${ARG_NAME} LABEL ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                    ${filter} ENVIRONMENT ${ARG_ENVIRONMENT})
endfunction()

# spark_gtest_cases(target PREFIX p LABEL l TIMEOUT s [FILTER gtest-filter] [ENVIRONMENT ...])
# The ctest entries of one gtest binary's cases (those FILTER selects), as spark_test makes them;
# for a second set of entries over the same binary under another environment.
function(spark_gtest_cases target)
  cmake_parse_arguments(ARG "" "PREFIX;LABEL;TIMEOUT;FILTER" "ENVIRONMENT" ${ARGN})
  include(GoogleTest)
  set(filter)
  if(ARG_FILTER)
    set(filter TEST_FILTER ${ARG_FILTER})
  endif()
  set(environment)
  if(ARG_ENVIRONMENT)
    # The value passes through three list expansions (gtest_discover_tests, the include file
    # it writes, the tests file written from that) before set_tests_properties sees it: each
    # ';' between variables needs this many escapes (checked with ctest --show-only=json-v1).
    string(REPLACE ";" "\\\\\\\\\\\\\\\\;" joined "${ARG_ENVIRONMENT}")
    set(environment ENVIRONMENT "${joined}")
  endif()
  # Simulated clusters share the host's network namespaces and /run/netns: those cases run
  # alone even under ctest -j (each checks the host is as it was after it).
  set(serial)
  if(ARG_LABEL STREQUAL "sim" OR ARG_LABEL STREQUAL "e2e")
    set(serial RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${target}
    TEST_PREFIX "${ARG_PREFIX}."
    # Parameterised cases by index: their values print as raw bytes, pointers among them.
    NO_PRETTY_VALUES
    EXTRA_ARGS --gtest_brief=0
    ${filter}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT} RESOURCE_LOCK ${target}
               SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" ${serial} ${environment})
endfunction()
