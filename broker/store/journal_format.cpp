#include "broker/store/journal_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace wharf::store {

namespace {
template <class T> void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}
template <class T> bool get(std::string_view d, size_t& p, T& v) {
    if (d.size() - p < sizeof(T)) return false;
    std::memcpy(&v, d.data() + p, sizeof(T));
    p += sizeof(T);
    return true;
}

// Throws unless a record for `queue` with `rest` bytes after its key
// (type, name length, name, seq) fits the format. Checked before anything
// is appended, and before `rest` (a body) is read.
void check_fits(std::string_view queue, size_t rest) {
    constexpr size_t key_overhead = record_header_size + 1 + 2 + 8;
    if (queue.size() > max_queue_name_size)
        throw std::length_error("journal record: queue name of " + std::to_string(queue.size()) +
                                " bytes (at most " + std::to_string(max_queue_name_size) + ")");
    if (rest > max_record_size - key_overhead - queue.size())
        throw std::length_error("journal record of more than " + std::to_string(max_record_size) + " bytes");
}

// Reserves the header, returns its offset; finish() fills it in.
size_t begin(std::string& out, record_type t) {
    const size_t at = out.size();
    out.append(record_header_size, '\0');
    out.push_back(static_cast<char>(t));
    return at;
}
// The length; the checksum stays zero until seal_records.
void finish(std::string& out, size_t at) {
    const auto len = static_cast<uint32_t>(out.size() - at - record_header_size);
    std::memcpy(out.data() + at, &len, 4);
}
void put_key(std::string& out, std::string_view queue, uint64_t seq) {
    put<uint16_t>(out, static_cast<uint16_t>(queue.size()));
    out.append(queue);
    put<uint64_t>(out, seq);
}
} // namespace

void append_enqueue(std::string& out, std::string_view queue, uint64_t seq, uint32_t delivery_count,
                    uint8_t flags, int64_t expiry_ms, std::string_view body) {
    // Clamped so that the sum cannot wrap; the clamped value fails as well.
    check_fits(queue, 4 + 1 + 8 + std::min<size_t>(body.size(), max_record_size));
    const size_t at = begin(out, record_type::enqueue);
    put_key(out, queue, seq);
    put<uint32_t>(out, delivery_count);
    put<uint8_t>(out, flags);
    put<int64_t>(out, expiry_ms);
    out.append(body);
    finish(out, at);
}

void append_update(std::string& out, std::string_view queue, uint64_t seq, uint32_t delivery_count,
                   uint8_t flags) {
    check_fits(queue, 4 + 1);
    const size_t at = begin(out, record_type::update);
    put_key(out, queue, seq);
    put<uint32_t>(out, delivery_count);
    put<uint8_t>(out, flags);
    finish(out, at);
}

void append_remove(std::string& out, std::string_view queue, uint64_t seq) {
    check_fits(queue, 0);
    const size_t at = begin(out, record_type::remove);
    put_key(out, queue, seq);
    finish(out, at);
}

void append_noop(std::string& out) { finish(out, begin(out, record_type::noop)); }

void seal_records(std::string& bytes) {
    size_t at = 0;
    while (bytes.size() - at >= record_header_size) {
        uint32_t len = 0;
        std::memcpy(&len, bytes.data() + at, 4);
        if (bytes.size() - at - record_header_size < len) break; // not ours: append_* writes whole records
        const auto* p = reinterpret_cast<const Bytef*>(bytes.data() + at + record_header_size);
        const auto crc = static_cast<uint32_t>(crc32(0L, p, len));
        std::memcpy(bytes.data() + at + 4, &crc, 4);
        at += record_header_size + len;
    }
}

