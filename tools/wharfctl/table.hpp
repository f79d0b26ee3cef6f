#pragma once
// Plain-text output: columns aligned with spaces, and key/value lists.
// Pure; any thread.

#include <string>
#include <utility>
#include <vector>

namespace wharf::ctl {

// A header row, then the rows, each column as wide as its widest cell, two
// spaces apart; no trailing spaces. Short rows are padded with "".
std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "key  value" lines with the values aligned.
std::string format_pairs(const std::vector<std::pair<std::string, std::string>>& pairs);

} // namespace wharf::ctl
