#include "sparkctl/dashboard/prometheus_text.h"

#include <gtest/gtest.h>

namespace spark::dashboard {
namespace {

constexpr char kBefore[] =
    "# HELP vllm:time_to_first_token_seconds TTFT\n"
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"1.0\",model_name=\"m\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 2.0\n"
    "vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 100.0\n";
constexpr char kAfter[] =
    "vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} 6.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"1.0\",model_name=\"m\"} 12.0\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 12.0\n"
    "vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 160.0\n"
    "vllm:num_requests_running{model_name=\"m\"} 3.0 1700000000000\n"
    "spark:odd{path=\"a\\\"b\"} 1\n";

TEST(PrometheusTextTest, ParsesLabelsValuesAndTimestamps) {
  MetricsBody b(kAfter);
  ASSERT_EQ(b.samples().size(), 7u);
  EXPECT_EQ(b.samples()[0].labels.at("le"), "0.1");
  EXPECT_EQ(b.samples()[0].labels.at("model_name"), "m");
  EXPECT_EQ(b.Sum("vllm:num_requests_running"), 3.0);  // the timestamp is not the value
  EXPECT_EQ(b.samples()[6].labels.at("path"), "a\"b");
  EXPECT_FALSE(b.Sum("vllm:absent").has_value());
}

TEST(PrometheusTextTest, QuantileOfTheObservationsBetweenTwoBodies) {
  // New observations: 4 in (0.1, 0.5], 6 in (0.5, 1.0]. Median rank 5: one into the second
  // bucket of six: 0.5 + 0.5 * 1/6.
  auto p50 = QuantileOfChange(MetricsBody(kBefore), MetricsBody(kAfter),
                              "vllm:time_to_first_token_seconds", 0.5);
  ASSERT_TRUE(p50.has_value());
  EXPECT_NEAR(*p50, 0.5 + 0.5 / 6, 1e-9);
  // Without a before: all 12 (2 at or below 0.1): rank 6 -> 0.1 + 0.4 * (6-2)/4 = 0.5.
  auto all = QuantileOfChange(MetricsBody(), MetricsBody(kAfter),
                              "vllm:time_to_first_token_seconds", 0.5);
  ASSERT_TRUE(all.has_value());
  EXPECT_NEAR(*all, 0.5, 1e-9);
}

TEST(PrometheusTextTest, NoNewObservationsHaveNoQuantile) {
  EXPECT_FALSE(QuantileOfChange(MetricsBody(kBefore), MetricsBody(kBefore),
                                "vllm:time_to_first_token_seconds", 0.9)
                   .has_value());
  EXPECT_FALSE(
      QuantileOfChange(MetricsBody(), MetricsBody(kAfter), "vllm:absent_seconds", 0.9).has_value());
}

}  // namespace
}  // namespace spark::dashboard
