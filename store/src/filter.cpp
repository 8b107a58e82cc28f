// The --where language (attnlab/query.hpp) compiled to SQL over `job_outcomes AS o`. The SQL text
// is assembled only from the constant fragments below; every key and value the user wrote is a
// bound parameter.
#include <cctype>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <map>

#include "attnlab/query.hpp"
#include "builtin_keys.hpp"

namespace attnlab::store {
namespace {

enum class ColumnType { text, integer };

struct Builtin {
  const char* sql;  // a column of job_outcomes
  ColumnType type;
};

// `status` is the job's state: what a user means by "the runs that failed".
const std::map<std::string, Builtin>& builtins() {
  static const std::map<std::string, Builtin> columns = {
      {"method", {"o.method", ColumnType::text}},         {"dataset", {"o.dataset", ColumnType::text}},
      {"experiment", {"o.experiment", ColumnType::text}}, {"state", {"o.state", ColumnType::text}},
      {"status", {"o.state", ColumnType::text}},          {"seed", {"o.seed", ColumnType::integer}},
      {"job", {"o.job_id", ColumnType::integer}},         {"run", {"o.run_id", ColumnType::integer}},
  };
  return columns;
}

// A config value compares as a number only where it is one (JSON's number grammar covers what
// the runner writes: 0.001, 1e-08, -3); otherwise never, so "abc" is not 0.
constexpr const char* kConfigValue = "(SELECT value FROM job_params WHERE job_id = o.job_id AND key = ?)";
constexpr const char* kConfigNumber =
    "(SELECT CASE WHEN json_valid(value) AND json_type(value) IN ('integer', 'real') THEN CAST(value AS REAL) END "
    "FROM job_params WHERE job_id = o.job_id AND key = ?)";

// A job belongs to every experiment whose file names it (experiment_jobs); the name follows.
constexpr const char* kOwnedBy =
    "EXISTS (SELECT 1 FROM experiment_jobs AS ej JOIN experiments AS e ON e.id = ej.experiment_id "
    "WHERE ej.job_id = o.job_id AND e.name ";

struct Token {
  enum class Kind { word, quoted, op, lparen, rparen, comma, end } kind;
  std::string text;
  std::size_t column;  // 1-based, for messages
};

class Parser {
 public:
  explicit Parser(const std::string& expression) : expression_(expression) { tokenize(); }

  CompiledFilter parse() {
    if (peek().kind == Token::Kind::end) fail("the expression is empty", peek());
    out_.sql = "(" + expr() + ")";
    if (peek().kind != Token::Kind::end) fail("unexpected '" + peek().text + "'", peek());
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, const Token& at) const {
    // a pathological expression (thousands of parentheses) is cut short to keep the line readable
    const std::string shown = expression_.size() > 80 ? expression_.substr(0, 60) + "..." : expression_;
    throw QueryError("--where '" + shown + "': " + what + " at column " + std::to_string(at.column));
  }

  static bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+' || c == ':' ||
           c == '/' || c == '[' || c == ']' || c == '@' || c == '%' || c == '~' || c == '#';
  }

  void tokenize() {
    const std::string& s = expression_;
    std::size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      const std::size_t column = i + 1;
      if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
      if (c == '(') { tokens_.push_back({Token::Kind::lparen, "(", column}); ++i; continue; }
      if (c == ')') { tokens_.push_back({Token::Kind::rparen, ")", column}); ++i; continue; }
      if (c == ',') { tokens_.push_back({Token::Kind::comma, ",", column}); ++i; continue; }
      if (c == '\'' || c == '"') {
        std::string text;
        ++i;
        for (;;) {
          if (i >= s.size()) fail(std::string("unterminated ") + c + "...", {Token::Kind::end, "", column});
          if (s[i] == c) {
            if (i + 1 < s.size() && s[i + 1] == c) { text += c; i += 2; continue; }
            ++i;
            break;
          }
          text += s[i++];
        }
        tokens_.push_back({Token::Kind::quoted, text, column});
        continue;
      }
      if (c == '=' || c == '!' || c == '<' || c == '>') {
        std::string op(1, c);
        if (i + 1 < s.size() && (s[i + 1] == '=' || (c == '<' && s[i + 1] == '>'))) op += s[i + 1];
        i += op.size();
        if (op == "!") fail("'!' is not an operator (use != or NOT)", {Token::Kind::op, op, column});
        tokens_.push_back({Token::Kind::op, op, column});
        continue;
      }
      if (is_word_char(c)) {
        std::size_t j = i;
        while (j < s.size() && is_word_char(s[j])) ++j;
        tokens_.push_back({Token::Kind::word, s.substr(i, j - i), column});
        i = j;
        continue;
      }
      // the whole character, not its first byte (UTF-8)
      const unsigned char lead = static_cast<unsigned char>(c);
      const std::size_t width = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      fail("unexpected character '" + s.substr(i, width) + "'" + (width > 1 ? " (quote a value that holds it)" : ""),
           {Token::Kind::end, "", column});
    }
    tokens_.push_back({Token::Kind::end, "", s.size() + 1});
  }

  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool keyword(const char* k) const {
    const Token& t = peek();
    if (t.kind != Token::Kind::word || t.text.size() != std::char_traits<char>::length(k)) return false;
    for (std::size_t i = 0; i < t.text.size(); ++i)
      if (std::toupper(static_cast<unsigned char>(t.text[i])) != k[i]) return false;
    return true;
  }

