// The cluster keys: plugins, plugin-dir, advertise, metadata, [plugin.NAME].

#include "broker/config/tests/node_config_fixture.hpp"

namespace wharf::config {
namespace {

TEST_F(node_config_test, cluster_keys_from_the_file) {
    auto path = write("cluster.toml",
                      "plugins = [\"wlm\"]\n"
                      "plugin-dir = \"/opt/wharf/plugins\"\n"
                      "advertise = \"10.0.0.5:5672\"\n"
                      "metadata = \"sqlite:/var/lib/wharf/cluster.db\"\n"
                      "[plugin.wlm]\n"
                      "placement = \"round-robin\"\n"
                      "lease-ttl = 5\n"
                      "rules = [\"orders.* -> node:n2\", \"eu.* -> group:eu\"]\n");
    auto cfg = run_ok({"--config", path});
    EXPECT_EQ(cfg.plugins, (std::vector<std::string>{"wlm"}));
    EXPECT_EQ(cfg.plugin_dir, "/opt/wharf/plugins");
    EXPECT_EQ(cfg.advertise, "10.0.0.5:5672");
    EXPECT_EQ(cfg.metadata, "sqlite:/var/lib/wharf/cluster.db");
    auto& wlm = cfg.plugin_options.at("wlm");
    EXPECT_EQ(wlm.at("placement"), (std::vector<std::string>{"round-robin"}));
    EXPECT_EQ(wlm.at("lease-ttl"), (std::vector<std::string>{"5"}));
    EXPECT_EQ(wlm.at("rules").size(), 2u);
}

TEST_F(node_config_test, cluster_flags) {
    auto cfg = run_ok({"--plugin", "wlm", "--plugin", "proxy", "--metadata", "sqlite:/tmp/x.db",
                       "--advertise", "127.0.0.1:6000", "--plugin-dir", "/p"});
    EXPECT_EQ(cfg.plugins, (std::vector<std::string>{"wlm", "proxy"}));
    EXPECT_EQ(cfg.metadata, "sqlite:/tmp/x.db");
    EXPECT_EQ(cfg.advertise, "127.0.0.1:6000");
    EXPECT_EQ(cfg.plugin_dir, "/p");
}

TEST_F(node_config_test, cluster_key_errors_name_the_key) {
    flag_error({"--plugin", "Bad/Name"}, {"--plugin", "Bad/Name", "not a plugin name"});
    flag_error({"--metadata", "zookeeper://x"}, {"--metadata", "sqlite:PATH or etcd://HOST:PORT"});
    flag_error({"--metadata", "etcd://"}, {"--metadata", "etcd://HOST:PORT"});
    flag_error({"--advertise", "127.0.0.1:0"}, {"--advertise", "real port"});
    auto path = write("orphan.toml", "[plugin.wlm]\nplacement = \"local\"\n");
    auto err = run_error({"--config", path});
    EXPECT_EQ(err.exit_code, 2);
    EXPECT_NE(err.message.find("[plugin.wlm]"), std::string::npos) << err.message;
    EXPECT_NE(err.message.find("not enabled"), std::string::npos) << err.message;
    // A metadata store with no plugin to read it: the node ran alone, silently.
    err = run_error({"--metadata", "sqlite:/tmp/x.db"});
    EXPECT_EQ(err.exit_code, 2);
    EXPECT_NE(err.message.find("no plugin is enabled to use it"), std::string::npos) << err.message;
}

} // namespace
} // namespace wharf::config
