// A stand-in engine linked against the stand-in libnccl.so.2 (the probe asks the loader which
// libnccl this binary loads).
extern "C" int ncclGetVersion(int* version);

int main() {
  int v = 0;
  return ncclGetVersion(&v);
}
