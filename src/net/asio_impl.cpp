// Asio is compiled once, here (BOOST_ASIO_SEPARATE_COMPILATION); every other translation unit
// only sees declarations. Keeps two-core builds tolerable.
#include <boost/asio/impl/src.hpp>
