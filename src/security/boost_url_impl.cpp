// Boost.URL is compiled once, here, with hidden visibility (see security/boost_url.hpp).
#define KGROUP_BOOST_URL_IMPLEMENTATION
#include "security/boost_url.hpp"
