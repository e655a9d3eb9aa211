#include "base/build_info.h"

namespace spark {

const char* BuildCommit() {
  return
#include "base/build_commit.inc"
      ;
}

}  // namespace spark
