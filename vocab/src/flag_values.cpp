#include "ztune/vocab/flag_values.hpp"

#include <cmath>
#include <cstdio>
#include <exception>

namespace ztune {

std::string finite_number_complaint(const std::string& v, double lo, bool allow_equal, double hi,
                                    const std::string& expect) {
  try {
    std::size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x) && (x > lo || (allow_equal && x == lo)) && x <= hi) return {};
  } catch (const std::exception&) {  // not a number, or out of range for a double
  }
  return "expected " + expect + ", got \"" + v + "\"";
}

std::string integer_complaint(const std::string& v, long long lo, long long hi, const std::string& what) {
  try {
    std::size_t used = 0;
    const long long n = std::stoll(v, &used);
    if (used == v.size() && n >= lo && n <= hi) return {};
  } catch (const std::exception&) {  // not an integer, or beyond long long
  }
  return "expected " + what + " from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got \"" + v + "\"";
}

std::string integer_complaint(const std::string& v, const IntegerRange& r) {
  return integer_complaint(v, r.lo, r.hi, r.what);
}

std::string number_complaint(const std::string& v, const NumberRange& r) {
  char range[64];
  std::snprintf(range, sizeof range, r.lo_allowed ? " from %g to %g" : " above %g up to %g", r.lo, r.hi);
  return finite_number_complaint(v, r.lo, r.lo_allowed, r.hi, r.what + std::string(range));
}

}  // namespace ztune
