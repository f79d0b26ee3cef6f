#include "wlm/core/transfer.hpp"

#include <spdlog/spdlog.h>

namespace wharf::wlm {

namespace {
constexpr int64_t pause_after_failure_ms = 1000;

int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

// A refusal the same message will meet again however often it is sent.
bool hopeless_refusal(const internode::forward_outcome& o) {
    return o.result == internode::forward_result::rejected &&
           o.description.rfind("amqp:link:message-size-exceeded", 0) == 0;
}
} // namespace

transfer::transfer(plugins::node_context& ctx, std::string queue, std::string target,
                   std::shared_ptr<internode::forwarder> fwd)
    : queue_(std::move(queue)), target_(std::move(target)), fwd_(std::move(fwd)),
      state_(std::make_shared<shared>()) {
    // The callback holds the forwarder and the shared state, never `this`:
    // outcomes may arrive after the transfer is gone.
    std::weak_ptr<shared> weak = state_;
    std::shared_ptr<internode::forwarder> fwd_ref = fwd_;
    const std::string q = queue_, to = target_;
    tap_ = ctx.tap(queue_, [weak, fwd_ref, q, to](std::vector<plugins::tapped_message> msgs) {
        auto st = weak.lock();
        if (!st) return;
        st->taken += msgs.size();
        for (auto& m : msgs) {
            const uint64_t seq = m.seq;
            fwd_ref->send(q, std::move(m.bytes), [weak, seq, q, to](internode::forward_outcome o) {
                auto s = weak.lock();
                if (!s) return;
                const bool ok = o.result == internode::forward_result::accepted;
                {
                    std::lock_guard l(s->mu);
                    if (s->tap == nullptr) return; // the tap returned it to the queue already
                    s->tap->settle(seq, ok);
                    if (ok) {
                        s->refusing_since_ms = 0;
                    } else {
                        if (s->refusing_since_ms == 0) s->refusing_since_ms = now_ms();
                        if (hopeless_refusal(o)) s->hopeless = true;
                        if (o.description != s->last_failure) {
                            s->last_failure = o.description;
                            spdlog::warn("wlm: moving queue '{}' to {}: a message was not taken ({}); "
                                         "it stays here and the move pauses",
                                         q, to, o.description);
                        }
                    }
                }
                if (ok) ++s->moved;
                else s->pause_until_ms = now_ms() + pause_after_failure_ms;
                ++s->settled;
            });
        }
    });
    state_->tap = tap_.get();
}

transfer::~transfer() {
    {
        std::lock_guard l(state_->mu); // waits for a settlement in progress
        state_->tap = nullptr;
    }
    tap_.reset(); // unsettled messages go back to the queue
}

uint64_t transfer::in_flight() const {
    const uint64_t settled = state_->settled.load(); // first: settled <= taken at every moment
    return state_->taken.load() - settled;
}

std::string transfer::refused_for_good() const {
    std::lock_guard l(state_->mu);
    const auto& s = *state_;
    const bool too_long = s.refusing_since_ms != 0 && now_ms() - s.refusing_since_ms >= refusal_limit.count();
    if (!s.hopeless && !too_long) return {};
    std::string why = "node " + target_ + " refused a message (" + s.last_failure + ")";
    if (!s.hopeless)
        why += " and took none for " + std::to_string(refusal_limit.count() / 1000) + " s";
    return why;
}

void transfer::top_up() {
    if (now_ms() < state_->pause_until_ms.load()) return;
    // Keep granted - settled == window: every settlement, whatever its
    // outcome, makes room for one more message.
    const uint64_t settled = state_->settled.load();
    const uint64_t outstanding = granted_ - settled;
    if (outstanding >= window) return;
    const uint64_t more = window - outstanding;
    granted_ += more;
    tap_->credit(more);
}

} // namespace wharf::wlm
