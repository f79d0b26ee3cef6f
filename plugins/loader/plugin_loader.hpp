#pragma once
// Finds and loads plugin libraries. Main thread, at start; the libraries
// stay loaded until the process exits.

#include "broker/common/result.hpp"
#include "plugins/api/plugin.hpp"

#include <string>

namespace wharf::plugins {

// The directory plugins are looked for in when none is configured: beside
// the running binary, ../lib/wharf (installed) or ../lib (a build tree).
std::string default_plugin_dir();

// Loads `dir`/wharf-plugin-`name`.so and returns its factory. Errors name the
// plugin, the file and the reason.
result<const plugin_factory*, std::string> load_plugin(const std::string& dir, const std::string& name);

} // namespace wharf::plugins
