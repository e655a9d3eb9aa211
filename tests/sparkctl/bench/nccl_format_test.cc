// nccl-tests' arithmetic and layout, against numbers and lines worked out by hand from the
// definitions (algbw = bytes / time; busbw factors 2(n-1)/n and (n-1)/n; all-gather shares
// rounded down to 16 bytes; printf widths of all_reduce_perf).
#include "sparkctl/bench/nccl_format.h"

#include <gtest/gtest.h>

namespace spark::bench {
namespace {

TEST(NcclFormatTest, AllReduceSizesAreTheBufferItself) {
  CollectiveSizes s = SizesFor(Collective::kAllReduce, 1073741824, 4, 2);
  EXPECT_EQ(s.param_count, 268435456u);
  EXPECT_EQ(s.send_count, 268435456u);
  EXPECT_EQ(s.recv_count, 268435456u);
  EXPECT_EQ(s.report_bytes, 1073741824u);
  EXPECT_EQ(SizesFor(Collective::kAllReduce, 8, 4, 4).param_count, 2u);
}

TEST(NcclFormatTest, AllGatherSharesRoundDownToSixteenBytes) {
  // 1024 B / 4 ranks: 256 floats, 64 per rank (already a multiple of 4 floats).
  CollectiveSizes a = SizesFor(Collective::kAllGather, 1024, 4, 4);
  EXPECT_EQ(a.param_count, 64u);
  EXPECT_EQ(a.recv_count, 256u);
  EXPECT_EQ(a.send_inplace_offset, 64u);
  EXPECT_EQ(a.report_bytes, 1024u);
  // 100 B / 3 ranks: 25 floats, 8 per rank (8.33 -> 8), 24 gathered = 96 bytes.
  CollectiveSizes b = SizesFor(Collective::kAllGather, 100, 4, 3);
  EXPECT_EQ(b.param_count, 8u);
  EXPECT_EQ(b.report_bytes, 96u);
  // 8 B / 2 ranks: one float each, rounded down to zero.
  CollectiveSizes c = SizesFor(Collective::kAllGather, 8, 4, 2);
  EXPECT_EQ(c.param_count, 0u);
  EXPECT_EQ(c.report_bytes, 0u);
}

TEST(NcclFormatTest, BusBandwidthFactors) {
  // 1 GiB in 10 ms: 1073741824 / 1e9 / 0.01 = 107.3741824 GB/s.
  Bandwidth two = ComputeBandwidth(Collective::kAllReduce, 268435456, 4, 0.01, 2);
  EXPECT_NEAR(two.alg_gbps, 107.3741824, 1e-9);
  EXPECT_NEAR(two.bus_gbps, 107.3741824, 1e-9);  // 2*1/2 = 1
  Bandwidth four = ComputeBandwidth(Collective::kAllReduce, 268435456, 4, 0.01, 4);
  EXPECT_NEAR(four.bus_gbps, 161.0612736, 1e-9);  // 2*3/4 = 1.5
  Bandwidth eight = ComputeBandwidth(Collective::kAllReduce, 268435456, 4, 0.01, 8);
  EXPECT_NEAR(eight.bus_gbps, 187.9048192, 1e-9);  // 2*7/8 = 1.75
  // All-gather: 64 floats per rank x 4 ranks = 1024 B in 10 us = 0.1024 GB/s; bus x 3/4.
  Bandwidth ag = ComputeBandwidth(Collective::kAllGather, 64, 4, 1e-5, 4);
  EXPECT_NEAR(ag.alg_gbps, 0.1024, 1e-12);
  EXPECT_NEAR(ag.bus_gbps, 0.0768, 1e-12);
}

TEST(NcclFormatTest, FloatsFitTheirColumn) {
  EXPECT_EQ(FormatFloat(5.6789, 7), "   5.68");
  EXPECT_EQ(FormatFloat(12345.678, 7), "12345.7");
  EXPECT_EQ(FormatFloat(1234567.0, 7), "1234567");
  EXPECT_EQ(FormatFloat(123456789.0, 7), "1.2e+08");
  EXPECT_EQ(FormatFloat(0.1024, 6), "  0.10");
  EXPECT_EQ(FormatFloat(107.3741824, 6), "107.37");
}

TEST(NcclFormatTest, SweepFollowsFactorOrStep) {
  std::vector<size_t> f = SizeSweep(8, size_t{1} << 30, 2, 0);
  ASSERT_EQ(f.size(), 28u);  // 2^3 .. 2^30
  EXPECT_EQ(f.front(), 8u);
  EXPECT_EQ(f.back(), size_t{1} << 30);
  EXPECT_EQ(SizeSweep(1 << 20, 4 << 20, 1, 1 << 20),
            (std::vector<size_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
}

TEST(NcclFormatTest, ParsesSizesLikeNcclTests) {
  EXPECT_EQ(*ParseByteSize("8", "-b"), 8u);
  EXPECT_EQ(*ParseByteSize("32K", "-b"), 32768u);
  EXPECT_EQ(*ParseByteSize("1G", "-e"), 1073741824u);
  EXPECT_EQ(*ParseByteSize("128m", "-e"), 134217728u);
  auto bad = ParseByteSize("12Q", "-e");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("-e '12Q'"), std::string::npos);
}

TEST(NcclFormatTest, RowHasNcclTestsColumns) {
  ReportRow row;
  row.bytes = 1073741824;
  row.count = 268435456;
  row.redop = "sum";
  row.out_of_place = {10000.0, {107.3741824, 107.3741824}, 0};
  row.in_place = {10000.0, {107.3741824, 107.3741824}, -1};
  EXPECT_EQ(ReportRowLine(row),
            "  1073741824     268435456     float     sum      -1"
            "  10000.0  107.37  107.37       0"
            "  10000.0  107.37  107.37    N/A\n");
}

TEST(NcclFormatTest, HeaderColumnsAndFooter) {
  ReportConfig config;
  config.backend = "gloo";
  config.min_bytes = 8;
  config.max_bytes = 1024;
  config.step_factor = 2;
  config.device_lines = {DeviceLine(0, 42, "spark-0", "-", "[cpu] gloo over TCP")};
  std::string h = ReportHeader(config);
  EXPECT_NE(h.find("# Collective test starting: all_reduce_perf\n"), std::string::npos);
  EXPECT_NE(h.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 "
                   "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n"),
            std::string::npos);
  EXPECT_NE(h.find("#  Rank  0 Group  0 Pid     42 on    spark-0 device  - [cpu] gloo over TCP\n"),
            std::string::npos);
  EXPECT_NE(h.find("#       size         count      type   redop    root     time   algbw   busbw"
                   "  #wrong     time   algbw   busbw  #wrong \n"),
            std::string::npos);
  EXPECT_NE(h.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
                   "             (us)  (GB/s)  (GB/s)         \n"),
            std::string::npos);

  std::vector<ReportRow> rows(2);
  rows[0].out_of_place.bw.bus_gbps = 10;
  rows[0].in_place.bw.bus_gbps = 20;
  rows[1].out_of_place.bw.bus_gbps = 30;
  rows[1].in_place.bw.bus_gbps = 40;
  EXPECT_EQ(ReportFooter(config, rows),
            "# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 25 \n"
            "#\n# Collective test concluded: all_reduce_perf\n#\n\n");
  rows[1].in_place.wrong = 5;
  EXPECT_NE(ReportFooter(config, rows).find("# Out of bounds values : 1 FAILED\n"),
            std::string::npos);
  auto j = ReportJson(config, rows);
  EXPECT_EQ(j["out_of_bounds"]["count"], 1);
  EXPECT_EQ(j["average_bus_bandwidth"], 25.0);
}

}  // namespace
}  // namespace spark::bench
