#pragma once
// receive_raw: a minimal Proton-C receiving client for tests that must see a
// message's bytes exactly as they crossed the wire. Proton C++ cannot: it
// decodes every transfer into a proton::message, and Proton 0.37's decoder
// misreads a message that ends with a footer (it takes the footer for the
// body).
//
// Blocking; runs its own proactor on the calling thread and returns when
// `count` messages have arrived (each accepted) or the timeout has passed.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace wharf::internode::test {

std::vector<std::string> receive_raw(const std::string& host, uint16_t port, const std::string& address,
                                     size_t count, std::chrono::milliseconds timeout);

} // namespace wharf::internode::test
