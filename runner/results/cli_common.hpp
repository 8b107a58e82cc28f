#pragma once
// What the results commands (results, table, compare, curves, report) share on the command line.
#include <string>
#include <vector>

namespace attnlab::store {
class Database;
}

namespace attnlab::results {

// Words of comma-separated lists, possibly given several times ("a,b" "c" → a, b, c); blanks
// around words dropped, empty words refused (std::invalid_argument naming the option).
std::vector<std::string> split_list(const std::vector<std::string>& values, const std::string& option);

// Throws std::runtime_error "FILE: no such database" when the file is missing: reading never
// creates one. Otherwise the path, to open with store::Database::Open::existing (readers never
// migrate: an older file is one line saying to run `attnlab db migrate`).
const std::string& existing_database(const std::string& path);

}  // namespace attnlab::results
