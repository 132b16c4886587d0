#pragma once
// NVMe offload store (ZeRO-Infinity, Rajbhandari et al. 2021, §5: optimizer states
// on NVMe, streamed through pinned host buffers): one file at a configurable
// path, read and written with direct I/O (O_DIRECT: no page-cache copy, the
// transfer goes between the drive and the caller's buffer) and asynchronously:
// each request is split into chunks served by `io_threads` threads in parallel
// (queue depth, as DeepSpeed's aio handle), and returns a future.
// O_DIRECT needs buffers, offsets and sizes aligned to the device's logical block:
// kAlignment (4 KiB) covers NVMe drives. Pinned host memory from CUDA
// (cudaHostAlloc) is page-aligned, so it can be handed to the store directly.
//
//   NvmeStore store("/local_nvme/ztune.rank3.swp", bytes, DirectIo::require);
//   auto w = store.write_async(0, host, bytes);  ...  w.get();
#include <cstddef>
#include <filesystem>
#include <future>
#include <memory>

namespace ztune::executor {

enum class DirectIo : unsigned char {
  require,  // fail when the file system refuses O_DIRECT
  prefer,   // fall back to buffered I/O there; direct() then says false
};

class NvmeStore {
 public:
  static constexpr std::size_t kAlignment = 4096;

  /// Creates (or truncates) the file at `path` with room for `bytes` (rounded up to
  /// kAlignment). Throws std::runtime_error naming the path on failure.
  NvmeStore(std::filesystem::path path, std::size_t bytes, DirectIo mode, int io_threads = 4);
  /// Waits for in-flight requests, closes and removes the file.
  ~NvmeStore();
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  [[nodiscard]] bool direct() const;
  [[nodiscard]] std::size_t capacity() const;
  [[nodiscard]] const std::filesystem::path& path() const;

  /// Writes [offset, offset + n) of the file from src. offset, n and src must be
  /// kAlignment-aligned (std::invalid_argument otherwise); src must stay alive and
  /// unmodified until the future is ready. I/O errors arrive through the future.
  std::future<void> write_async(std::size_t offset, const void* src, std::size_t n);
  std::future<void> read_async(std::size_t offset, void* dst, std::size_t n);

  struct State;  // shared with the I/O threads, which may outlive a request's caller

 private:
  std::shared_ptr<State> state_;
};

/// Host memory aligned for direct I/O (a plain-host stand-in for pinned buffers).
class AlignedHostBuffer {
 public:
  explicit AlignedHostBuffer(std::size_t bytes);
  ~AlignedHostBuffer();
  AlignedHostBuffer(const AlignedHostBuffer&) = delete;
  AlignedHostBuffer& operator=(const AlignedHostBuffer&) = delete;
  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ztune::executor
