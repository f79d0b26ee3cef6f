// wharf-plugin-wlm.so: the factory the broker loads.

#include "wlm/core/wlm_service.hpp"

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
            return std::string("metadata: not set; the wlm plugin needs --metadata sqlite:PATH");
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
