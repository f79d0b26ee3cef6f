#pragma once
// A command-line option that is a number of seconds, for the tools
// (wharfctl, wharf-wlm): a finite number from 0 (or above 0) to a day. NaN
// is refused too (it passes every `<` and `>`, and as a time-out it read
// as "no time at all", or started a move and then failed).

#include <CLI/CLI.hpp>

#include <string>

namespace wharf {

inline CLI::Validator seconds_check(bool zero_ok) {
    return CLI::Validator(
        [zero_ok](std::string& text) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number of seconds";
            if (!(v >= 0 && v <= 86400) || (v == 0 && !zero_ok))
                return "'" + text + "' is not between " + (zero_ok ? "0" : "0 (exclusive)") + " and 86400 seconds";
            return "";
        },
        "SECONDS");
}

} // namespace wharf
