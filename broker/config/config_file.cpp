// The config file: TOML (toml++) walked table by table, every key checked,
// every message carrying the file and line.

#include "broker/config/config_layer.hpp"

#include <toml++/toml.h>

#include <map>
#include <sstream>

namespace wharf::config::detail {
namespace {

std::string describe(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::none: return "nothing";
    }
    return "an unknown type";
}

class toml_source final : public value_source {
  public:
    explicit toml_source(const toml::node& n) : node_(n) {}

    result<std::string, std::string> get_string() const override {
        if (auto s = node_.as_string()) return s->get();
        return fail("expected a string, got " + describe(node_));
    }
    result<int64_t, std::string> get_integer() const override {
        if (auto i = node_.as_integer()) return i->get();
        return fail("expected an integer, got " + describe(node_));
    }
    result<bool, std::string> get_bool() const override {
        if (auto b = node_.as_boolean()) return b->get();
        return fail("expected true or false, got " + describe(node_));
    }
    result<double, std::string> get_seconds() const override {
        if (auto i = node_.as_integer()) return static_cast<double>(i->get());
        if (auto f = node_.as_floating_point()) return f->get();
        return fail("expected a number of seconds, got " + describe(node_));
    }
    result<std::vector<std::string>, std::string> get_string_list() const override {
        auto arr = node_.as_array();
        if (!arr) return fail("expected an array of strings, got " + describe(node_));
        std::vector<std::string> out;
        for (std::size_t i = 0; i < arr->size(); ++i) {
            auto s = (*arr)[i].as_string();
            if (!s)
                return fail("element " + std::to_string(i + 1) + ": expected a string, got " +
                            describe((*arr)[i]));
            out.push_back(s->get());
        }
        return out;
    }

  private:
    const toml::node& node_;
};

class file_parser {
  public:
    explicit file_parser(std::string_view origin) : origin_(origin) {}

    result<file_layer, config_error> parse(std::string_view text) {
        toml::table root;
        try {
            root = toml::parse(text, origin_);
        } catch (const toml::parse_error& e) {
            return fail(config_error{2, at(e.source()) + ": TOML syntax error (column " +
                                            std::to_string(e.source().begin.column) +
                                            "): " + std::string(e.description())});
        }
        if (auto bad = walk_root(root)) return fail(config_error{2, std::move(*bad)});
        return std::move(layer_);
    }

  private:
    std::string at(const toml::source_region& r) const {
        return "config " + origin_ + ":" + std::to_string(r.begin.line);
    }
    // The key's own position if toml++ recorded it, else its value's.
    std::string at(const toml::key& k, const toml::node& v) const {
        return at(k.source().begin.line != 0 ? k.source() : v.source());
    }

    std::optional<std::string> walk_root(const toml::table& root) {
        std::vector<std::string_view> known(top_keys().begin(), top_keys().end());
        known.insert(known.end(), {"listener", "queue-defaults", "queue", "plugin"});

        std::vector<listener_entry> from_listen, from_tables;
        bool any_listener = false;
        std::string listen_at; // where `listen` is, if it is
        for (auto&& [k, v] : root) {
            const std::string_view key = k.str();
            if (key == "listener") {
                any_listener = true;
                if (auto bad = walk_array_of_tables(k, v, [&](const toml::table& t) {
                        return walk_listener(t, from_tables);
                    }))
                    return bad;
            } else if (key == "queue-defaults") {
                auto t = v.as_table();
                if (!t)
                    return at(k, v) + ": key 'queue-defaults': expected a table " +
                           "([queue-defaults]), got " + describe(v);
                if (auto bad = walk_policy(*t, "[queue-defaults]", layer_.queue_defaults))
                    return bad;
            } else if (key == "plugin") {
                if (auto bad = walk_plugins(k, v)) return bad;
            } else if (key == "queue") {
                if (auto bad = walk_array_of_tables(
                        k, v, [&](const toml::table& t) { return walk_queue(t); }))
                    return bad;
            } else if (is_key_of(top_keys(), key)) {
                if (auto bad = set_top_key(layer_.top, key, toml_source(v), at(v.source())))
                    return at(v.source()) + ": key '" + std::string(key) + "': " + *bad;
                if (key == "listen") {
                    any_listener = true;
                    listen_at = at(v.source());
                    from_listen = std::move(*layer_.top.listeners);
                    layer_.top.listeners.reset();
                }
            } else {
                return at(k, v) + ": " + unknown_key_message(key, known);
            }
        }
        if (any_listener) {
            // listen = [] and no [[listener]] tables: a node nobody could reach.
            if (from_listen.empty() && from_tables.empty())
                return (listen_at.empty() ? "config " + origin_ : listen_at) +
                       ": key 'listen': no address to listen on; give at least one \"HOST:PORT\" "
                       "(or a [[listener]] table)";
            from_listen.insert(from_listen.end(), from_tables.begin(), from_tables.end());
            layer_.top.listeners = std::move(from_listen);
        }
        return std::nullopt;
    }

