// A recursive-descent parser for JMS selectors (JMS 2.0 §3.8.1.1), from
// the loosest binding to the tightest:
//   or      := and {OR and}
//   and     := not {AND not}
//   not     := NOT not | test
//   test    := sum [ (= | <> | < | > | <= | >=) sum
//                  | [NOT] BETWEEN sum AND sum
//                  | [NOT] IN ( string {, string} )
//                  | [NOT] LIKE string [ESCAPE string]
//                  | IS [NOT] NULL ]
//   sum     := product {(+ | -) product}
//   product := unary {(* | /) unary}
//   unary   := (+ | -) unary | primary
//   primary := literal | identifier | ( or )

#include "broker/amqp/selector_node.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace wharf::amqp {
namespace {

using node = selector::node;
using node_ptr = std::unique_ptr<node>;

struct token {
    enum kind { end, ident, keyword, string, integer, real, symbol } k = end;
    std::string text; // keyword: upper case; symbol: the operator
    int64_t i = 0;
    bool int64_min = false; // integer: 9223372036854775808, which only a unary minus makes a long
    double d = 0;
    size_t at = 0;
};

constexpr std::string_view keywords[] = {"AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"};

// The JMS name `name` reads, or nullptr.
const jms_name* find_jms_name(std::string_view name) {
    for (const auto& j : jms_names)
        if (j.name == name) return &j;
    return nullptr;
}

std::string jms_name_list() {
    std::string out;
    for (const auto& j : jms_names) out += (out.empty() ? "" : ", ") + std::string(j.name);
    return out;
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool ident_part(char c) { return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

class parser {
  public:
    explicit parser(std::string_view text) : s_(text) {}

    result<node_ptr, std::string> run() {
        if (!next()) return fail(err_);
        node_ptr root = parse_or();
        if (!root) return fail(err_);
        if (tok_.k != token::end) return fail(error_at(tok_.at, "unexpected '" + tok_.text + "'"));
        return root;
    }

  private:
    std::string error_at(size_t at, const std::string& what) {
        return "selector: " + what + " at offset " + std::to_string(at);
    }
    node_ptr bad(const std::string& what) {
        if (err_.empty()) err_ = error_at(tok_.at, what);
        return nullptr;
    }

    // ---- lexer ----
    bool next() {
        while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        tok_ = token{};
        tok_.at = pos_;
        if (pos_ >= s_.size()) return true;
        const char c = s_[pos_];
        if (ident_start(c)) {
            size_t e = pos_;
            while (e < s_.size() && ident_part(s_[e])) ++e;
            tok_.text = std::string(s_.substr(pos_, e - pos_));
            pos_ = e;
            std::string upper = tok_.text;
            for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            tok_.k = token::ident;
            for (auto k : keywords)
                if (upper == k) {
                    tok_.k = token::keyword;
                    tok_.text = upper;
                }
            return true;
        }
        if (c == '\'') {
            std::string out;
            for (size_t i = pos_ + 1;; ++i) {
                if (i >= s_.size()) {
                    err_ = error_at(pos_, "a string that never ends");
                    return false;
                }
                if (s_[i] == '\'') {
                    if (i + 1 < s_.size() && s_[i + 1] == '\'') {
                        out.push_back('\'');
                        ++i;
                        continue;
                    }
                    pos_ = i + 1;
                    break;
                }
                out.push_back(s_[i]);
            }
            tok_.k = token::string;
            tok_.text = std::move(out);
            return true;
        }
        if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && pos_ + 1 < s_.size() &&
                                                           std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))))
            return number();
        static constexpr std::string_view two[] = {"<>", "<=", ">="};
        for (auto op : two)
            if (s_.substr(pos_, 2) == op) {
                tok_.k = token::symbol;
                tok_.text = std::string(op);
                pos_ += 2;
                return true;
            }
        if (std::string_view("=<>+-*/(),").find(c) != std::string_view::npos) {
            tok_.k = token::symbol;
            tok_.text = std::string(1, c);
            ++pos_;
            return true;
        }
        err_ = error_at(pos_, std::string("unexpected character '") + c + "'");
        return false;
    }

    // Java's integer literal forms: hex (0x1F) and octal (017, which is 15)
    // as well as decimal, each with an optional L; like ActiveMQ's parser
    // (Long.parseLong), a hex or octal literal must fit a positive long.
    bool radix_number() {
        const bool hex = s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X';
        const size_t from = pos_ + (hex ? 2 : 1);
        size_t e = from;
        auto digit = [hex](char c) {
            return hex ? std::isxdigit(static_cast<unsigned char>(c)) != 0 : std::isdigit(static_cast<unsigned char>(c)) != 0;
        };
        while (e < s_.size() && digit(s_[e])) ++e;
        const std::string text(s_.substr(pos_, e - pos_));
        uint64_t v = 0;
        const auto [p, ec] = std::from_chars(s_.data() + from, s_.data() + e, v, hex ? 16 : 8);
        if (e == from || p != s_.data() + e) {
            err_ = error_at(pos_, text + " is not a" + (hex ? " hexadecimal" : "n octal") + " number");
            return false;
        }
        if (ec != std::errc() || v > static_cast<uint64_t>(INT64_MAX)) {
            err_ = error_at(pos_, "the number " + text + " is too large");
            return false;
        }
        tok_.k = token::integer;
        tok_.i = static_cast<int64_t>(v);
        tok_.text = text;
        pos_ = e;
        if (pos_ < s_.size() && (s_[pos_] == 'l' || s_[pos_] == 'L')) ++pos_;
        return end_of_number();
    }

    bool end_of_number() {
        if (pos_ < s_.size() && ident_part(s_[pos_])) {
            err_ = error_at(pos_, "a number runs into '" + std::string(1, s_[pos_]) + "'");
            return false;
        }
        return true;
    }

    bool number() {
        if (s_[pos_] == '0' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X'))
            return radix_number();
        size_t e = pos_;
        bool real = false;
        while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
        if (e < s_.size() && s_[e] == '.') {
            real = true;
            ++e;
            while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
        }
        if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
            size_t x = e + 1;
            if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
            if (x < s_.size() && std::isdigit(static_cast<unsigned char>(s_[x]))) {
                real = true;
                e = x;
                while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
            }
        }
        const std::string text(s_.substr(pos_, e - pos_));
        if (real || (e < s_.size() && (s_[e] == 'f' || s_[e] == 'F' || s_[e] == 'd' || s_[e] == 'D'))) {
            tok_.k = token::real;
            tok_.d = std::strtod(text.c_str(), nullptr);
            if (e < s_.size() && std::string_view("fFdD").find(s_[e]) != std::string_view::npos) ++e;
        } else if (text.size() > 1 && text[0] == '0') {
            return radix_number();
        } else {
            tok_.k = token::integer;
            const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), tok_.i);
            tok_.int64_min = ec == std::errc::result_out_of_range && text == "9223372036854775808";
            if (tok_.int64_min) {
                tok_.i = INT64_MIN;
            } else if (ec != std::errc()) {
                err_ = error_at(pos_, "the number " + text + " is too large");
                return false;
            }
            if (e < s_.size() && (s_[e] == 'l' || s_[e] == 'L')) ++e;
        }
        tok_.text = text;
        pos_ = e;
        return end_of_number();
    }

    bool is_kw(std::string_view k) const { return tok_.k == token::keyword && tok_.text == k; }
    bool is_sym(std::string_view k) const { return tok_.k == token::symbol && tok_.text == k; }
    // Consumes the keyword or symbol if it is next.
    bool take_kw(std::string_view k) { return is_kw(k) && next(); }
    bool take_sym(std::string_view k) { return is_sym(k) && next(); }

    // nullptr (with the error) once the tree would be too deep.
    node_ptr make(node::op o, node_ptr a = nullptr, node_ptr b = nullptr) {
        const int below = std::max(a ? a->height : 0, b ? b->height : 0);
        if (below + 1 > max_selector_height)
            return bad("the selector is too deep (at most " + std::to_string(max_selector_height) +
                       " operators inside one another, a chain of ORs, ANDs or + counting each)");
        auto n = std::make_unique<node>();
        n->o = o;
        n->height = below + 1;
        if (a) n->kids.push_back(std::move(a));
        if (b) n->kids.push_back(std::move(b));
        return n;
    }

    // ---- grammar ----
    // One left-associative level: operands from `lower`, joined by any of
    // `ops` (keywords or symbols).
    struct infix {
        std::string_view text;
        bool keyword;
        node::op o;
    };
    node_ptr left_assoc(std::initializer_list<infix> ops, node_ptr (parser::*lower)()) {
        node_ptr left = (this->*lower)();
        while (left) {
            const infix* hit = nullptr;
            for (const infix& i : ops)
                if (i.keyword ? is_kw(i.text) : is_sym(i.text)) hit = &i;
            if (hit == nullptr) break;
            const node::op o = hit->o;
            if (!next()) return nullptr;
            node_ptr right = (this->*lower)();
            if (!right) return nullptr;
            left = make(o, std::move(left), std::move(right));
        }
        return left;
    }
    node_ptr parse_or() { return left_assoc({{"OR", true, node::op::or_}}, &parser::parse_and); }
    node_ptr parse_and() { return left_assoc({{"AND", true, node::op::and_}}, &parser::parse_not); }
    // Nesting (parentheses, NOT, signs) has a bound, so that a hostile
    // selector cannot exhaust the stack.
    struct nest {
        explicit nest(int& d) : d_(d) { ++d_; }
        ~nest() { --d_; }
        int& d_;
    };
    static constexpr int max_depth = 100;

    node_ptr parse_not() {
        nest n(depth_);
        if (depth_ > max_depth) return bad("the selector nests too deeply");
        if (is_kw("NOT")) {
            if (!next()) return nullptr;
            node_ptr inner = parse_not();
            return inner ? make(node::op::not_, std::move(inner)) : nullptr;
        }
        return parse_test();
    }
    node_ptr parse_test() {
        node_ptr left = parse_sum();
        if (!left) return nullptr;
        static const std::pair<std::string_view, node::op> comparisons[] = {
            {"=", node::op::eq}, {"<>", node::op::ne}, {"<", node::op::lt},
            {">", node::op::gt}, {"<=", node::op::le}, {">=", node::op::ge}};
        for (const auto& [sym, o] : comparisons)
            if (is_sym(sym)) {
                if (!next()) return nullptr;
                node_ptr right = parse_sum();
                return right ? make(o, std::move(left), std::move(right)) : nullptr;
            }
        if (is_kw("IS")) {
            if (!next()) return nullptr;
            node_ptr n = make(node::op::is_null, std::move(left));
            if (!n) return nullptr;
            n->negated = is_kw("NOT");
            if (n->negated && !next()) return nullptr;
            if (!is_kw("NULL")) return bad("IS must be followed by [NOT] NULL");
            return next() ? std::move(n) : nullptr;
        }
        bool negated = false;
        if (is_kw("NOT")) {
            negated = true;
            if (!next()) return nullptr;
            if (!is_kw("BETWEEN") && !is_kw("IN") && !is_kw("LIKE")) return bad("NOT here must be followed by BETWEEN, IN or LIKE");
        }
        if (is_kw("BETWEEN")) {
            if (!next()) return nullptr;
            node_ptr low = parse_sum();
            if (!low) return nullptr;
            if (!is_kw("AND")) return bad("BETWEEN needs AND");
            if (!next()) return nullptr;
            node_ptr high = parse_sum();
            if (!high) return nullptr;
            node_ptr n = make(node::op::between, std::move(left), std::move(low));
            if (!n || high->height + 1 > max_selector_height) return n ? bad("the selector is too deep") : nullptr;
            n->height = std::max(n->height, high->height + 1);
            n->kids.push_back(std::move(high));
            n->negated = negated;
            return n;
        }
        if (is_kw("IN")) {
            if (left->o != node::op::identifier) return bad("IN applies to a property name");
            if (!next()) return nullptr;
            if (!is_sym("(")) return bad("IN needs a list in parentheses");
            node_ptr n = make(node::op::in, std::move(left));
            if (!n) return nullptr;
            n->negated = negated;
            do {
                if (!next()) return nullptr;
                if (tok_.k != token::string) return bad("IN lists only strings");
                n->set.push_back(tok_.text);
                if (!next()) return nullptr;
            } while (is_sym(","));
            if (!is_sym(")")) return bad("the IN list does not end with ')'");
            return next() ? std::move(n) : nullptr;
        }
        if (is_kw("LIKE")) {
            if (left->o != node::op::identifier) return bad("LIKE applies to a property name");
            if (!next()) return nullptr;
            if (tok_.k != token::string) return bad("LIKE needs a pattern string");
            node_ptr n = make(node::op::like, std::move(left));
            if (!n) return nullptr;
            n->negated = negated;
            const std::string pattern = tok_.text;
            if (!next()) return nullptr;
            int escape = -1;
            if (is_kw("ESCAPE")) {
                if (!next()) return nullptr;
                const auto cps = code_points(tok_.text);
                if (tok_.k != token::string || cps.size() != 1) return bad("ESCAPE needs a one-character string");
                escape = static_cast<int>(cps[0]);
                if (!next()) return nullptr;
            }
            n->like = compile_like(pattern, escape);
            for (size_t i = 1; i + 1 < n->like.parts.size(); ++i)
                if (n->like.parts[i].size() > max_like_part)
                    return bad("a part of a LIKE pattern between two %s is at most " + std::to_string(max_like_part) +
                               " characters");
            return n;
        }
        return left;
    }
    node_ptr parse_sum() {
        return left_assoc({{"+", false, node::op::add}, {"-", false, node::op::sub}}, &parser::parse_product);
    }
    node_ptr parse_product() {
        return left_assoc({{"*", false, node::op::mul}, {"/", false, node::op::div}}, &parser::parse_unary);
    }
    node_ptr parse_unary() {
        nest n(depth_);
        if (depth_ > max_depth) return bad("the selector nests too deeply");
        if (is_sym("+") || is_sym("-")) {
            const bool minus = is_sym("-");
            if (!next()) return nullptr;
            if (minus && tok_.k == token::integer && tok_.int64_min) { // -9223372036854775808: Long.MIN_VALUE
                node_ptr n = make(node::op::literal);
                if (!n) return nullptr;
                n->value = INT64_MIN;
                return next() ? std::move(n) : nullptr;
            }
            node_ptr inner = parse_unary();
            if (!inner) return nullptr;
            return minus ? make(node::op::neg, std::move(inner)) : std::move(inner);
        }
        return parse_primary();
    }
    node_ptr parse_primary() {
        node_ptr n;
        switch (tok_.k) {
        case token::end: return bad("the selector ends too soon");
        case token::string:
            n = make(node::op::literal);
            n->text = tok_.text;
            n->value = std::string_view(n->text); // the node stays where make() put it
            break;
        case token::integer:
            if (tok_.int64_min) return bad("the number " + tok_.text + " is too large (only -" + tok_.text + " is a long)");
            n = make(node::op::literal);
            n->value = tok_.i;
            break;
        case token::real: n = make(node::op::literal); n->value = tok_.d; break;
        case token::ident:
            n = make(node::op::identifier);
            // JMSX and vendor JMS_ names not in the table are properties
            // (JMS 2.0 §3.8.1.1: NULL when a message lacks them); other JMS
            // names are headers a selector may not name.
            if (tok_.text.rfind("JMS", 0) == 0) {
                const jms_name* j = find_jms_name(tok_.text);
                const bool property = tok_.text.rfind("JMSX", 0) == 0 || tok_.text.rfind("JMS_", 0) == 0;
                if (j == nullptr && !property)
                    return bad(tok_.text + " is not a JMS name a selector can use here (those it can: " +
                               jms_name_list() + "; other JMSX and JMS_ names are read as properties)");
                if (j != nullptr) n->field = j->field;
            }
            n->name = tok_.text;
            break;
        case token::keyword:
            if (tok_.text != "TRUE" && tok_.text != "FALSE") return bad("unexpected " + tok_.text);
            n = make(node::op::literal);
            n->value = tok_.text == "TRUE";
            break;
        case token::symbol:
            if (tok_.text != "(") return bad("unexpected '" + tok_.text + "'");
            if (!next()) return nullptr;
            n = parse_or();
            if (!n) return nullptr;
            if (!is_sym(")")) return bad("a '(' is never closed");
            break;
        }
        return next() ? std::move(n) : nullptr;
    }

    std::string_view s_;
    size_t pos_ = 0;
    token tok_;
    std::string err_;
    int depth_ = 0;
};

} // namespace

result<std::unique_ptr<selector::node>, std::string> parse_selector(std::string_view text) {
    return parser(text).run();
}

} // namespace wharf::amqp
