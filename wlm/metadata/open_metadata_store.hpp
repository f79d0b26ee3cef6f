#pragma once
// open_metadata_store: the one place that turns the `metadata` setting
// (`--metadata`, or `metadata = "..."` in the config file) into a store:
// "sqlite:PATH" or "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]". Anything
// else is an error that names the setting and the forms it takes.

#include "wlm/metadata/metadata_store.hpp"

#include <memory>
#include <string>

namespace wharf::wlm {

result<std::unique_ptr<metadata_store>, store_error> open_metadata_store(const std::string& spec);

// The forms, for messages: "sqlite:PATH or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]".
extern const char* const metadata_spec_forms;

} // namespace wharf::wlm
