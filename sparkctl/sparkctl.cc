// sparkctl: the controller command line and the node-side operations, in one binary.
#include "sparkctl/cli/app.h"

int main(int argc, char** argv) { return spark::cli::RunSparkctl(argc, argv); }
