// The dashboard page's files, compiled into the binary at build time (cmake/EmbedAssets.cmake
// over sparkctl/dashboard/assets/ and the vendored Chart.js, sparkctl/dashboard/vendor/chart.js-3.9.1), so
// `sparkctl dashboard` needs no files beside it and no internet.
// Thread-safety: immutable data.
#pragma once

#include <span>
#include <string_view>

namespace spark::dashboard {

struct Asset {
  std::string_view name;          // the file name: "index.html", "chart.min.js"
  std::string_view content_type;  // from the extension
  std::string_view data;
};

std::span<const Asset> EmbeddedAssets();  // generated

// The asset of that name; nullptr when there is none.
const Asset* FindAsset(std::string_view name);

}  // namespace spark::dashboard
