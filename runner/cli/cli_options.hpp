#pragma once
// The command-line plumbing every command shares, written once: parsing (Boost.Program_options,
// its errors one line naming the command), the options several commands take (--plugins,
// --device, --threads, --cache-dir), comma lists, and "the database must exist" for readers.
// (Loading the plugins the --plugins folders name: load_plugins, plugin_host.hpp.)
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace attnlab {

namespace po = boost::program_options;

// Parses `args` (the words after the command's name); a parse error is a std::runtime_error
// "COMMAND: what Boost said". --threads below 0 and a --plugins folder that does not exist are
// refused here for every command.
po::variables_map parse_command_line(const std::string& command, const std::vector<std::string>& args,
                                     const po::options_description& options,
                                     const po::positional_options_description& positional = {});

// The shared options, one definition each.
void add_plugins_option(po::options_description& options);    // --plugins DIR (repeatable)
void add_device_option(po::options_description& options);     // --device (cpu)
void add_threads_option(po::options_description& options);    // --threads (0: ATTNLAB_THREADS or every core)
void add_cache_dir_option(po::options_description& options);  // --cache-dir ("": the default cache)
// The four a study of methods or stored runs takes (bench, approx, variance, gradients, spectrum,
// instability): --device, --threads, --cache-dir, --plugins.
void add_study_options(po::options_description& options);

std::vector<std::string> plugin_folders(const po::variables_map& vm);  // --plugins, in order
// Strings of a repeatable option ({} when not given).
std::vector<std::string> option_values(const po::variables_map& vm, const std::string& name);


// Comma lists, one rule for every option that takes them: values given several times are joined
// ("a,b" "c" -> a, b, c), blanks around words dropped, a word named twice kept once, an empty word
// refused (std::invalid_argument "OPTION 'a,,b': an empty name").
std::vector<std::string> split_list(const std::vector<std::string>& values, const std::string& option);
std::vector<std::string> split_list(const std::string& value, const std::string& option);
// The same, each word a positive integer (std::invalid_argument "OPTION '4,x': expected positive
// integers separated by commas").
std::vector<std::int64_t> split_positive_integers(const std::string& value, const std::string& option);

// Throws std::runtime_error "FILE: no such database" when the file is missing (reading never
// creates one); otherwise the path.
const std::string& existing_database(const std::string& path);

}  // namespace attnlab
