// spark-engine: one process per GPU (or CPU rank) of the tensor-parallel engine.
#include "engine/cli/engine_command.h"

int main(int argc, char** argv) { return spark::engine::RunSparkEngine(argc, argv); }
