#include "wlm/metadata/open_metadata_store.hpp"

#include "wlm/metadata/etcd_metadata_store.hpp"
#include "wlm/metadata/sqlite_metadata_store.hpp"

namespace wharf::wlm {

const char* const metadata_spec_forms = "sqlite:PATH or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";

result<std::unique_ptr<metadata_store>, store_error> open_metadata_store(const std::string& spec) {
    if (spec.rfind("sqlite:", 0) == 0) {
        auto s = sqlite_metadata_store::open(spec.substr(7));
        if (!s) return fail(s.error());
        return std::unique_ptr<metadata_store>(std::move(s).value());
    }
    if (spec.rfind("etcd://", 0) == 0) {
        auto s = etcd_metadata_store::open(spec);
        if (!s) return fail(s.error());
        return std::unique_ptr<metadata_store>(std::move(s).value());
    }
    return fail(store_error{store_errc::invalid, "metadata: '" + spec + "' is not a metadata store; use " +
                                                     std::string(metadata_spec_forms)});
}

} // namespace wharf::wlm
