#include "ztune/executor/nvme_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ztune::executor {

struct NvmeStore::State {
  std::filesystem::path path;
  int fd = -1;
  bool direct = false;
  std::size_t capacity = 0;
  int io_threads = 1;
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;
};

namespace {

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::string errno_text(int err) { return std::strerror(err); }

// Moves [offset, offset + n) between the file and buf, retrying partial transfers.
void transfer(const NvmeStore::State& st, bool write, std::size_t offset, char* buf, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    const auto off = static_cast<off_t>(offset + done);
    const ssize_t r = write ? ::pwrite(st.fd, buf + done, n - done, off) : ::pread(st.fd, buf + done, n - done, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : EIO;
      throw std::runtime_error(st.path.string() + ": " + (write ? "write" : "read") + " of " + std::to_string(n - done) +
                               " bytes at offset " + std::to_string(offset + done) + " failed: " +
                               (r == 0 ? std::string("unexpected end of file") : errno_text(err)));
    }
    done += static_cast<std::size_t>(r);
  }
}

}  // namespace

NvmeStore::NvmeStore(std::filesystem::path path, std::size_t bytes, DirectIo mode, int io_threads)
    : state_(std::make_shared<State>()) {
  State& st = *state_;
  st.path = std::move(path);
  st.capacity = round_up(std::max<std::size_t>(bytes, 1), kAlignment);
  st.io_threads = std::max(1, io_threads);
  const int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
  st.fd = ::open(st.path.c_str(), flags | O_DIRECT, 0600);
  st.direct = st.fd >= 0;
  if (st.fd < 0 && errno == EINVAL && mode == DirectIo::prefer) st.fd = ::open(st.path.c_str(), flags, 0600);
  if (st.fd < 0) {
    const int err = errno;
    throw std::runtime_error(st.path.string() + ": cannot create the NVMe offload file" +
                             (err == EINVAL ? std::string(" with O_DIRECT (the file system refuses direct I/O; "
                                                          "point the offload path at a local NVMe file system)")
                                            : std::string(": ") + errno_text(err)));
  }
  if (::ftruncate(st.fd, static_cast<off_t>(st.capacity)) != 0) {
    const int err = errno;
    ::close(st.fd);
    std::filesystem::remove(st.path);
    throw std::runtime_error(st.path.string() + ": cannot size the NVMe offload file to " +
                             std::to_string(st.capacity) + " bytes: " + errno_text(err));
  }
}

NvmeStore::~NvmeStore() {
  std::unique_lock lock(state_->mutex);
  state_->idle.wait(lock, [&] { return state_->in_flight == 0; });
  ::close(state_->fd);
  std::error_code ignored;
  std::filesystem::remove(state_->path, ignored);
}

bool NvmeStore::direct() const { return state_->direct; }
std::size_t NvmeStore::capacity() const { return state_->capacity; }
const std::filesystem::path& NvmeStore::path() const { return state_->path; }

namespace {

std::future<void> submit(const std::shared_ptr<NvmeStore::State>& state, bool write, std::size_t offset, char* buf,
                         std::size_t n) {
  const auto a = NvmeStore::kAlignment;
  if (offset % a != 0 || n % a != 0 || reinterpret_cast<std::uintptr_t>(buf) % a != 0)
    throw std::invalid_argument(state->path.string() + ": NVMe " + (write ? "write" : "read") +
                                " needs offset, size and buffer aligned to " + std::to_string(a) + " bytes");
  if (offset + n > state->capacity)
    throw std::invalid_argument(state->path.string() + ": NVMe request [" + std::to_string(offset) + ", " +
                                std::to_string(offset + n) + ") past the file's " + std::to_string(state->capacity) +
                                " bytes");
  auto promise = std::make_shared<std::promise<void>>();
  auto future = promise->get_future();
  {
    std::lock_guard lock(state->mutex);
    ++state->in_flight;
  }
  std::thread([state, promise, write, offset, buf, n] {
    try {
      // Split into io_threads aligned chunks transferred in parallel.
      const std::size_t chunk = round_up((n + static_cast<std::size_t>(state->io_threads) - 1) /
                                             static_cast<std::size_t>(state->io_threads),
                                         NvmeStore::kAlignment);
      std::vector<std::thread> workers;
      std::vector<std::exception_ptr> errors(static_cast<std::size_t>(state->io_threads));
      for (std::size_t begin = 0, k = 0; begin < n; begin += chunk, ++k) {
        const std::size_t len = std::min(chunk, n - begin);
        workers.emplace_back([&, begin, len, k] {
          try {
            transfer(*state, write, offset + begin, buf + begin, len);
          } catch (...) {
            errors[k] = std::current_exception();
          }
        });
      }
      for (auto& w : workers) w.join();
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
      promise->set_value();
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
    std::lock_guard lock(state->mutex);
    --state->in_flight;
    state->idle.notify_all();
  }).detach();
  return future;
}

}  // namespace

std::future<void> NvmeStore::write_async(std::size_t offset, const void* src, std::size_t n) {
  // pwrite only reads the buffer: the const_cast shares submit() with reads.
  return submit(state_, true, offset, const_cast<char*>(static_cast<const char*>(src)), n);
}

std::future<void> NvmeStore::read_async(std::size_t offset, void* dst, std::size_t n) {
  return submit(state_, false, offset, static_cast<char*>(dst), n);
}

AlignedHostBuffer::AlignedHostBuffer(std::size_t bytes) : bytes_(bytes) {
  const std::size_t size = round_up(std::max<std::size_t>(bytes, 1), NvmeStore::kAlignment);
  if (posix_memalign(&data_, NvmeStore::kAlignment, size) != 0) throw std::bad_alloc();
  std::memset(data_, 0, size);
}

AlignedHostBuffer::~AlignedHostBuffer() { std::free(data_); }

}  // namespace ztune::executor
