// spark-bench: the per-node benchmark program (see sparkctl/bench/rank_cli.h).
#include "sparkctl/bench/rank_cli.h"

int main(int argc, char** argv) { return spark::bench::RunBenchCli(argc, argv); }
