#pragma once
// A caching device allocator (the PyTorch CUDA caching allocator's idea, much
// reduced): freed blocks stay reserved and are handed out again for requests of
// about their size, so a training step does not pay cudaMalloc/cudaFree (each an
// implicit device synchronisation). Sizes are rounded up to 512 B below 1 MiB and
// to 2 MiB above; a cached block serves a request when it is at most 25% larger.
// Reuse is stream-ordered for one stream: a block freed after work was enqueued on
// the compute stream may be reused at once by later work on that stream. Buffers
// used on the communication stream must outlive their collective (the Communicator
// contract says so). When cudaMalloc fails, the cache is released and the
// allocation retried once; then a CudaError names the sizes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace ztune::executor::cuda {

struct AllocatorStats {
  std::size_t reserved = 0;       // bytes held from cudaMalloc (in use + cached)
  std::size_t peak_reserved = 0;
  std::size_t in_use = 0;         // bytes of blocks handed out (rounded sizes)
  std::size_t peak_in_use = 0;
  std::int64_t device_mallocs = 0;
  std::int64_t cache_hits = 0;
};

class CachingAllocator {
 public:
  CachingAllocator() = default;
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t bytes);
  /// Returns `p` to the cache. Called from destructors (raw_free, Scratch), so it
  /// never throws: a pointer this allocator did not hand out is a program error,
  /// reported on stderr before abort() (an exception there would be terminate()
  /// hiding the error being unwound).
  void release(void* p) noexcept;
  /// cudaFree every cached (unused) block.
  void empty_cache();
  [[nodiscard]] AllocatorStats stats() const;
  [[nodiscard]] static std::size_t rounded(std::size_t bytes);

 private:
  void free_cached_locked();
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;      // size → block
  std::unordered_map<void*, std::size_t> live_;   // block → size
  AllocatorStats stats_;
};

}  // namespace ztune::executor::cuda
