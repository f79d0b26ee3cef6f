#pragma once
// JMS message selectors (JMS 2.0 §3.8.1, the SQL-92 subset), as a consumer
// asks for one in its source's filter "apache.org:selector-filter:string"
// (the AMQP JMS mapping; Qpid JMS, Proton's receive_selector example).
//
// A selector is parsed once, at attach, and then decides for each message
// whether the consumer may have it. It reads the message's bytes as they
// are (no proton::message): application-properties by name, and the JMS
// header and JMSX names from the AMQP sections (selector_node.hpp's
// jms_names says where each is read; other JMSX and JMS_ names are
// application-properties, and other JMS header names are refused at parse).
// In four places it evaluates as ActiveMQ and Artemis do rather than as a
// literal reading of JMS (division of reals) or where JMS is silent (NOT
// BETWEEN of another type, IN of a non-string, an ESCAPE before an
// ordinary character); NaN compares as Java's operators compare it.
// Any other identifier is an application property (NULL when absent, or of
// a type selectors do not compare: binary, uuid, lists, maps, ...).
//
// Semantics as JMS: three-valued logic (a comparison with NULL is unknown,
// and only true selects); numbers compare across integer and real; strings
// and booleans compare only with = and <>; a comparison of unlike types is
// false. Keywords are case-insensitive, identifiers are not.
//
// Immutable once parsed: matches() may run on any thread.

#include "broker/common/result.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::amqp {

// The selector filter's descriptor, as a symbol and as a code (the
// filter-set's key is a name the client picks).
inline constexpr std::string_view selector_filter_key = "apache.org:selector-filter:string";
inline constexpr uint64_t selector_filter_code = 0x0000468C00000004ULL;

// What a queue knows of a message beyond its bytes, for selector::matches.
struct message_state {
    uint32_t delivery_count = 0; // failed deliveries so far (JMSXDeliveryCount is one more)
    int64_t expiry_ms = 0;       // when it expires, ms since the epoch; 0: never (JMSExpiration)
};

class selector {
  public:
    // The selector, or why it is not one (with the offset, for a person).
    // An empty (or blank) selector selects everything: nullptr.
    static result<std::shared_ptr<const selector>, std::string> parse(std::string_view text);
    ~selector();

    // Whether the encoded message `bytes` is selected. `bytes` is a message
    // scan_message accepted (every message a queue holds): only the
    // sections before the body are read, each stepped over by its size
    // (locate_sections). A message that ends inside one is not selected.
    // `state` is what the queue knows of it beyond its bytes.
    bool matches(std::string_view bytes, message_state state = {}) const;

    struct node;

  private:
    explicit selector(std::unique_ptr<node> root);
    std::unique_ptr<node> root_;
    std::vector<std::string> names_; // the application-properties it names, sorted
};

} // namespace wharf::amqp
