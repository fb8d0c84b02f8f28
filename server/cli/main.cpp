// slabserve: dispatches to a subcommand. Errors that escape a command end the process with a
// one-line message and exit code 1, never an abort.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"slabserve: LLM inference server for CPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", SLAB_VERSION);
  app.set_config("--config", "",
                 "Read options from a TOML/INI file: a [serve] section with the long option names as keys");
  std::vector<slab::cli::Command> commands = {slab::cli::add_generate_command(app), slab::cli::add_serve_command(app),
                                              slab::cli::add_topology_command(app)};
  CLI11_PARSE(app, argc, argv);
  try {
    for (const auto& command : commands) {
      if (int rc = command(); rc >= 0) return rc;
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
