// slabserve command line: `generate` now; `serve` arrives with the HTTP front end.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"slabserve: LLM inference server for CPUs"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
