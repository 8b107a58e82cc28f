#pragma once
// Command-line parsing shared by the subcommands: Boost.Program_options, with its errors turned
// into one line that names the command ("queue list: unrecognised option '--x'").
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace attnlab {

namespace po = boost::program_options;

// Parses `args` (the words after the command's name); a parse error is a std::runtime_error
// "COMMAND: what Boost said".
po::variables_map parse_command_line(const std::string& command, const std::vector<std::string>& args,
                                     const po::options_description& options,
                                     const po::positional_options_description& positional = {});

}  // namespace attnlab
