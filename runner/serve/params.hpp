// Reading an endpoint's query parameters, and answering inside one read transaction with the
// errors mapped to statuses: what every endpoint of api.hpp shares.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/api.hpp"

namespace attnlab::serve {

// A request the endpoint cannot answer as asked: status 400 (or 404) with the message.
struct BadRequest : std::runtime_error {
  BadRequest(const std::string& what, int status = 400) : std::runtime_error(what), status(status) {}
  int status;
};

// The parameters of a request target ("/api/runs?where=method%20%3D%20x&status=done"): each pair
// split at its first '=' (cpp-httplib's own splits at the last, so `where=method=performer` read as
// "performer"), percent-decoded, '+' a space.
Params query_params(const std::string& target);

// Refuses a parameter not in `known` (a typo would silently be ignored otherwise).
void check_known(const Params& params, std::initializer_list<const char*> known);
// Every value of a repeatable parameter, each split at commas, empty words dropped.
std::vector<std::string> words(const Params& params, const std::string& name);
// Every value of a repeatable parameter, as given (a --where expression may hold commas).
std::vector<std::string> values(const Params& params, const std::string& name);
// The parameter's one value (given twice: a BadRequest), or `fallback`.
std::string text(const Params& params, const std::string& name, const std::string& fallback);
std::optional<std::int64_t> integer(const Params& params, const std::string& name);  // a BadRequest if not one
// 1 or true, 0 or false (absent: false); anything else a BadRequest
bool flag(const Params& params, const std::string& name);

// The text of a reply: compact; a NaN or infinity is null (JSON has neither); bytes that are not
// UTF-8 (a name from an old file) are replaced, never an exception.
std::string dump(const nlohmann::ordered_json& value);

// Runs `answer` in one read transaction: its body with 200, or the error with its status:
// BadRequest its own, a malformed filter or unknown key (store::QueryError) and the results
// code's own refusals (std::runtime_error, std::invalid_argument) 400, a database that cannot be
// read (store::StoreError) 503.
Reply answer_with(store::ResultsReader& db, const Params& params, std::initializer_list<const char*> known,
                  const std::function<std::string()>& answer);

}  // namespace attnlab::serve
