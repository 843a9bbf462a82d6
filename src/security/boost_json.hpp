// Boost.JSON for the security layer, compiled into kgroup (security/json_impl.cpp) and kept
// private to it: Boost.JSON marks a few classes (shared_resource) visible, which would export
// strong Boost symbols from a shared libkgroup and clash with an application's own Boost.JSON.
// The other Boost libraries it uses are included first, as they are; then Boost.JSON's own
// headers see BOOST_SYMBOL_VISIBLE empty, so -fvisibility=hidden applies to them. Every kgroup
// source that uses Boost.JSON includes it through this header.
#pragma once

#include <boost/align/align.hpp>
#include <boost/assert.hpp>
#include <boost/config.hpp>
#include <boost/container/pmr/memory_resource.hpp>
#include <boost/container/pmr/polymorphic_allocator.hpp>
#include <boost/core/detail/string_view.hpp>
#include <boost/mp11/algorithm.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>
#include <boost/system/system_error.hpp>
#include <boost/throw_exception.hpp>

#pragma push_macro("BOOST_SYMBOL_VISIBLE")
#undef BOOST_SYMBOL_VISIBLE
#define BOOST_SYMBOL_VISIBLE
#ifdef KGROUP_BOOST_JSON_IMPLEMENTATION
#include <boost/json/src.hpp>
#else
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#endif
#pragma pop_macro("BOOST_SYMBOL_VISIBLE")
