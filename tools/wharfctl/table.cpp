#include "tools/wharfctl/table.hpp"

#include <algorithm>

namespace wharf::ctl {

std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> width(header.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        if (row.size() > width.size()) width.resize(row.size(), 0);
        for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(header);
    for (const auto& r : rows) measure(r);
    auto line = [&](const std::vector<std::string>& row) {
        std::string out;
        for (size_t i = 0; i < width.size(); ++i) {
            const std::string cell = i < row.size() ? row[i] : "";
            out += cell;
            if (i + 1 < width.size()) out += std::string(width[i] - cell.size() + 2, ' ');
        }
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out + "\n";
    };
    std::string out = line(header);
    for (const auto& r : rows) out += line(r);
    return out;
}

std::string format_pairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
    size_t w = 0;
    for (const auto& [k, v] : pairs) w = std::max(w, k.size());
    std::string out;
    for (const auto& [k, v] : pairs) out += k + std::string(w - k.size() + 2, ' ') + v + "\n";
    return out;
}

} // namespace wharf::ctl
