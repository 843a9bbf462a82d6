// Boost.URL, compiled into kgroup once (security/boost_url_impl.cpp: Debian ships no compiled
// libboost_url) and kept private to it, as Boost.JSON is (see base/boost_json.hpp): Boost.URL
// marks a few classes (url_view_base, its parameter and segment iterators) visible, which would
// export strong Boost symbols from a shared libkgroup and clash with an application's own
// Boost.URL. The other Boost libraries it uses are included first, as they are; then Boost.URL's
// own headers see BOOST_SYMBOL_VISIBLE empty, so -fvisibility=hidden applies to them. Every
// kgroup source that uses Boost.URL includes it through this header, and no public one does.
#pragma once

#include <boost/align/align_up.hpp>
#include <boost/assert.hpp>
#include <boost/assert/source_location.hpp>
#include <boost/config.hpp>
#include <boost/core/bit.hpp>
#include <boost/core/detail/string_view.hpp>
#include <boost/mp11/algorithm.hpp>
#include <boost/optional.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>
#include <boost/system/system_error.hpp>
#include <boost/throw_exception.hpp>
#include <boost/type_traits.hpp>
#include <boost/variant2/variant.hpp>

#pragma push_macro("BOOST_SYMBOL_VISIBLE")
#undef BOOST_SYMBOL_VISIBLE
#define BOOST_SYMBOL_VISIBLE
#ifdef KGROUP_BOOST_URL_IMPLEMENTATION
#include <boost/url/src.hpp>
#else
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#endif
#pragma pop_macro("BOOST_SYMBOL_VISIBLE")
