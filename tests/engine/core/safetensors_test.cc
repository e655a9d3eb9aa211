#include "engine/core/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/core/checkpoint.h"
#include "tests/engine/core/safetensors_writer.h"

namespace spark::engine::core {
namespace {

using testing::F32Bytes;
using testing::RawTensor;
using testing::WriteRawSafetensors;
using testing::WriteSafetensors;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spark_st_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

// A 3x4 matrix with element (r, c) = 10 r + c.
std::vector<float> Matrix34() {
  std::vector<float> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) m.push_back(10.0f * r + c);
  return m;
}

TEST_F(SafetensorsTest, ReadsWholeTensorsAndMetadata) {
  WriteSafetensors(Path("a.safetensors"), {{"w", "F32", {3, 4}, F32Bytes(Matrix34())},
                                           {"b", "F32", {2}, F32Bytes({1.5f, -2})}});
  auto file = SafetensorsFile::Open(Path("a.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  auto w = (*file)->ReadFloat("w", TensorSlice::Whole());
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, Matrix34());
  auto b = (*file)->ReadFloat("b", TensorSlice::Whole());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<float>{1.5f, -2}));
}

TEST_F(SafetensorsTest, ReadsRowAndColumnSlices) {
  WriteSafetensors(Path("a.safetensors"), {{"w", "F32", {3, 4}, F32Bytes(Matrix34())}});
  auto file = SafetensorsFile::Open(Path("a.safetensors"));
  ASSERT_TRUE(file.ok());
  auto rows = (*file)->ReadFloat("w", TensorSlice::Rows(1, 2));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, (std::vector<float>{10, 11, 12, 13, 20, 21, 22, 23}));
  auto cols = (*file)->ReadFloat("w", TensorSlice::Cols(2, 2));
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(*cols, (std::vector<float>{2, 3, 12, 13, 22, 23}));
  auto bad = (*file)->ReadFloat("w", TensorSlice::Cols(3, 2));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SafetensorsTest, ConvertsHalfTypesAndFp8) {
  // bf16 1.0 = 0x3F80, -2.0 = 0xC000; f16 1.0 = 0x3C00, 0.5 = 0x3800;
  // e4m3 1.0 = 0x38, -1.5 = 0xBC, 448 = 0x7E, smallest subnormal 2^-9 = 0x01.
  WriteSafetensors(Path("a.safetensors"), {{"bf", "BF16", {2}, {0x80, 0x3F, 0x00, 0xC0}},
                                           {"h", "F16", {2}, {0x00, 0x3C, 0x00, 0x38}},
                                           {"f8", "F8_E4M3", {4}, {0x38, 0xBC, 0x7E, 0x01}}});
  auto file = SafetensorsFile::Open(Path("a.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(*(*file)->ReadFloat("bf", {}), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(*(*file)->ReadFloat("h", {}), (std::vector<float>{1.0f, 0.5f}));
  EXPECT_EQ(*(*file)->ReadFloat("f8", {}), (std::vector<float>{1.0f, -1.5f, 448.0f, 1.0f / 512}));
}

TEST_F(SafetensorsTest, ReadsDeepseekScaleAndIntegerTypes) {
  // e8m0 0x7F = 2^0, 0x80 = 2, 0x7E = 0.5, 0xFF = NaN; integers little-endian.
  const std::vector<uint8_t> i64 = {0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // -3
                                    0x07, 0,    0,    0,    0,    0,    0,    0};    // 7
  WriteSafetensors(Path("a.safetensors"),
                   {{"scale", "F8_E8M0", {4}, {0x7F, 0x80, 0x7E, 0xFF}},
                    {"tid2eid", "I64", {2}, i64},
                    {"i32", "I32", {2}, {0x05, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}},
                    {"packed", "I8", {2}, {0xFE, 0x7F}},
                    {"u8", "U8", {1}, {0xC8}}});
  auto file = SafetensorsFile::Open(Path("a.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->Find("scale")->dtype, DType::kF8E8M0);
  EXPECT_EQ((*file)->Find("tid2eid")->dtype, DType::kI64);
  EXPECT_EQ((*file)->Find("packed")->dtype, DType::kI8);
  auto scale = (*file)->ReadFloat("scale", {});
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ((*scale)[0], 1.0f);
  EXPECT_EQ((*scale)[1], 2.0f);
  EXPECT_EQ((*scale)[2], 0.5f);
  EXPECT_TRUE(std::isnan((*scale)[3]));
  EXPECT_EQ(*(*file)->ReadFloat("tid2eid", {}), (std::vector<float>{-3.0f, 7.0f}));
  EXPECT_EQ(*(*file)->ReadFloat("i32", {}), (std::vector<float>{5.0f, -1.0f}));
  EXPECT_EQ(*(*file)->ReadFloat("packed", {}), (std::vector<float>{-2.0f, 127.0f}));
  EXPECT_EQ(*(*file)->ReadFloat("u8", {}), (std::vector<float>{200.0f}));
  auto raw = (*file)->RawBytes("tid2eid");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(std::vector<uint8_t>(raw->begin(), raw->end()), i64);
  auto packed = (*file)->RawBytes("packed");
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(std::vector<uint8_t>(packed->begin(), packed->end()),
            (std::vector<uint8_t>{0xFE, 0x7F}));
  EXPECT_EQ((*file)->RawBytes("nope").status().code(), StatusCode::kNotFound);
}

TEST(DTypeTest, NamesSizesAndParsingAgree) {
  const std::vector<std::pair<const char*, size_t>> cases = {
      {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I64", 8}, {"I32", 4},  {"I8", 1},  {"U8", 1}};
  for (const auto& [name, size] : cases) {
    auto dtype = ParseDType(name);
    ASSERT_TRUE(dtype.ok()) << name;
    EXPECT_EQ(DTypeName(*dtype), name);
    EXPECT_EQ(DTypeSize(*dtype), size) << name;
  }
  auto bad = ParseDType("F8_E5M2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("F8_E8M0"), std::string::npos) << bad.status().message();
}

struct MalformedCase {
  const char* label;
  std::string header;
  size_t data_bytes;
  const char* expected;  // substring of the error
};

TEST_F(SafetensorsTest, RejectsMalformedFilesNamingFileAndTensor) {
  const std::vector<MalformedCase> cases = {
      {"bad_json", "{\"w\": {", 16, "not valid JSON"},
      {"unknown_dtype", R"({"w":{"dtype":"I4","shape":[4],"data_offsets":[0,16]}})", 16, "'w'"},
      {"wrong_size", R"({"w":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", 16, "needs 20"},
      {"out_of_range", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 16,
       "truncated"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       16, "overlap"},
      {"negative_dim", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0, "'w'"},
      {"missing_offsets", R"({"w":{"dtype":"F32","shape":[1]}})", 4, "data_offsets"},
      {"i64_wrong_size", R"({"w":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}})", 16,
       "needs 24"},
      {"e8m0_wrong_size", R"({"w":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[0,3]}})", 4,
       "needs 4"},
      {"i8_out_of_range", R"({"w":{"dtype":"I8","shape":[8],"data_offsets":[8,16]}})", 12,
       "truncated"},
      {"unknown_f8", R"({"w":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]}})", 4,
       "unsupported dtype 'F8_E5M2'"},
  };
  for (const MalformedCase& c : cases) {
    const std::string path = Path(std::string(c.label) + ".safetensors");
    WriteRawSafetensors(path, c.header, std::vector<uint8_t>(c.data_bytes, 0));
    auto file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << c.label;
    EXPECT_NE(file.status().message().find(path), std::string::npos) << file.status().message();
    EXPECT_NE(file.status().message().find(c.expected), std::string::npos)
        << c.label << ": " << file.status().message();
  }
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  WriteSafetensors(Path("a.safetensors"), {{"w", "F32", {3, 4}, F32Bytes(Matrix34())}});
  const auto size = std::filesystem::file_size(Path("a.safetensors"));
  std::filesystem::resize_file(Path("a.safetensors"), size - 4);  // data cut short
  auto cut_data = SafetensorsFile::Open(Path("a.safetensors"));
  ASSERT_FALSE(cut_data.ok());
  EXPECT_NE(cut_data.status().message().find("'w'"), std::string::npos);
  std::filesystem::resize_file(Path("a.safetensors"), 20);  // header cut short
  EXPECT_EQ(SafetensorsFile::Open(Path("a.safetensors")).status().code(), StatusCode::kDataLoss);
  std::filesystem::resize_file(Path("a.safetensors"), 3);
  EXPECT_EQ(SafetensorsFile::Open(Path("a.safetensors")).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(SafetensorsFile::Open(Path("missing.safetensors")).status().code(),
            StatusCode::kNotFound);
}

TEST_F(SafetensorsTest, CheckpointFollowsShardIndex) {
  WriteSafetensors(Path("model-00001-of-00002.safetensors"), {{"a", "F32", {2}, F32Bytes({1, 2})}});
  WriteSafetensors(Path("model-00002-of-00002.safetensors"),
                   {{"b", "F32", {3, 4}, F32Bytes(Matrix34())}});
  std::ofstream(Path("model.safetensors.index.json"))
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
             "b": "model-00002-of-00002.safetensors"}})";
  auto ckpt = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ((*ckpt)->shard_count(), 2u);
  EXPECT_EQ(*(*ckpt)->Read("a"), (std::vector<float>{1, 2}));
  EXPECT_EQ(*(*ckpt)->Read("b", TensorSlice::Rows(2, 1), {1, 4}),
            (std::vector<float>{20, 21, 22, 23}));
  auto wrong_shape = (*ckpt)->Read("b", TensorSlice::Whole(), {4, 3});
  EXPECT_EQ(wrong_shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_shape.status().message().find("model-00002-of-00002"), std::string::npos);
  EXPECT_EQ((*ckpt)->Read("c").status().code(), StatusCode::kNotFound);
}

// The runs a raw region names, gathered as floats (the file's dtype is F32 here).
std::vector<float> Gather(const Checkpoint::Region& r) {
  std::vector<float> out(r.rows * r.run_bytes / sizeof(float));
  for (size_t i = 0; i < r.rows; ++i) {
    std::memcpy(reinterpret_cast<uint8_t*>(out.data()) + i * r.run_bytes, r.data + i * r.stride,
                r.run_bytes);
  }
  return out;
}

TEST_F(SafetensorsTest, CheckpointRawRegionsMatchSlicesAndCountAsRead) {
  WriteSafetensors(Path("model.safetensors"), {{"pad", "F32", {1}, F32Bytes({7})},
                                               {"b", "F32", {3, 4}, F32Bytes(Matrix34())}});
  auto ckpt = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  uint64_t observed = 0;
  (*ckpt)->set_read_observer([&](uint64_t bytes) { observed += bytes; });
  auto whole = (*ckpt)->RawRegion("b");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->rows, 1u);
  EXPECT_EQ(Gather(*whole), Matrix34());
  auto rows = (*ckpt)->RawRegion("b", TensorSlice::Rows(1, 2), {2, 4});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(Gather(*rows), (std::vector<float>{10, 11, 12, 13, 20, 21, 22, 23}));
  auto cols = (*ckpt)->RawRegion("b", TensorSlice::Cols(1, 2), {3, 2});
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(cols->rows, 3u);
  EXPECT_EQ(cols->stride, 16u);
  EXPECT_EQ(Gather(*cols), (std::vector<float>{1, 2, 11, 12, 21, 22}));
  EXPECT_EQ(observed, 48u + 32u + 24u);
  EXPECT_EQ((*ckpt)->RawRegion("b", TensorSlice::Cols(3, 2)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*ckpt)->RawRegion("b", TensorSlice::Rows(0, 2), {3, 4}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*ckpt)->RawRegion("pad", TensorSlice::Cols(0, 1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(observed, 104u) << "failed reads are not counted";
}

TEST_F(SafetensorsTest, CheckpointRejectsIndexPointingAtWrongShard) {
  WriteSafetensors(Path("s1.safetensors"), {{"a", "F32", {2}, F32Bytes({1, 2})}});
  std::ofstream(Path("model.safetensors.index.json"))
      << R"({"weight_map": {"z": "s1.safetensors"}})";
  auto ckpt = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_NE(ckpt.status().message().find("'z'"), std::string::npos) << ckpt.status().message();
  std::ofstream(Path("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "s9.safetensors"}})";
  EXPECT_EQ(Checkpoint::Open(dir_.string()).status().code(), StatusCode::kNotFound);
  std::filesystem::remove(Path("model.safetensors.index.json"));
  EXPECT_EQ(Checkpoint::Open(dir_.string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace spark::engine::core
