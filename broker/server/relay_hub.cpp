#include "broker/server/relay_hub.hpp"

#include <algorithm>

namespace wharf::server {

std::shared_ptr<relay::mailbox> relay_hub::peer(const std::string& node, const std::string& host, uint16_t port) {
    std::lock_guard l(mu_);
    pool& p = pools_[host + ":" + std::to_string(port)];
    if (p.conns.size() < connections_per_peer) {
        if (auto m = connect_(node, host, port)) p.conns.push_back(std::move(m));
    }
    if (p.conns.empty()) return nullptr;
    return p.conns[p.next++ % p.conns.size()];
}

void relay_hub::lost(const relay::mailbox* m) {
    std::lock_guard l(mu_);
    for (auto& [key, p] : pools_)
        p.conns.erase(std::remove_if(p.conns.begin(), p.conns.end(), [m](const auto& c) { return c.get() == m; }),
                      p.conns.end());
}

} // namespace wharf::server