  // AND and OR chains are written flat ("(a AND b AND c)"): SQLite's parser reduces them as it
  // goes, so only the user's own nesting (parentheses, NOT) deepens the SQL. That nesting is
  // bounded so the compiled SQL stays well inside SQLite's parser stack (YYSTACKDEPTH 100) and
  // this recursive parser's own stack.
  std::string expr() {
    std::string sql = term();
    while (keyword("OR")) { next(); sql += " OR " + term(); }
    return sql;  // unparenthesized: factor() and parse() wrap it
  }
  std::string term() {  // AND binds tighter than OR in SQL too: no parentheses needed
    std::string sql = factor();
    while (keyword("AND")) { next(); sql += " AND " + factor(); }
    return sql;
  }
  std::string factor() {
    if (keyword("NOT")) {
      const Nest nest(*this, peek());
      next();
      return "NOT " + factor();  // a factor is a leaf comparison or parenthesized: no parentheses needed
    }
    if (peek().kind == Token::Kind::lparen) {
      const Nest nest(*this, peek());
      next();
      std::string sql = expr();
      if (peek().kind != Token::Kind::rparen) fail("expected ')'", peek());
      next();
      return "(" + sql + ")";
    }
    return comparison();
  }
  // One level of the user's nesting (an opening parenthesis or a NOT) while it is parsed.
  struct Nest {
    Parser& parser;
    Nest(Parser& p, const Token& at) : parser(p) {
      if (++parser.depth_ > kMaxWhereNesting)
        parser.fail("nesting deeper than " + std::to_string(kMaxWhereNesting), at);
    }
    ~Nest() { --parser.depth_; }
  };

  std::string comparison() {
    const Token key = next();
    if (key.kind != Token::Kind::word || keyword_text(key.text))
      fail(key.kind == Token::Kind::end ? "expected a key" : "expected a key, not '" + key.text + "'", key);
    bool negated = false;
    if (keyword("NOT")) { next(); negated = true; if (!keyword("IN")) fail("expected IN after NOT", peek()); }
    if (keyword("IN")) {
      next();
      if (peek().kind != Token::Kind::lparen) fail("expected '(' after IN", peek());
      next();
      std::string sql;
      for (;;) {
        sql += (sql.empty() ? "" : " OR ") + leaf(key, "=", value());
        if (peek().kind == Token::Kind::comma) { next(); continue; }
        if (peek().kind != Token::Kind::rparen) fail("expected ',' or ')' in the IN list", peek());
        next();
        break;
      }
      return negated ? "(NOT (" + sql + "))" : "(" + sql + ")";
    }
    const Token op = next();
    if (op.kind != Token::Kind::op)
      fail("expected an operator (= != < <= > >= IN) after '" + key.text + "'", op);
    return leaf(key, op.text == "==" ? "=" : op.text == "<>" ? "!=" : op.text, value());
  }

  static bool keyword_text(const std::string& w) {
    std::string u;
    for (char c : w) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u == "AND" || u == "OR" || u == "NOT" || u == "IN";
  }

  Token value() {
    const Token t = next();
    if (t.kind != Token::Kind::word && t.kind != Token::Kind::quoted)
      fail(t.kind == Token::Kind::end ? "expected a value" : "expected a value, not '" + t.text + "'", t);
    return t;
  }

  static std::optional<double> as_number(const Token& t) {
    if (t.kind != Token::Kind::word || t.text.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(t.text.c_str(), &end);
    if (end != t.text.c_str() + t.text.size() || !std::isfinite(v)) return std::nullopt;
    // strtod also reads "inf", "nan" and hex: only plain decimal numbers count here
    for (char c : t.text)
      if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
        return std::nullopt;
    return v;
  }

  // op is one of = != < <= > >=, a constant from the tokenizer.
  std::string leaf(const Token& key, const std::string& op, const Token& value) {
    using Param = CompiledFilter::Param;
    // a chain of comparisons is a tree as deep as it is long in SQLite (its limit: depth 1000)
    if (++comparisons_ > kMaxWhereComparisons)
      fail("more than " + std::to_string(kMaxWhereComparisons) + " comparisons", value);
    const auto b = builtins().find(key.text);
    if (key.text == "experiment") {  // every experiment that owns the job, not only its first
      out_.params.push_back({Param::Kind::text, value.text, 0, 0});
      return op == "!=" ? std::string("NOT ") + kOwnedBy + "= ?)" : std::string(kOwnedBy) + op + " ?)";
    }
    if (b != builtins().end()) {
      if (b->second.type == ColumnType::integer) {
        const auto number = as_number(value);
        if (!number || *number != static_cast<double>(static_cast<std::int64_t>(*number)))
          fail(key.text + " takes an integer, not '" + value.text + "'", value);
        out_.params.push_back({Param::Kind::integer, "", static_cast<std::int64_t>(*number), 0});
      } else {
        out_.params.push_back({Param::Kind::text, value.text, 0, 0});
      }
      return std::string(b->second.sql) + " " + op + " ?";
    }
    out_.config_keys.push_back(key.text);
    out_.params.push_back({Param::Kind::text, key.text, 0, 0});
    if (const auto number = as_number(value)) {
      out_.params.push_back({Param::Kind::real, "", 0, *number});
      return std::string(kConfigNumber) + " " + op + " ?";
    }
    out_.params.push_back({Param::Kind::text, value.text, 0, 0});
    return std::string(kConfigValue) + " " + op + " ?";
  }

  const std::string& expression_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;        // open parentheses and NOTs around the token being parsed
  int comparisons_ = 0;  // leaves so far (each IN value is one)
  CompiledFilter out_;
};

}  // namespace

bool is_builtin_key(const std::string& key) { return builtins().count(key) > 0; }

const char* builtin_column(const std::string& key) {
  const auto it = builtins().find(key);
  return it == builtins().end() ? nullptr : it->second.sql;
}

CompiledFilter compile_filter(const std::string& expression) { return Parser(expression).parse(); }

}  // namespace attnlab::store
