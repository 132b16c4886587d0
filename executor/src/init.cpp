#include "ztune/executor/init.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::executor {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
  return h;
}

// (0, 1]: 53 random bits, never 0 so that log() is finite.
double uniform(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

float normal_sample(std::uint64_t seed, std::string_view name, std::uint64_t index) {
  const std::uint64_t key = splitmix64(seed ^ fnv1a(name)) + 2 * index;
  const double u1 = uniform(splitmix64(key)), u2 = uniform(splitmix64(key + 1));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void init_param(float* out, const ParamSpec& spec, std::uint64_t seed) {
  const std::size_t n = spec.shard.numel();
  switch (spec.init) {
    case InitKind::zeros: std::fill(out, out + n, 0.0f); return;
    case InitKind::ones: std::fill(out, out + n, 1.0f); return;
    case InitKind::normal:
      for (std::size_t i = 0; i < n; ++i) out[i] = spec.init_std * normal_sample(seed, spec.name, spec.shard.full_index(i));
      return;
  }
}

}  // namespace ztune::executor
