#pragma once
// Test helpers shared by the CPU storage tests and the GPU backend tests: a
// backend buffer of any storage type filled from host floats (uploaded as fp32,
// converted, so a 16-bit buffer holds the values rounded to nearest even), and
// its values read back as host floats.
#include <vector>

#include "ztune/executor/backend.hpp"

namespace ztune::executor::test {

inline Buffer upload(Backend& be, const std::vector<float>& v, StorageDtype d, MemCategory c) {
  Buffer b = be.allocate(v.size(), c, d);
  Buffer f = be.allocate(v.size(), MemCategory::workspace);
  be.from_host(f.data(), v.data(), v.size());
  be.copy(b.ref(), f.data(), v.size());
  return b;
}

inline std::vector<float> download(Backend& be, const Buffer& b) {
  Buffer f = be.allocate(b.size(), MemCategory::workspace);
  be.copy(f.data(), b.ref(), b.size());
  be.fence();
  std::vector<float> v(b.size());
  be.to_host(v.data(), f.data(), b.size());
  return v;
}

}  // namespace ztune::executor::test
