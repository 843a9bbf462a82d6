// Boost.JSON is compiled once, here (BOOST_JSON_NO_LIB: header-only use without the compiled
// library, which Debian ships but a static kgroup should not need).
#include <boost/json/src.hpp>
