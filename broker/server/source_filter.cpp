#include "broker/server/source_filter.hpp"

#include <cstdio>
#include <string>

namespace wharf::server {
namespace {
std::string_view view(pn_bytes_t b) { return {b.start, b.size}; }

// One entry of the filter-set (AMQP 1.0 §3.5.8): its name is the client's
// choice ("selector" from Proton, "jms-selector" from Qpid JMS and rhea);
// the descriptor of its described value says what filter it is.
struct entry {
    std::string name;
    std::string descriptor; // a symbol, or a ulong as 0x...; "" when not described
    bool selector = false;
    std::optional<std::string> text; // a selector's string
};

entry read_entry(pn_data_t* d) {
    entry e;
    const pn_type_t key = pn_data_type(d);
    if (key == PN_SYMBOL) e.name = std::string(view(pn_data_get_symbol(d)));
    if (key == PN_STRING) e.name = std::string(view(pn_data_get_string(d)));
    if (!pn_data_next(d) || pn_data_type(d) != PN_DESCRIBED) return e;
    pn_data_enter(d);
    if (pn_data_next(d)) {
        if (pn_data_type(d) == PN_SYMBOL) {
            e.descriptor = std::string(view(pn_data_get_symbol(d)));
            e.selector = e.descriptor == amqp::selector_filter_key;
        } else if (pn_data_type(d) == PN_ULONG) {
            char hex[24];
            std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(pn_data_get_ulong(d)));
            e.descriptor = hex;
            e.selector = pn_data_get_ulong(d) == amqp::selector_filter_code;
        }
        if (pn_data_next(d) && pn_data_type(d) == PN_STRING) e.text = std::string(view(pn_data_get_string(d)));
    }
    pn_data_exit(d);
    return e;
}
} // namespace

source_filter read_source_filter(pn_data_t* filter) {
    source_filter out;
    if (filter == nullptr || pn_data_size(filter) == 0) return out;
    pn_data_rewind(filter);
    if (!pn_data_next(filter) || pn_data_type(filter) != PN_MAP) {
        out.refusal = error{errc::invalid_field, "the source's filter is not a map (AMQP 1.0 §3.5.8 filter-set)"};
        return out;
    }
    std::vector<entry> entries;
    pn_data_enter(filter);
    while (pn_data_next(filter)) entries.push_back(read_entry(filter));
    pn_data_exit(filter);

    std::string others;
    const entry* selector = nullptr;
    for (const entry& e : entries) {
        if (e.selector && selector == nullptr) {
            selector = &e;
            continue;
        }
        if (!others.empty()) others += ", ";
        others.append("'").append(e.name.substr(0, 128)).append("'");
        if (e.selector) others.append(" (a second selector)");
        else if (e.descriptor.empty()) others.append(" (not a described filter)");
        else others.append(" (").append(e.descriptor.substr(0, 128)).append(")");
    }
    if (!others.empty()) {
        out.refusal = error{errc::not_implemented,
                            "the source asks for filter " + others + ", and this node applies no filter but one '" +
                                std::string(amqp::selector_filter_key) +
                                "' (a consumer would get every message of the queue); attach without it"};
        return out;
    }
    if (selector == nullptr) return out;
    if (!selector->text) {
        out.refusal = error{errc::invalid_field, "the selector filter '" + selector->name + "' holds no string"};
        return out;
    }
    auto parsed = amqp::selector::parse(*selector->text);
    if (!parsed) {
        out.refusal = error{errc::invalid_field,
                            "the selector '" + selector->text->substr(0, 256) + "' is not valid: " + parsed.error()};
        return out;
    }
    out.selector = std::move(parsed.value());
    return out;
}

} // namespace wharf::server
