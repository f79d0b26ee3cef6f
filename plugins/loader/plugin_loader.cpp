#include "plugins/loader/plugin_loader.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

namespace wharf::plugins {

namespace {
bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
} // namespace

std::string default_plugin_dir() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "lib";
    std::string exe(buf, static_cast<size_t>(n));
    const std::string bin = exe.substr(0, exe.rfind('/'));
    if (is_dir(bin + "/../lib/wharf")) return bin + "/../lib/wharf";
    return bin + "/../lib";
}

result<const plugin_factory*, std::string> load_plugin(const std::string& dir, const std::string& name) {
    const std::string path = dir + "/wharf-plugin-" + name + ".so";
    const std::string who = "plugin '" + name + "'";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return fail(who + ": no library " + path + " (set plugin-dir, or build the plugin)");
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return fail(who + ": cannot load " + path + ": " + ::dlerror());
    using entry_fn = const plugin_factory* (*)();
    auto entry = reinterpret_cast<entry_fn>(::dlsym(handle, "wharf_plugin_factory_v1"));
    if (entry == nullptr)
        return fail(who + ": " + path + " is not a Wharf plugin (no wharf_plugin_factory_v1)");
    const plugin_factory* f = entry();
    if (f == nullptr || f->name() != name)
        return fail(who + ": " + path + " holds plugin '" + std::string(f ? f->name() : "?") + "'");
    return f;
}

} // namespace wharf::plugins
