// Entry point of the sparkctl command line: builds the CLI11 app from the command table, sets up
// logging and runs the chosen command.
#pragma once

namespace spark::cli {

// Runs sparkctl with the given arguments; returns the process exit code.
int RunSparkctl(int argc, char** argv);

}  // namespace spark::cli
