// The command line of `spark-bench`, the per-node program `sparkctl bench` and `sparkctl
// selftest` start on each rank (locally or over SSH):
//   spark-bench allreduce|allgather -b -e -f -i -n -w -c --rank R --world-size N
//               --master ADDR:PORT [--device D] [--backend auto|nccl|gloo] [--json]
//   spark-bench link-serve --bind ADDR --port P [--rdma DEV] [--seconds S]
//   spark-bench link-probe --peer ADDR --port P [--bind ADDR] [--rdma DEV] [--size B]
//               [--seconds S]                    (prints one JSON object)
//   spark-bench rdma-info                        (prints the verbs view of the devices as JSON)
// Thread-safety: called once from main.
#pragma once

namespace spark::bench {

// Parses argv and runs the subcommand; returns the exit status (0 ok, 2 failed).
int RunBenchCli(int argc, char** argv);

}  // namespace spark::bench
