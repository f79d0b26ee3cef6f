// component_test in relay mode: two wharfd nodes sharing a metadata file,
// the wlm plugin in relay mode pinning every queue to "owner", and the test's
// clients connected to the other node (the "front", with the test's node id). Both nodes get the test's options (queue
// policies act at the owner, connection limits at the front).

#include "broker/server/tests/component_test.hpp"

#include "broker/common/testing/free_port.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace wharf::server::test {

namespace {
using wharf::test_support::free_port;
} // namespace

component_test::~component_test() {
    broker_.reset(); // the front first: it holds links relayed to the owner
    owner_.reset();
    if (!cluster_dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(cluster_dir_, ec);
    }
}

bool component_test::relay_mode() {
    const char* v = std::getenv("WHARF_COMPONENT_RELAY");
    return v != nullptr && std::string(v) == "1";
}

wharfd_process& component_test::start_relay_pair(wharfd_options opts) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "wharf-relay-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) cluster_dir_ = tmpl;
    const std::string config = "plugins = [\"wlm\"]\nmetadata = \"sqlite:" + cluster_dir_ + "/meta.db\"\n" +
                               opts.config_toml +
                               "\n[plugin.wlm]\nrules = [\"* -> node:owner\"]\nlease-ttl = 1\npoll-interval = 0.05\n";
    for (const std::string& id : {std::string("owner"), opts.node_id}) { // the front keeps the test's node id
        wharfd_options w = opts;
        w.node_id = id;
        w.config_toml = config;
        // A free port may be taken by another test's process before ours
        // binds it: then the start fails and another port is tried.
        std::unique_ptr<wharfd_process> p;
        for (int attempt = 0; attempt < 5 && !(p && p->listening()); ++attempt) {
            wharfd_options one = w;
            const std::string here = "127.0.0.1:" + std::to_string(free_port());
            one.args.insert(one.args.end(), {"--listen", here, "--advertise", here});
            if (p) p->expect_any_exit(); // the failed attempt
            p = std::make_unique<wharfd_process>(std::move(one));
        }
        EXPECT_TRUE(p->listening()) << id << ": " << p->stderr_text();
        (id == "owner" ? owner_ : broker_) = std::move(p);
    }
    return *broker_;
}

} // namespace wharf::server::test
