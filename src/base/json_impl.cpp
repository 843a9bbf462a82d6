// Boost.JSON is compiled once, here, with hidden visibility (see base/boost_json.hpp).
#define KGROUP_BOOST_JSON_IMPLEMENTATION
#include "base/boost_json.hpp"
