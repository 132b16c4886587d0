#pragma once
// Checkpoint I/O of whole buffers, shared by ParamStore and OptimizerStates:
// a buffer's floats in order, copied through host memory, so a device buffer
// writes the same bytes as a host one and either backend reads them back.
#include <istream>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "ztune/executor/backend.hpp"

namespace ztune::executor {

inline void write_floats(std::ostream& out, const Buffer& b, Backend& be) {
  std::vector<float> host(b.size());
  be.to_host(host.data(), b.data(), host.size());
  out.write(reinterpret_cast<const char*>(host.data()), static_cast<std::streamsize>(host.size() * sizeof(float)));
}

inline void read_floats(std::istream& in, Buffer& b, Backend& be) {
  std::vector<float> host(b.size());
  in.read(reinterpret_cast<char*>(host.data()), static_cast<std::streamsize>(host.size() * sizeof(float)));
  if (!in) throw std::runtime_error("checkpoint ends early");
  be.from_host(b.data(), host.data(), host.size());
}

}  // namespace ztune::executor
