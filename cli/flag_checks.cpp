#include <limits>
#include <string>

#include "command.hpp"
#include "ztune/vocab/flag_values.hpp"

namespace ztune::cli {

namespace {

CLI::Validator finite_at_least(double lo, bool allow_equal, const char* expect) {
  return CLI::Validator(
      [=](const std::string& v) {
        return finite_number_complaint(v, lo, allow_equal, std::numeric_limits<double>::max(), expect);
      },
      allow_equal ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace

const CLI::Validator Positive = finite_at_least(0.0, false, "a number > 0");
const CLI::Validator NonNegative = finite_at_least(0.0, true, "a number >= 0");
CLI::Validator integer_in(long long lo, long long hi, const std::string& what) {
  return CLI::Validator([=](const std::string& v) { return integer_complaint(v, lo, hi, what); },
                        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

const CLI::Validator ThreadCount = integer_in(1, kMaxThreads, "a thread count");

}  // namespace ztune::cli
