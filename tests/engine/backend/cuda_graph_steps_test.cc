// CudaBackend's argmax and graph steps against the CPU backend: ArgMax with ties, offsets and
// NaN across block slices, graph steps replayed with new inputs and launched ahead, and the
// merge of two vocabulary parts' argmax into an embedding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "tests/engine/backend/cuda_backend_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::engine::backend::cuda {
namespace {

using kernels::testing::Random;
using kernels::testing::RelL2;

// Widths a multiple of 4 (16-byte loads, several in flight per thread) and not (one column at
// a time); ties between threads and between one thread's loads.
// Rows of 151936 / 4 (a rank's slice at TP=4) and of the whole 151936 split over a cluster of
// blocks: a tie across two blocks' slices, NaN in the last block's slice; 37983 columns, not a
// multiple of 4, in one block.
TEST_F(CudaBackendTest, ArgMaxMatchesCpuWithTiesAndOffset) {
  for (int cols : {151936 / 4, 151936 / 4 - 1, 151936}) {
    SCOPED_TRACE(cols);
    const int rows = 7;
    auto x = Random(size_t{rows} * cols, 31);
    x[1 * cols + 7] = x[1 * cols + 20000] = 50.0f;  // tie (two blocks of a split row): the lower
    x[3 * cols + cols - 1] = 60.0f;                 // the last column
    x[4 * cols + 13] = x[4 * cols + 4110] = 55.0f;  // one thread's chunks 3 and 1027
    x[5 * cols + 2] = NAN;
    x[6 * cols + cols - 5] = NAN;  // in the last block of a split row
    std::vector<float> want(rows * 2);
    cpu_.ArgMax(x.data(), rows, cols, 1000, want.data());
    Buffer gx = Put(x), gout = Put(std::vector<float>(rows * 2));
    gpu_->ArgMax(gx.data(), rows, cols, 1000, gout.data());
    const std::vector<float> got = Get(gout);
    for (int r = 0; r < 5; ++r) {
      EXPECT_EQ(got[2 * r], want[2 * r]) << "row " << r;
      EXPECT_EQ(got[2 * r + 1], want[2 * r + 1]) << "row " << r;
    }
    EXPECT_TRUE(std::isnan(got[10]) && std::isnan(want[10])) << "a NaN row";
    EXPECT_TRUE(std::isnan(got[12]) && std::isnan(want[12])) << "NaN at the row's end";
    EXPECT_EQ(want[3], 1007.0f);
    EXPECT_EQ(want[7], 1000.0f + cols - 1);
    EXPECT_EQ(want[9], 1013.0f);
  }
}

// A graph step stages its host inputs again on every replay: the embedding ids of each step
// must show in its result, and steps of another shape get their own graph.
TEST_F(CudaBackendTest, GraphStepsReplayWithNewInputs) {
  const int hidden = 64, rows = 50;
  const auto table = Random(rows * hidden, 40);
  Buffer gt = Put(table);
  std::vector<float> want(2 * hidden);
  for (int step = 0; step < 6; ++step) {
    const int n = step < 4 ? 2 : 1;
    const std::vector<int32_t> ids = {step * 3, step * 5 + 1};
    ASSERT_TRUE(gpu_->BeginGraph("embed-" + std::to_string(n), 1).ok());
    auto out = gpu_->Allocate(n * hidden);
    ASSERT_TRUE(out.ok());
    gpu_->Embedding(gt.data(), 0, rows, hidden, std::span(ids).first(n), out->data());
    std::vector<float> got(n * hidden);
    gpu_->Download(out->data(), got);
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().message();
    cpu_.Embedding(table.data(), 0, rows, hidden, std::span(ids).first(n), want.data());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "step " << step;
  }
  EXPECT_EQ(gpu_->graph_count(), 2u);
  // A step that ends without its Download is refused before the next starts.
  ASSERT_TRUE(gpu_->BeginGraph("open", 1).ok());
  EXPECT_FALSE(gpu_->BeginGraph("again", 1).ok());
  auto out = gpu_->Allocate(hidden);
  ASSERT_TRUE(out.ok());
  const std::vector<int32_t> one = {3};
  gpu_->Embedding(gt.data(), 0, rows, hidden, one, out->data());
  std::vector<float> got(hidden);
  gpu_->Download(out->data(), got);
  EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().message();
}

// Graph steps launched ahead (DownloadLater): two in flight, the second staging its ids into
// the other host area while the first may still run; each result taken is its own step's, and
// the two areas take a graph each. A third step in flight, a take of the wrong size and a take
// with none queued are refused.
TEST_F(CudaBackendTest, GraphStepsLaunchedAheadKeepTheirOwnInputs) {
  const int hidden = 64, rows = 50;
  const auto table = Random(rows * hidden, 41);
  Buffer gt = Put(table);
  std::deque<std::vector<float>> wants;
  auto launch = [&](int step) {
    const std::vector<int32_t> ids = {step * 3 % rows, (step * 7 + 1) % rows};
    ASSERT_TRUE(gpu_->BeginGraph("ahead", 1).ok());
    auto out = gpu_->Allocate(2 * hidden);
    ASSERT_TRUE(out.ok());
    gpu_->Embedding(gt.data(), 0, rows, hidden, ids, out->data());
    const Status s = gpu_->DownloadLater(out->data(), 2 * hidden);
    ASSERT_TRUE(s.ok()) << s.message();
    wants.emplace_back(2 * hidden);
    cpu_.Embedding(table.data(), 0, rows, hidden, ids, wants.back().data());
  };
  auto take = [&](int step) {
    std::vector<float> got(2 * hidden);
    const Status s = gpu_->TakeDownload(got);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(got, wants.front()) << "step " << step;
    wants.pop_front();
  };
  launch(0);
  for (int step = 1; step < 8; ++step) {
    launch(step);
    take(step - 1);
  }
  take(7);
  EXPECT_EQ(gpu_->graph_count(), 2u);
  std::vector<float> none(2 * hidden), wrong(hidden);
  EXPECT_EQ(gpu_->TakeDownload(none).code(), StatusCode::kFailedPrecondition);
  launch(8);
  launch(9);
  EXPECT_EQ(gpu_->BeginGraph("ahead", 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(gpu_->TakeDownload(wrong).code(), StatusCode::kInvalidArgument);
  take(8);
  take(9);
  // A replay whose host pass differs from the capture under its key is refused, not launched.
  ASSERT_TRUE(gpu_->BeginGraph("ahead", 1).ok());
  auto out = gpu_->Allocate(2 * hidden);
  ASSERT_TRUE(out.ok());
  gpu_->Embedding(gt.data(), 0, rows, hidden, std::vector<int32_t>{1, 2}, out->data());
  gpu_->Embedding(gt.data(), 0, rows, hidden, std::vector<int32_t>{3, 4}, out->data());
  const Status other = gpu_->DownloadLater(out->data(), 2 * hidden);
  EXPECT_EQ(other.code(), StatusCode::kInternal) << other.message();
  EXPECT_NE(other.message().find("one op sequence"), std::string::npos) << other.message();
  EXPECT_TRUE(gpu_->status().ok()) << gpu_->status().message();
}

// EmbeddingOfArgMax merges ArgMax pairs of two vocabulary parts on the GPU (the larger value,
// ties to the lower id) and embeds the id, as the CPU backend does through MergeArgMax.
TEST_F(CudaBackendTest, EmbeddingOfArgMaxMergesPartsLikeTheHost) {
  const int hidden = 48, rows = 40, tokens = 3;
  const auto table = Random(rows * hidden, 42);
  Buffer gt = Put(table);
  // [parts][tokens][2]: token 0 from part 1, token 1 a tie (the lower id, part 0's 7),
  // token 2 from part 0.
  const std::vector<float> pairs = {1.0f, 3.0f,  2.0f, 7.0f,  5.0f,  11.0f,
                                    4.0f, 25.0f, 2.0f, 30.0f, -1.0f, 39.0f};
  Buffer gp = Put(pairs);
  auto out = gpu_->Allocate(tokens * hidden);
  ASSERT_TRUE(out.ok());
  gpu_->EmbeddingOfArgMax(gt.data(), 0, rows, hidden, gp.data(), 2, tokens, out->data());
  std::vector<float> got(tokens * hidden), want(tokens * hidden);
  gpu_->Download(out->data(), got);
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().message();
  cpu_.EmbeddingOfArgMax(table.data(), 0, rows, hidden, pairs.data(), 2, tokens, want.data());
  EXPECT_EQ(got, want);
  for (int t = 0; t < tokens; ++t) {
    const int id = std::array{25, 7, 11}[t];
    EXPECT_TRUE(std::equal(got.begin() + t * hidden, got.begin() + (t + 1) * hidden,
                           table.begin() + id * hidden))
        << "token " << t;
  }
}

}  // namespace
}  // namespace spark::engine::backend::cuda
