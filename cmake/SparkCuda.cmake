# CUDA selection: SPARK_CUDA=AUTO|ON|OFF. AUTO turns CUDA on when nvcc is found.
# Architectures: sm_90 (H200 test GPUs) and sm_121 (GB10 in the DGX Spark).
# Cross builds never compile CUDA: a Spark builds its CUDA parts natively (scripts/build-spark.sh).
set(SPARK_WITH_CUDA OFF)
if(CMAKE_CROSSCOMPILING AND SPARK_CUDA STREQUAL "ON")
  message(FATAL_ERROR "SPARK_CUDA=ON in a cross build: CUDA is built natively on the target "
                      "(on a DGX Spark: scripts/build-spark.sh). Use -DSPARK_CUDA=OFF here.")
elseif(CMAKE_CROSSCOMPILING)
  message(STATUS "sparkctl: CUDA off (cross build)")
elseif(NOT SPARK_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 121)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_library(SPARK_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
                 /usr/lib/x86_64-linux-gnu)
    find_path(SPARK_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    set(SPARK_WITH_CUDA ON)
    message(STATUS "sparkctl: CUDA on (${CMAKE_CUDA_COMPILER_VERSION}), archs ${CMAKE_CUDA_ARCHITECTURES}, "
                   "NCCL ${SPARK_NCCL_LIBRARY}")
  elseif(SPARK_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPARK_CUDA=ON but no CUDA compiler was found (looked for nvcc on PATH and "
                        "/usr/local/cuda/bin/nvcc). Install the CUDA toolkit or use -DSPARK_CUDA=OFF.")
  else()
    message(STATUS "sparkctl: CUDA off (nvcc not found)")
  endif()
endif()
