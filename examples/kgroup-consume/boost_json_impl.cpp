// Boost.JSON, compiled once into kgroup-consume: a shared libkgroup keeps its own copy hidden, and
// with a static one the linker takes no Boost.JSON object from the archive, every symbol it would
// define being defined here already.
#include <boost/json/src.hpp>
