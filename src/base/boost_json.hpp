// Boost.JSON, the one JSON reader and writer of the project, compiled into kgroup once
// (base/json_impl.cpp) and kept private to it: Boost.JSON marks a few classes (shared_resource)
// visible, which would export strong Boost symbols from a shared libkgroup and clash with an
// application's own Boost.JSON. The other Boost libraries it uses are included first, as they
// are; then Boost.JSON's own headers see BOOST_SYMBOL_VISIBLE empty, so -fvisibility=hidden
// applies to them. Every kgroup source that uses Boost.JSON includes it through this header.
//
// Tests and examples linked with the static library use the library's copy through this header.
// A program that may be linked with a shared libkgroup (kgroup-consume) cannot see that hidden
// copy: it compiles its own, once, in one source defining KGROUP_BOOST_JSON_IMPLEMENTATION (with
// a static libkgroup the linker then takes no Boost.JSON object from the archive: every symbol
// that object defines is already defined, by the same source).
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
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/value.hpp>
#endif
#pragma pop_macro("BOOST_SYMBOL_VISIBLE")
