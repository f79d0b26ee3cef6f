#include "broker/server/relay_hub.hpp"

namespace wharf::server {

std::shared_ptr<relay::mailbox> relay_hub::peer(const std::string& node, const std::string& host, uint16_t port,
                                                uint64_t client) {
    std::lock_guard l(mu_);
    pool& p = pools_[host + ":" + std::to_string(port)];
    std::shared_ptr<relay::mailbox>& slot = p.slots[client % connections_per_peer];
    if (!slot) slot = connect_(node, host, port);
    return slot;
}

void relay_hub::lost(const relay::mailbox* m) {
    std::lock_guard l(mu_);
    for (auto& [key, p] : pools_)
        for (auto& slot : p.slots)
            if (slot.get() == m) slot.reset();
}

} // namespace wharf::server
