#include "serve/params.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string_view>

#include "attnlab/query.hpp"

namespace attnlab::serve {

namespace {

// Text as its address wrote it where it holds control bytes (%00 as %00): quoted whole, never cut
// at a NUL by an error message's C string.
std::string as_written(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    char escaped[4];
    std::snprintf(escaped, sizeof escaped, "%%%02X", c);
    out += escaped;
  }
  return out;
}

// %XX as its byte, '+' as a space; a '%' without two hex digits after it stays as written.
std::string decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto hex = [&](std::size_t at) { return at < text.size() && std::isxdigit(static_cast<unsigned char>(text[at])); };
    if (text[i] == '%' && hex(i + 1) && hex(i + 2)) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

bool has_control(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace

Params query_params(const std::string& target) {
  Params params;
  const auto question = target.find('?');
  if (question == std::string::npos) return params;
  std::string_view rest(target);
  rest.remove_prefix(question + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto equals = pair.find('=');
    params.emplace(decoded(pair.substr(0, equals)), equals == std::string_view::npos ? "" : decoded(pair.substr(equals + 1)));
  }
  return params;
}

void check_known(const Params& params, std::initializer_list<const char*> known) {
  for (const auto& [name, value] : params)
    if (has_control(name) || has_control(value))
      throw BadRequest("parameter '" + as_written(name) + "': '" + as_written(value) + "' holds a control character");
  for (const auto& [name, value] : params) {
    if (std::any_of(known.begin(), known.end(), [&](const char* k) { return name == k; })) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw BadRequest("unknown parameter '" + name + "' (known: " + (list.empty() ? "none" : list) + ")");
  }
}

std::vector<std::string> values(const Params& params, const std::string& name) {
  std::vector<std::string> out;
  for (auto [it, end] = params.equal_range(name); it != end; ++it) out.push_back(it->second);
  return out;
}

std::vector<std::string> words(const Params& params, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& value : values(params, name)) {
    std::stringstream list(value);
    for (std::string word; std::getline(list, word, ',');)
      if (!word.empty()) out.push_back(word);
  }
  return out;
}

std::string text(const Params& params, const std::string& name, const std::string& fallback) {
  if (params.count(name) > 1) throw BadRequest("parameter '" + name + "' given more than once");
  const auto it = params.find(name);
  return it == params.end() ? fallback : it->second;
}

std::optional<std::int64_t> integer(const Params& params, const std::string& name) {
  const std::string value = text(params, name, "");
  if (value.empty()) return std::nullopt;
  // digits, an optional '-' first: stoll alone would take " 1" and "+1" as 1
  const std::size_t digits_from = value[0] == '-' ? 1 : 0;
  bool digits = value.size() > digits_from && value.size() - digits_from <= 18;
  for (std::size_t i = digits_from; digits && i < value.size(); ++i) digits = value[i] >= '0' && value[i] <= '9';
  if (!digits) throw BadRequest("parameter '" + name + "': '" + value + "' is not an integer");
  return std::stoll(value);
}

bool flag(const Params& params, const std::string& name) {
  const std::string value = text(params, name, "false");
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  throw BadRequest("parameter '" + name + "': '" + value + "' is not a flag (1, true, 0 or false)");
}

std::string dump(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Reply answer_with(store::ResultsReader& db, const Params& params, std::initializer_list<const char*> known,
                  const std::function<std::string()>& answer) {
  try {
    check_known(params, known);
    store::ReadTransaction snapshot(db);
    return {200, answer()};
  } catch (const BadRequest& e) {
    return error_reply(e.status, e.what());
  } catch (const store::QueryError& e) {
    return error_reply(400, e.what());
  } catch (const store::StoreError& e) {
    return error_reply(503, e.what());
  } catch (const std::runtime_error& e) {
    return error_reply(400, e.what());
  } catch (const std::invalid_argument& e) {
    return error_reply(400, e.what());
  }
}

}  // namespace attnlab::serve
