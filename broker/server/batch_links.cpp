// amqp_connection: a producer link from another node's relay that sends its
// clients' messages several to a delivery (see relay_batch.hpp).

#include "broker/server/amqp_connection.hpp"
#include "broker/server/pn_util.hpp"

#include <proton/disposition.h>

namespace wharf::server {

void amqp_connection::on_batch(link_ctx& lc, pn_delivery_t* d) {
    pn_link_t* l = lc.link;
    if (l == nullptr || !pn_delivery_readable(d)) return;
    if (pn_delivery_aborted(d)) {
        lc.partial.clear();
        pn_delivery_settle(d);
        return;
    }
    // A batch may span frames: gather it whole. A relay stops filling a
    // batch at max_batch_bytes, so beyond that plus one message of the
    // largest size allowed it is not a batch a relay made: count, discard.
    const uint64_t max = settings_.max_message_size;
    const size_t pending = pn_delivery_pending(d);
    const size_t old = lc.partial.size();
    if (!lc.oversize) {
        lc.partial.resize(old + pending);
        pn_link_recv(l, lc.partial.data() + old, pending);
        lc.oversize = max != 0 && lc.partial.size() > relay::max_batch_bytes + max + 5;
    } else {
        std::string sink(pending, '\0');
        pn_link_recv(l, sink.data(), pending);
    }
    if (lc.oversize) lc.partial.clear();
    if (pn_delivery_partial(d)) return;
    pn_link_advance(l);
    std::string bytes;
    bytes.swap(lc.partial);
    const bool presettled = pn_delivery_settled(d);
    const bool too_big = lc.oversize;
    lc.oversize = false;
    std::vector<relay::record> records;
    if (too_big || !relay::parse_batch(bytes, records)) {
        if (presettled) pn_delivery_settle(d);
        else if (too_big)
            // (A relay puts a message this large in a batch of its own.)
            reject_now(d, errc::message_size_exceeded,
                       "message is larger than this link's max-message-size of " + std::to_string(max) + " bytes");
        else
            reject_now(d, errc::decode_error, "relay batch is malformed");
        top_up_credit(lc);
        return;
    }
    lc.batch_extra += records.size() - 1;
    // Each message as if it came alone; the batch is answered once, when
    // the last one has its outcome.
    if (!presettled) lc.batches[d].left = static_cast<uint32_t>(records.size());
    for (uint32_t i = 0; i < records.size(); ++i) {
        const relay::record& r = records[i];
        engine::incoming_message m;
        const bool too_big = max != 0 && r.bytes.size() > max;
        auto err = admit(too_big ? engine::message_ref{} : engine::message_ref::copy_of(r.bytes), too_big,
                         r.settled, m);
        if (err) {
            if (!presettled) outcome_in_batch(lc, d, i, &*err);
            continue;
        }
        mark_dirty(lc);
        lc.to_publish.push_back(std::move(m));
        lc.awaiting.push_back({presettled ? nullptr : d, i});
    }
    if (presettled) pn_delivery_settle(d);
    top_up_credit(lc);
}

void amqp_connection::outcome_in_batch(link_ctx& lc, pn_delivery_t* d, uint32_t index, const error* failed) {
    auto it = lc.batches.find(d);
    if (it == lc.batches.end()) return;
    link_ctx::batch_outcome& out = it->second;
    if (failed != nullptr) out.failures.push_back({index, std::string(to_condition(failed->code)), failed->description});
    if (--out.left > 0) return;
    if (out.failures.empty()) {
        pn_delivery_update(d, PN_ACCEPTED);
    } else {
        relay::put_failures(pn_disposition_condition(pn_delivery_local(d)), out.failures);
        pn_delivery_update(d, PN_REJECTED);
    }
    pn_delivery_settle(d);
    lc.batches.erase(it);
}

} // namespace wharf::server
