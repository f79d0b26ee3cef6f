#include "internode/tests/scripted_peer.hpp"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/target.hpp>

#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

namespace wharf::internode::test {

namespace {
// The C object behind a Proton C++ wrapper, for what the C++ API does not
// show (settle modes) or set (modified flags). pn_object() is protected; a
// derived copy may call it.
template <class Wrapper> struct c_access : Wrapper {
    explicit c_access(const Wrapper& w) : Wrapper(w) {}
    auto get() const { return this->pn_object(); }
};
pn_link_t* c_link(const proton::receiver& r) { return c_access<proton::receiver>(r).get(); }
pn_delivery_t* c_delivery(const proton::delivery& d) { return c_access<proton::delivery>(d).get(); }
} // namespace

class scripted_peer::handler : public proton::messaging_handler {
  public:
    explicit handler(scripted_peer& p) : p_(p), listen_(p) {}

    void on_container_start(proton::container& c) override { c.listen("127.0.0.1:0", listen_); }

    void on_connection_open(proton::connection& c) override {
        update([&](peer_record& r) { r.container_id = c.container_id(); });
        c.open();
    }

    void on_receiver_open(proton::receiver& r) override {
        peer_link_seen seen;
        seen.name = r.name();
        seen.target = r.target().address();
        for (const auto& [key, value] : r.properties())
            if (value.type() == proton::STRING)
                seen.properties[std::string(key)] = proton::get<std::string>(value);
        pn_link_t* l = c_link(r);
        seen.sender_unsettled = pn_link_remote_snd_settle_mode(l) == PN_SND_UNSETTLED;
        seen.receiver_settles_first = pn_link_remote_rcv_settle_mode(l) == PN_RCV_FIRST;
        update([&](peer_record& rec) { rec.links.push_back(seen); });
        r.open(proton::receiver_options().auto_accept(false).credit_window(100));
    }

    void on_message(proton::delivery& d, proton::message& m) override {
        const std::string body =
            m.body().type() == proton::STRING ? proton::get<std::string>(m.body()) : "?";
        const bool presettled = d.settled();
        update([&](peer_record& r) {
            r.bodies.push_back(body);
            if (presettled) ++r.presettled;
        });
        if (body == "accept") d.accept();
        else if (body == "release") d.release();
        else if (body == "modify") {
            pn_delivery_t* pd = c_delivery(d);
            pn_disposition_set_failed(pn_delivery_local(pd), true);
            pn_disposition_set_undeliverable(pn_delivery_local(pd), true);
            pn_delivery_update(pd, PN_MODIFIED);
            pn_delivery_settle(pd);
        }
        else if (body == "detach")
            d.receiver().close(proton::error_condition("amqp:internal-error", "told to detach"));
        // "hold" (and anything else): left unsettled
    }

    void on_error(const proton::error_condition& e) override {
        update([&](peer_record& r) { r.error = e.what(); });
    }

  private:
    class listen_part : public proton::listen_handler {
      public:
        explicit listen_part(scripted_peer& p) : p_(p) {}
        void on_open(proton::listener& l) override {
            std::lock_guard lock(p_.mu_);
            p_.port_ = static_cast<uint16_t>(l.port());
            p_.listening_ = true;
            p_.cv_.notify_all();
        }
        proton::connection_options on_accept(proton::listener&) override {
            return proton::connection_options().sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
        }
        void on_error(proton::listener&, const std::string& what) override {
            std::lock_guard lock(p_.mu_);
            p_.record_.error = "listen: " + what;
            p_.listening_ = true; // stop waiting; port stays 0
            p_.cv_.notify_all();
        }

      private:
        scripted_peer& p_;
    };

    void update(const std::function<void(peer_record&)>& f) {
        std::lock_guard lock(p_.mu_);
        f(p_.record_);
        p_.cv_.notify_all();
    }

    scripted_peer& p_;
    listen_part listen_;
};

scripted_peer::scripted_peer()
    : handler_(std::make_unique<handler>(*this)),
      container_(std::make_unique<proton::container>(*handler_, "scripted-peer")) {
    thread_ = std::thread([this] {
        try {
            container_->run();
        } catch (const std::exception& e) {
            std::lock_guard lock(mu_);
            record_.error = std::string("container: ") + e.what();
            listening_ = true;
            cv_.notify_all();
        }
    });
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return listening_; });
}

scripted_peer::~scripted_peer() {
    container_->stop();
    thread_.join();
}

peer_record scripted_peer::snapshot() {
    std::lock_guard lock(mu_);
    return record_;
}

bool scripted_peer::wait_until(const std::function<bool(const peer_record&)>& pred,
                               std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(record_); });
}

} // namespace wharf::internode::test
