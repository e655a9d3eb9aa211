# The unit tests that a cross build (cmake/toolchains/) compiles and runs under user-mode
# emulation (qemu-aarch64-static), with the ctest label `aarch64` (scripts/test-aarch64.sh).
# Emulation costs 10-40x in compute and ~0.2 s per process start, and CI has two cores and a
# budget of about 40 minutes in all, so this is a choice: the code whose results can differ by
# machine (vector code, float summation order, byte and char handling, threads), not every test.
# Tests that run programs of the build (sparkctl, spark-engine) or need root are left out: the
# programs here are aarch64 ones. Each entry is NAME=GTEST_FILTER ("*" = every case).
# docs/platforms.md has the measured times.
set(SPARK_EMULATED_TESTS
  # The portable GEMM tile (GCC vector extension: NEON on aarch64, AVX2/SSE clones on x86-64)
  # and the other CPU ops against their scalar references.
  "engine_backend_cpu_gemm_test=*"
  "engine_backend_cpu_test=*"
  "engine_backend_cpu_deepseek_test=*"
  # bf16/fp8/fp4 conversion, block quantisation, safetensors parsing.
  "engine_core_test=*"
  # Qwen3 logits and greedy ids against the transformers fixtures, TP 1/2/4 in one process: the
  # whole CPU forward on aarch64 (DeepSeek's much slower fixtures stay on x86-64).
  "engine_model_test=Fixtures/Qwen3ModelTest.*:PagedKvCacheTest.*:ModelStepRunnerTest.*"
  # Byte-level BPE and UTF-8 handling (char is unsigned on aarch64); one real tokenizer.
  "tokenizer_test=TokenizerTest.*:StreamDecoderTest.*:Utf8Test.*:MalformedTokenizerTest.*:RealTokenizers/TokenizerFixtureTest.*/0"
  # Sampling (random numbers, float softmax) and in-process collectives (summation order).
  "engine_runtime_sampler_test=*"
  "comm_local_test=*"
  # SHA-256 (byte order), manifests, parallel hashing with the thread pool.
  "weights_sha256_test=*"
  "weights_manifest_test=*"
  "weights_verify_test=*"
  # Status, strings, the YAML adapter (yaml-cpp's arm64 build), the thread pool.
  "base_test=*"
  "profile_yaml_test=*"
)
