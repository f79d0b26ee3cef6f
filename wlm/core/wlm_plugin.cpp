// wharf-plugin-wlm.so: the factory the broker loads.

#include "wlm/core/wlm_service.hpp"
#include "wlm/metadata/etcd_metadata_store.hpp"
#include "wlm/metadata/open_metadata_store.hpp"

namespace wharf::wlm {
namespace {

class wlm_factory final : public plugins::plugin_factory {
  public:
    std::string_view name() const override { return "wlm"; }
    std::optional<std::string> validate(const plugins::options& opts,
                                        const plugins::node_info& node) const override {
        auto o = parse_wlm_options(opts);
        if (!o) return o.error();
        if (node.metadata.empty())
            return "metadata: not set; the wlm plugin needs --metadata " + std::string(metadata_spec_forms);
        if (node.metadata.rfind("etcd://", 0) == 0) {
            if (auto spec = etcd_metadata_store::parse_spec(node.metadata); !spec)
                return "metadata: " + spec.error();
        } else if (node.metadata.rfind("sqlite:", 0) != 0) {
            return "metadata: '" + node.metadata + "' is not a metadata store; use " +
                   std::string(metadata_spec_forms);
        }
        if (node.port == 0)
            return std::string("advertise: the node's address has port 0; set --advertise HOST:PORT so "
                               "other nodes can redirect clients here");
        return std::nullopt;
    }
    std::unique_ptr<plugins::plugin> create(const plugins::options& opts,
                                            plugins::node_context& ctx) const override {
        return std::make_unique<wlm_service>(parse_wlm_options(opts).value(), ctx);
    }
};

const wlm_factory factory;

} // namespace
} // namespace wharf::wlm

extern "C" __attribute__((visibility("default"))) const wharf::plugins::plugin_factory*
wharf_plugin_factory_v1() {
    return &wharf::wlm::factory;
}
