#pragma once
// keel reports bad input with these exceptions; messages name the op and the shapes or dtypes.
#include <stdexcept>
#include <string>

namespace keel {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ShapeError : Error { using Error::Error; };
struct DTypeError : Error { using Error::Error; };
struct DeviceError : Error { using Error::Error; };
struct IOError : Error { using Error::Error; };
struct ValueError : Error { using Error::Error; };
// A failure at run time that is not the caller's argument (Python's RuntimeError): what
// TerminateOnNaN(raise_error = true) throws.
struct RuntimeError : Error { using Error::Error; };
// Memory (host or device) could not be had for an allocation (TensorFlow's name): the message
// names the op and the bytes requested.
struct ResourceExhaustedError : Error { using Error::Error; };

}  // namespace keel
