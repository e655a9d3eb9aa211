# Cross builds (CMAKE_CROSSCOMPILING, cmake/toolchains/): the target's copies of the libraries
# that scripts/install-deps.sh unpacks under SPARK_CROSS_PREFIX instead of installing, because
# Debian cannot install them for two architectures at once.

# yaml-cpp: its package config is relocatable; point find_package at the target's copy.
set(_spark_cross_lib ${SPARK_CROSS_PREFIX}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
if(EXISTS ${_spark_cross_lib}/cmake/yaml-cpp/yaml-cpp-config.cmake)
  set(yaml-cpp_DIR ${_spark_cross_lib}/cmake/yaml-cpp)
endif()

# Gloo: its package config names the library by the absolute path /usr/lib/libgloo.so.0.5.0,
# which is the host's copy; the imported target is made here instead.
if(EXISTS ${SPARK_CROSS_PREFIX}/usr/lib/libgloo.so.0 AND NOT TARGET gloo)
  add_library(gloo SHARED IMPORTED)
  set_target_properties(gloo PROPERTIES
    IMPORTED_LOCATION ${SPARK_CROSS_PREFIX}/usr/lib/libgloo.so.0
    IMPORTED_SONAME libgloo.so.0
    INTERFACE_INCLUDE_DIRECTORIES ${SPARK_CROSS_PREFIX}/usr/include)
endif()
