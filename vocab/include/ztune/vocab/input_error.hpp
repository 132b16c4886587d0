#pragma once
// Errors in what a user gave us (files, flags). Programmer errors use assert;
// expected infeasibility is a value (see memory/time results), never this.
#include <stdexcept>
#include <string>

namespace ztune {

/// Thrown when user input is malformed or inconsistent. The message always
/// names the file (or flag), the JSON path and what was expected, e.g.
/// `dgx2x16.json: $.node.gpu.memory_gb: expected a number > 0, got "32GB"`.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ztune