read_status read_record(std::string_view data, size_t& pos, record& out) {
    if (pos >= data.size()) return read_status::end;
    size_t p = pos;
    uint32_t len = 0, crc = 0;
    if (!get(data, p, len) || !get(data, p, crc)) return read_status::torn;
    if (len == 0) return read_status::corrupt;
    if (data.size() - p < len) return read_status::torn;
    const std::string_view payload = data.substr(p, len);
    const auto* bytes = reinterpret_cast<const Bytef*>(payload.data());
    if (static_cast<uint32_t>(crc32(0L, bytes, len)) != crc) return read_status::corrupt;

    size_t q = 0;
    uint8_t type = 0;
    get(payload, q, type);
    out = record{};
    out.type = static_cast<record_type>(type);
    if (out.type == record_type::noop) {
        pos = p + len;
        return read_status::ok;
    }
    if (type < 1 || type > 3) return read_status::corrupt;
    uint16_t qlen = 0;
    if (!get(payload, q, qlen) || payload.size() - q < qlen) return read_status::corrupt;
    out.queue = payload.substr(q, qlen);
    q += qlen;
    if (!get(payload, q, out.seq)) return read_status::corrupt;
    if (out.type == record_type::enqueue || out.type == record_type::update) {
        if (!get(payload, q, out.delivery_count) || !get(payload, q, out.flags))
            return read_status::corrupt;
    }
    if (out.type == record_type::enqueue) {
        if (!get(payload, q, out.expiry_ms)) return read_status::corrupt;
        out.body = payload.substr(q);
    }
    pos = p + len;
    return read_status::ok;
}

namespace {
// Whether a record could start at `p`: its length fits and agrees with its
// type and queue-name length. Cheap, so that a scan checks the CRC of few.
bool plausible_record_at(std::string_view d, size_t p) {
    uint32_t len = 0;
    std::memcpy(&len, d.data() + p, 4);
    const size_t room = d.size() - p - record_header_size;
    if (len == 0 || len > room) return false;
    const auto type = static_cast<uint8_t>(d[p + record_header_size]);
    if (type == static_cast<uint8_t>(record_type::noop)) return len == 1;
    if (type < 1 || type > 3 || len < 3) return false;
    uint16_t qlen = 0;
    std::memcpy(&qlen, d.data() + p + record_header_size + 1, 2);
    const size_t key = 1 + 2 + size_t{qlen} + 8;
    switch (static_cast<record_type>(type)) {
    case record_type::remove: return len == key;
    case record_type::update: return len == key + 4 + 1;
    case record_type::enqueue: return len >= key + 4 + 1 + 8;
    case record_type::noop: break;
    }
    return false;
}
} // namespace

bool holds_a_zero_page(std::string_view data, size_t from, size_t to) {
    constexpr size_t page = 4096;
    to = std::min(to, data.size());
    for (size_t p = (from + page - 1) / page * page; p + page <= to; p += page) {
        const std::string_view v = data.substr(p, page);
        if (std::all_of(v.begin(), v.end(), [](char c) { return c == 0; })) return true;
    }
    return false;
}

size_t find_valid_record(std::string_view data, size_t from) {
    for (size_t p = from; p < data.size() && data.size() - p > record_header_size; ++p) {
        if (!plausible_record_at(data, p)) continue;
        size_t q = p;
        record r;
        if (read_record(data, q, r) == read_status::ok) return p;
    }
    return data.size();
}

size_t count_valid_records(std::string_view data, size_t from) {
    size_t n = 0;
    for (size_t p = find_valid_record(data, from); p < data.size();) {
        record r;
        while (read_record(data, p, r) == read_status::ok) ++n;
        if (p >= data.size()) break;
        p = find_valid_record(data, p + 1);
    }
    return n;
}

std::string segment_name(uint32_t number) {
    char b[32];
    std::snprintf(b, sizeof b, "journal-%08u.log", number);
    return b;
}

bool looks_like_segment(std::string_view name) {
    constexpr std::string_view prefix = "journal-", suffix = ".log";
    return name.size() >= prefix.size() + suffix.size() && name.substr(0, prefix.size()) == prefix &&
           name.substr(name.size() - suffix.size()) == suffix;
}

uint32_t segment_number(std::string_view name) {
    constexpr size_t prefix = 8, suffix = 4; // "journal-", ".log"
    if (!looks_like_segment(name)) return 0;
    const std::string_view digits = name.substr(prefix, name.size() - prefix - suffix);
    if (digits.empty() || digits.size() > 10) return 0;
    uint64_t n = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return 0;
        n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (n == 0 || n > UINT32_MAX) return 0;
    // Only the name segment_name writes: "journal-1.log" next to
    // "journal-00000001.log" would be a second file for one number.
    if (segment_name(static_cast<uint32_t>(n)) != name) return 0;
    return static_cast<uint32_t>(n);
}

} // namespace wharf::store
