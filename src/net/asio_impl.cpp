// Asio is compiled once, here (BOOST_ASIO_SEPARATE_COMPILATION); every other translation unit
// only sees declarations. Keeps two-core builds tolerable. Asio's TLS stream (OpenSSL) too.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
