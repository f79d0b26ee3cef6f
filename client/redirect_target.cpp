#include "client/redirect_target.hpp"

#include <proton/codec/decoder.hpp>
#include <proton/error.hpp>
#include <proton/scalar.hpp>
#include <proton/symbol.hpp>
#include <proton/value.hpp>

#include <charconv>

namespace wharf::client {

namespace {

bool fail(std::string* why, std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
}

std::optional<uint16_t> parse_port(std::string_view text) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
        return std::nullopt;
    return static_cast<uint16_t>(value);
}

// A map key or value that should be text: a string or a symbol.
std::optional<std::string> text_of(const proton::value& v) {
    if (v.type() == proton::STRING) return proton::get<std::string>(v);
    if (v.type() == proton::SYMBOL) return std::string(proton::get<proton::symbol>(v));
    return std::nullopt;
}

std::optional<uint16_t> port_of(const proton::value& v) {
    if (auto text = text_of(v)) return parse_port(*text);
    if (!proton::type_id_is_signed_int(v.type()) && !proton::type_id_is_unsigned_int(v.type()))
        return std::nullopt;
    try {
        const int64_t n = proton::coerce<int64_t>(v);
        if (n <= 0 || n > 65535) return std::nullopt;
        return static_cast<uint16_t>(n);
    } catch (const proton::error&) {
        return std::nullopt;
    }
}

// An IPv6 literal gets brackets, so that "host:port" stays unambiguous.
std::string bracketed(const std::string& host) {
    if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
    return host;
}

} // namespace

std::optional<endpoint> parse_url(const std::string& url, std::string* why) {
    endpoint out;
    std::string_view rest(url);
    if (const auto sep = rest.find("://"); sep != std::string_view::npos) {
        out.scheme = std::string(rest.substr(0, sep));
        if (out.scheme != "amqp" && out.scheme != "amqps") {
            fail(why, "unsupported scheme '" + out.scheme + "' (amqp or amqps)");
            return std::nullopt;
        }
        if (out.scheme == "amqps") out.port = 5671;
        rest.remove_prefix(sep + 3);
    }
    if (rest.empty()) {
        fail(why, "no host in '" + url + "'");
        return std::nullopt;
    }
    std::string_view port_text;
    if (rest.front() == '[') {
        const auto close = rest.find(']');
        if (close == std::string_view::npos) {
            fail(why, "unclosed '[' in '" + url + "'");
            return std::nullopt;
        }
        out.host = std::string(rest.substr(0, close + 1));
        rest.remove_prefix(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') {
                fail(why, "expected ':PORT' after the IPv6 address in '" + url + "'");
                return std::nullopt;
            }
            port_text = rest.substr(1);
        }
    } else {
        const auto colon = rest.rfind(':');
        out.host = std::string(rest.substr(0, colon));
        if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
    }
    if (out.host.empty() || out.host.find_first_of("/@ ") != std::string::npos) {
        fail(why, "bad host in '" + url + "' (expected [amqp://]HOST[:PORT])");
        return std::nullopt;
    }
    if (!port_text.empty() || url.back() == ':') {
        auto port = parse_port(port_text);
        if (!port) {
            fail(why, "bad port in '" + url + "'");
            return std::nullopt;
        }
        out.port = *port;
    }
    return out;
}

proton::error_condition owned_condition(const proton::error_condition& e) {
    if (e.empty()) return {};
    return proton::error_condition(e.name(), e.description(), e.properties()); // properties(): a deep copy
}

bool is_link_redirect(const proton::error_condition& e) { return e.name() == "amqp:link:redirect"; }

std::optional<redirect_target> parse_redirect(const proton::error_condition& e, std::string* why) {
    if (!is_link_redirect(e)) {
        fail(why, "not a link redirect: " + e.name());
        return std::nullopt;
    }
    const proton::value info = e.properties();
    if (info.type() != proton::MAP) {
        fail(why, "the condition carries no info map");
        return std::nullopt;
    }
    std::string hostname, network_host, address;
    std::optional<uint16_t> port;
    bool bad_port = false;
    try {
        proton::codec::decoder d(info);
        proton::codec::start s;
        d >> s;
        for (size_t i = 0; i < s.size / 2; ++i) {
            proton::value key, value;
            d >> key >> value;
            const auto name = text_of(key);
            if (!name) continue;
            if (*name == "hostname") hostname = text_of(value).value_or("");
            else if (*name == "network-host") network_host = text_of(value).value_or("");
            else if (*name == "address") address = text_of(value).value_or("");
            else if (*name == "port") {
                port = port_of(value);
                bad_port = !port;
            }
        }
        d >> proton::codec::finish();
    } catch (const proton::error& ex) {
        fail(why, std::string("unreadable info map: ") + ex.what());
        return std::nullopt;
    }
    redirect_target out;
    out.where.host = bracketed(!network_host.empty() ? network_host : hostname);
    out.hostname = hostname;
    out.address = address;
    if (out.where.host.empty()) {
        fail(why, "the info map names no network-host or hostname");
        return std::nullopt;
    }
    if (!port) {
        fail(why, bad_port ? "the info map's port is not a port number" : "the info map names no port");
        return std::nullopt;
    }
    out.where.port = *port;
    return out;
}

} // namespace wharf::client
