#pragma once
// Small helpers over Proton-C calls. Any thread that owns the object.

#include "broker/common/errors.hpp"

#include <proton/condition.h>
#include <proton/terminus.h>

#include <string>
#include <string_view>

namespace wharf::server {

inline void set_condition(pn_condition_t* c, errc code, std::string_view description) {
    const std::string name(to_condition(code));
    const std::string desc(description);
    pn_condition_set_name(c, name.c_str());
    pn_condition_set_description(c, desc.c_str());
}

inline std::string terminus_address(pn_terminus_t* t) {
    const char* a = pn_terminus_get_address(t);
    return a ? std::string(a) : std::string();
}

} // namespace wharf::server
