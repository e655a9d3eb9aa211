// The per-token cache record of DeepSeek-V4 layers (fields, balance between K and V, width) for
// the tiny fixture's shape and for V4-Flash's, against sizes worked out by hand.
#include <gtest/gtest.h>

#include <set>

#include "engine/model/deepseek_v4/cache_layout.h"

namespace spark::engine::model::dsv4 {
namespace {

core::ModelConfig Config(int head_dim, int index_dim) {
  core::ModelConfig c;
  c.num_layers = 3;
  c.head_dim = head_dim;
  c.dsv4.index_head_dim = index_dim;
  c.layers = {{core::AttentionType::kSliding, core::MlpType::kHashMoe},
              {core::AttentionType::kHeavilyCompressed, core::MlpType::kMoe},
              {core::AttentionType::kCompressedSparse, core::MlpType::kMoe}};
  return c;
}

// V4-Flash: D = 512, dI = 128. CSA needs 512 + 2*1024 + 512 + 2*256 + 128 = 3712 floats per token;
// split largest first into the emptier half: K 1024+512+256+128 = 1920, V 1024+512+256 = 1792.
TEST(DeepseekV4CacheLayoutTest, V4FlashWidths) {
  const CacheLayout layout(Config(512, 128));
  EXPECT_EQ(layout.kv_width(), 1920);
  const LayerRecord& csa = layout.layer(2);
  EXPECT_EQ(csa.comp_kv.width, 1024);
  EXPECT_EQ(csa.idx_key.width, 128);
  EXPECT_FALSE(layout.layer(0).entry.present());
  EXPECT_TRUE(layout.layer(1).entry.present());
  EXPECT_FALSE(layout.layer(1).idx_key.present());
  // Each layer's record is as wide as its own fields: the window-only layer 512 floats of K and
  // none of V, the HCA layer 1024 + 1024 (K: window + comp_kv, V: comp_gate + entry), the CSA
  // layer 1920 + 1792.
  EXPECT_EQ(layout.widths(), (std::vector<int>{512, 1024, 1920}));
  EXPECT_EQ(layout.v_widths(), (std::vector<int>{0, 1024, 1792}));
  const KvCacheSpec spec = layout.spec();
  EXPECT_EQ(spec.num_layers, 3);
  EXPECT_EQ(spec.kv_width, 1920);
  EXPECT_EQ(spec.bytes_per_token(), (512 + 2048 + 3712) * 4);
  // A uniform spec of 43 layers of fp32 K and V: 2 * 43 * 1920 * 4 bytes per token.
  EXPECT_EQ((KvCacheSpec{43, layout.kv_width()}.bytes_per_token()), 660480);
}

TEST(DeepseekV4CacheLayoutTest, FieldsDoNotOverlap) {
  const CacheLayout layout(Config(32, 16));
  for (int l = 0; l < 3; ++l) {
    const LayerRecord& r = layout.layer(l);
    std::set<int> used;
    for (const Field* f :
         {&r.window, &r.comp_kv, &r.comp_gate, &r.entry, &r.idx_kv, &r.idx_gate, &r.idx_key}) {
      if (!f->present()) continue;
      const int k = layout.widths()[l], v = layout.v_widths()[l];
      const bool in_k = f->offset < k;
      EXPECT_LE(f->offset + f->width, in_k ? k : k + v) << "field crosses K/V";
      for (int i = f->offset; i < f->offset + f->width; ++i) {
        EXPECT_TRUE(used.insert(i).second) << "layer " << l << " offset " << i;
      }
    }
  }
}

}  // namespace
}  // namespace spark::engine::model::dsv4
