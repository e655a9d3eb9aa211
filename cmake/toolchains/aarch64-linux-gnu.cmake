# Cross build for aarch64 Linux (DGX Spark's CPU) from an x86-64 Debian 12 host, with Debian's
# cross compiler (g++-aarch64-linux-gnu) and the arm64 multiarch -dev packages that
# scripts/install-deps.sh installs. CUDA is never cross-built: a Spark builds it natively
# (scripts/build-spark.sh). Tests and test discovery run through qemu-user-static
# (CMAKE_CROSSCOMPILING_EMULATOR), so `ctest` runs the aarch64 test binaries here.
#
#   cmake -S . -B build-aarch64 --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian multiarch: arm64 libraries live in /usr/lib/aarch64-linux-gnu beside the host's.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The arm64 packages that cannot be installed beside their amd64 versions (yaml-cpp's -dev
# package, gloo) are unpacked here by install-deps.sh; cmake/SparkCrossDeps.cmake uses it.
if(NOT SPARK_CROSS_PREFIX)
  set(SPARK_CROSS_PREFIX /opt/sparkctl-cross/aarch64-linux-gnu)
endif()
set(SPARK_CROSS_PREFIX ${SPARK_CROSS_PREFIX} CACHE PATH "Unpacked arm64 packages")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SPARK_CROSS_PREFIX)

# Host programs from the host, target libraries and headers from the target's places only.
set(CMAKE_FIND_ROOT_PATH ${SPARK_CROSS_PREFIX} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# qemu-aarch64-static finds the arm64 loader (/lib/ld-linux-aarch64.so.1) and libraries of the
# multiarch packages by itself; QEMU_LD_PREFIX stays unset.
find_program(SPARK_QEMU_AARCH64 qemu-aarch64-static)
if(SPARK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SPARK_QEMU_AARCH64})
endif()
