// A stand-in libnccl.so.2 for the probe test: only ncclGetVersion, returning 2.28.9.
extern "C" int ncclGetVersion(int* version) {
  *version = 22809;
  return 0;
}
