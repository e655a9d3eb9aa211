// The source revision a binary was built from, so that results (benchmarks, `sparkctl check`)
// can say which build produced them and refuse to compare different ones.
// Thread-safety: a constant.
#pragma once

namespace spark {

// The git commit of the source tree at build time: 12 hex digits, with "+dirty" when tracked
// files had uncommitted changes; "unknown" for a build outside a git checkout.
const char* BuildCommit();

}  // namespace spark
