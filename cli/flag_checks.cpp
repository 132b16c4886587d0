#include <cmath>
#include <string>

#include "command.hpp"

namespace ztune::cli {

namespace {

/// A finite number above `lo` (or at least `lo` when `allow_equal`), parsed whole.
CLI::Validator finite_at_least(double lo, bool allow_equal, const char* expect) {
  return CLI::Validator(
      [=](const std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const double x = std::stod(v, &used);
          if (used == v.size() && std::isfinite(x) && (x > lo || (allow_equal && x == lo))) return {};
        } catch (const std::exception&) {  // not a number, or out of range for a double
        }
        return std::string("expected ") + expect + ", got \"" + v + "\"";
      },
      allow_equal ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace

const CLI::Validator Positive = finite_at_least(0.0, false, "a number > 0");
const CLI::Validator NonNegative = finite_at_least(0.0, true, "a number >= 0");
CLI::Validator integer_in(long long lo, long long hi, const std::string& what) {
  return CLI::Validator(
      [=](const std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= lo && n <= hi) return {};
        } catch (const std::exception&) {  // not an integer, or beyond long long
        }
        return "expected " + what + " from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got \"" + v + "\"";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

const CLI::Validator ThreadCount = integer_in(1, kMaxThreads, "a thread count");

}  // namespace ztune::cli
