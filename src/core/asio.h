// Boost.Asio/Beast with C++20 coroutines. Boost 1.74 detects coroutine support only for GCC;
// clang 14 with libstdc++ has it too (std::coroutine), so say so before including Asio.
#pragma once

#include <coroutine>
#include <utility>

#if defined(__clang__) && !defined(BOOST_ASIO_HAS_CO_AWAIT)
#define BOOST_ASIO_HAS_CO_AWAIT 1
#define BOOST_ASIO_HAS_STD_COROUTINE 1
#endif

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace k25 {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
}  // namespace k25
