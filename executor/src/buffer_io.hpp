#pragma once
// Checkpoint I/O of whole buffers, shared by ParamStore and OptimizerStates:
// a buffer's elements in order in its storage type (fp32, or 16-bit), copied
// through host memory, so a device buffer writes the same bytes as a host one
// and either backend reads them back.
#include <istream>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "ztune/executor/backend.hpp"

namespace ztune::executor {

inline void write_buffer(std::ostream& out, const Buffer& b, Backend& be) {
  std::vector<char> host(b.bytes());
  be.to_host(host.data(), b.ref(), b.size());
  out.write(host.data(), static_cast<std::streamsize>(host.size()));
}

inline void read_buffer(std::istream& in, Buffer& b, Backend& be) {
  std::vector<char> host(b.bytes());
  in.read(host.data(), static_cast<std::streamsize>(host.size()));
  if (!in) throw std::runtime_error("checkpoint ends early");
  be.from_host(b.ref(), host.data(), b.size());
}

}  // namespace ztune::executor
