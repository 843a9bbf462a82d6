// Boost.JSON is compiled once, here, with hidden visibility (see security/boost_json.hpp).
#define KGROUP_BOOST_JSON_IMPLEMENTATION
#include "security/boost_json.hpp"
