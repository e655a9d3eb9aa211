# xgrammar's C++ core (Apache-2.0; bundles picojson, BSD-2-Clause, and dlpack's header,
# Apache-2.0): the grammar engine behind structured output (docs/structured-output.md).
# scripts/fetch-xgrammar.sh unpacks the pinned PyPI source release (scripts/xgrammar.lock) into
# third_party/; its cpp/ sources are compiled here as one static library with the project's
# toolchain, without the Python bindings, so native and cross builds get it the same way.
file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/xgrammar.lock _spark_xg_line REGEX "^XGRAMMAR_VERSION=")
string(REPLACE "XGRAMMAR_VERSION=" "" SPARK_XGRAMMAR_VERSION "${_spark_xg_line}")
set(SPARK_XGRAMMAR_SOURCE_DIR
    "${PROJECT_SOURCE_DIR}/third_party/xgrammar-${SPARK_XGRAMMAR_VERSION}"
    CACHE PATH "Unpacked xgrammar source release (scripts/fetch-xgrammar.sh)")
if(NOT EXISTS "${SPARK_XGRAMMAR_SOURCE_DIR}/cpp/grammar_matcher.cc")
  message(FATAL_ERROR
    "xgrammar ${SPARK_XGRAMMAR_VERSION} source not found in ${SPARK_XGRAMMAR_SOURCE_DIR}: run "
    "scripts/fetch-xgrammar.sh (scripts/install-deps.sh runs it), or point "
    "-DSPARK_XGRAMMAR_SOURCE_DIR at an unpacked xgrammar-${SPARK_XGRAMMAR_VERSION} sdist")
endif()
file(GLOB_RECURSE _spark_xg_sources CONFIGURE_DEPENDS "${SPARK_XGRAMMAR_SOURCE_DIR}/cpp/*.cc")
list(FILTER _spark_xg_sources EXCLUDE REGEX "/cpp/(tvm_ffi|nanobind)/")
add_library(spark_xgrammar STATIC ${_spark_xg_sources})
add_library(xgrammar::xgrammar ALIAS spark_xgrammar)
target_include_directories(spark_xgrammar SYSTEM PUBLIC
  "${SPARK_XGRAMMAR_SOURCE_DIR}/include"
  "${SPARK_XGRAMMAR_SOURCE_DIR}/3rdparty/picojson"
  "${SPARK_XGRAMMAR_SOURCE_DIR}/3rdparty/dlpack/include")
target_compile_definitions(spark_xgrammar PUBLIC
  XGRAMMAR_ENABLE_CPPTRACE=0 XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
# Third-party code: its own language level, none of our warning flags.
target_compile_options(spark_xgrammar PRIVATE -w)
set_target_properties(spark_xgrammar PROPERTIES CXX_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
target_link_libraries(spark_xgrammar PUBLIC Threads::Threads)
