// What an attach is told when placing its queue failed in the metadata
// store: a name the store refuses is the client's to change
// (amqp:invalid-field), an unreachable store is not.
#include "wlm/core/wlm_service.hpp"

#include <gtest/gtest.h>

namespace wharf::wlm {
namespace {

TEST(placement_failure, a_key_the_store_refuses_is_an_invalid_field_not_an_unreachable_store) {
    const error e = placement_failure(
        "n1", "bad", store_error{store_errc::invalid, "metadata store: put: the key is empty or contains a NUL byte"});
    EXPECT_EQ(e.code, errc::invalid_field);
    EXPECT_EQ(to_condition(e.code), "amqp:invalid-field");
    EXPECT_NE(e.description.find("node n1 cannot place queue 'bad'"), std::string::npos) << e.description;
    EXPECT_NE(e.description.find("refuses the queue's name"), std::string::npos) << e.description;
    EXPECT_NE(e.description.find("contains a NUL byte"), std::string::npos) << e.description;
    EXPECT_EQ(e.description.find("unreachable"), std::string::npos) << e.description;
}

TEST(placement_failure, an_unavailable_or_failing_store_is_unreachable) {
    for (auto code : {store_errc::unavailable, store_errc::io}) {
        const error e = placement_failure("n1", "q", store_error{code, "metadata store: database is locked"});
        EXPECT_EQ(e.code, errc::internal_error);
        EXPECT_NE(e.description.find("the metadata store is unreachable (metadata store: database is locked)"),
                  std::string::npos)
            << e.description;
    }
}

TEST(placement_failure, other_codes_say_what_happened) {
    const error lapsed = placement_failure("n1", "q", store_error{store_errc::lease_expired, "lease 7 expired"});
    EXPECT_EQ(lapsed.code, errc::internal_error);
    EXPECT_NE(lapsed.description.find("membership lapsed"), std::string::npos) << lapsed.description;
    const error raced = placement_failure("n1", "q", store_error{store_errc::conflict, "version 3"});
    EXPECT_NE(raced.description.find("kept changing"), std::string::npos) << raced.description;
}

} // namespace
} // namespace wharf::wlm