    // [plugin.NAME] tables: each key's value kept as text for the plugin
    // to validate (it names the key in its own errors).
    std::optional<std::string> walk_plugins(const toml::key& k, const toml::node& v) {
        auto t = v.as_table();
        if (!t) return at(k, v) + ": key 'plugin': expected tables [plugin.NAME], got " + describe(v);
        for (auto&& [name, section] : *t) {
            auto st = section.as_table();
            if (!st)
                return at(name, section) + ": key 'plugin." + std::string(name.str()) +
                       "': expected a table [plugin." + std::string(name.str()) + "], got " +
                       describe(section);
            auto& out = layer_.plugin_options[std::string(name.str())];
            for (auto&& [key, value] : *st) {
                std::vector<std::string> values;
                auto scalar = [&](const toml::node& n) -> std::optional<std::string> {
                    if (auto s = n.as_string()) return s->get();
                    if (auto i = n.as_integer()) return std::to_string(i->get());
                    if (auto f = n.as_floating_point()) {
                        std::ostringstream os;
                        os << f->get();
                        return os.str();
                    }
                    if (auto b = n.as_boolean()) return std::string(b->get() ? "true" : "false");
                    return std::nullopt;
                };
                if (auto arr = value.as_array()) {
                    for (const auto& e : *arr) {
                        auto x = scalar(e);
                        if (!x)
                            return at(key, value) + ": key 'plugin." + std::string(name.str()) + "." +
                                   std::string(key.str()) + "': expected strings, numbers or booleans";
                        values.push_back(*x);
                    }
                } else if (auto x = scalar(value)) {
                    values.push_back(*x);
                } else {
                    return at(key, value) + ": key 'plugin." + std::string(name.str()) + "." +
                           std::string(key.str()) + "': expected a value or an array, got " +
                           describe(value);
                }
                out[std::string(key.str())] = std::move(values);
            }
        }
        return std::nullopt;
    }

    template <class F>
    std::optional<std::string> walk_array_of_tables(const toml::key& k, const toml::node& v,
                                                    F&& each) {
        const std::string name(k.str());
        auto arr = v.as_array();
        if (!arr || !arr->is_array_of_tables())
            return at(k, v) + ": key '" + name + "': expected an array of tables ([[" + name +
                   "]]), got " + describe(v);
        for (const auto& elem : *arr) {
            if (auto bad = each(*elem.as_table())) return bad;
        }
        return std::nullopt;
    }

    std::optional<std::string> walk_listener(const toml::table& t,
                                             std::vector<listener_entry>& out) {
        listener_entry l;
        l.where = at(t.source());
        bool has_address = false;
        for (auto&& [k, v] : t) {
            const std::string_view key = k.str();
            const std::string in = at(v.source()) + ": key '" + std::string(key) +
                                   "' in [[listener]]: ";
            if (key == "address") {
                auto s = toml_source(v).get_string();
                if (!s) return in + s.error();
                auto parsed = parse_listen(*s);
                if (!parsed) return in + "'" + *s + "': " + parsed.error();
                l.cfg.host = parsed->host;
                l.cfg.port = parsed->port;
                has_address = true;
            } else if (!is_key_of(listener_keys(), key)) {
                return at(k, v) + ": in [[listener]]: " +
                       unknown_key_message(key, listener_keys());
            } else if (auto bad = set_listener_key(l, key, toml_source(v))) {
                return in + *bad;
            }
        }
        if (!has_address)
            return at(t.source()) + ": [[listener]]: missing required key 'address'";
        out.push_back(std::move(l));
        return std::nullopt;
    }

    std::optional<std::string> walk_policy(const toml::table& t, const std::string& table_label,
                                           policy_layer& p) {
        for (auto&& [k, v] : t) {
            const std::string_view key = k.str();
            if (key == "name" && table_label.starts_with("[[queue]]")) continue;
            if (!is_key_of(policy_keys(), key)) {
                auto allowed = table_label.starts_with("[[queue]]") ? queue_keys() : policy_keys();
                return at(k, v) + ": in " + table_label + ": " + unknown_key_message(key, allowed);
            }
            if (auto bad = set_policy_key(p, key, toml_source(v)))
                return at(v.source()) + ": key '" + std::string(key) + "' in " + table_label +
                       ": " + *bad;
        }
        return std::nullopt;
    }

    std::optional<std::string> walk_queue(const toml::table& t) {
        auto name_node = t.get("name");
        if (!name_node) return at(t.source()) + ": [[queue]]: missing required key 'name'";
        const std::string name_at = at(name_node->source()) + ": key 'name' in [[queue]]: ";
        auto name = toml_source(*name_node).get_string();
        if (!name) return name_at + name.error();
        if (auto bad = check_queue_name(*name)) return name_at + *bad;
        if (auto [it, fresh] = first_line_.emplace(*name, name_node->source().begin.line);
            !fresh)
            return name_at + "duplicate queue name '" + *name + "' (first declared at line " +
                   std::to_string(it->second) + ")";

        queue_entry q;
        q.name = *name;
        q.where = at(t.source());
        if (auto bad = walk_policy(t, "[[queue]] '" + *name + "'", q.overrides)) return bad;
        // The engine drops what a queue would dead-letter into itself (the
        // dead-letter queue inheriting [queue-defaults]); a table that
        // asks for it in so many words has made a mistake.
        if (q.overrides.dead_letter_queue == *name) {
            const toml::node* dlq = t.get("dead-letter-queue");
            return at(dlq->source()) + ": key 'dead-letter-queue' in [[queue]] '" + *name + "': '" + *name +
                   "' would dead-letter into itself; name another queue, or \"\" to drop";
        }
        layer_.queues.push_back(std::move(q));
        return std::nullopt;
    }

    std::string origin_;
    file_layer layer_;
    std::map<std::string, uint32_t> first_line_; // queue name -> line
};

} // namespace

result<file_layer, config_error> parse_file(std::string_view text, std::string_view origin) {
    return file_parser(origin).parse(text);
}

} // namespace wharf::config::detail
