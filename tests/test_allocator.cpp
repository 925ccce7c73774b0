// The caching allocator behind CUDA tensors and host tensors of 1 KiB and more, driven here by a
// fake raw allocator with a fixed capacity so that reuse, size classes, statistics, the cap on
// cached bytes and the out-of-memory path run on any machine; and its use by host tensors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <vector>

#include "core/caching_allocator.hpp"
#include "keel/core/error.hpp"
#include "keel/keel.hpp"

using keel::detail::CachingAllocator;

namespace {

// A "device" of `capacity` bytes: counts raw calls and refuses what does not fit.
struct FakeDevice {
  std::size_t capacity;
  std::size_t used = 0;
  int mallocs = 0;
  int frees = 0;
  std::set<void*> live;

  FakeDevice(std::size_t bytes) : capacity(bytes) {}
  // The allocator keeps its cached blocks for the life of the process, as on a GPU; the fake
  // device gives back whatever is still out when a test ends.
  ~FakeDevice() {
    for (void* p : live) std::free(p);
  }
  FakeDevice(const FakeDevice&) = delete;
  FakeDevice& operator=(const FakeDevice&) = delete;

  CachingAllocator allocator(std::size_t max_cached = static_cast<std::size_t>(-1)) {
    return CachingAllocator(
        [this](std::size_t n) -> void* {
          if (used + n > capacity) return nullptr;
          void* p = std::malloc(n);
          used += n;
          ++mallocs;
          live.insert(p);
          sizes.push_back({p, n});
          return p;
        },
        [this](void* p) {
          for (auto& [q, n] : sizes)
            if (q == p) used -= n;
          ++frees;
          live.erase(p);
          std::free(p);
        },
        "fake:0", max_cached);
  }
  std::vector<std::pair<void*, std::size_t>> sizes;
};

}  // namespace

TEST_CASE("size classes round up to quarter octaves from 512 bytes") {
  // 2^k * {1, 1.25, 1.5, 1.75}: at most 25% slack above 512 bytes.
  CHECK(CachingAllocator::size_class(0) == 512);
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(512) == 512);
  CHECK(CachingAllocator::size_class(513) == 640);    // octave [512, 1024): steps of 128
  CHECK(CachingAllocator::size_class(1000) == 1024);
  CHECK(CachingAllocator::size_class(1024) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1280);  // octave [1024, 2048): steps of 256
  CHECK(CachingAllocator::size_class(3u << 20) == (3u << 20));
  CHECK(CachingAllocator::size_class((3u << 20) + 1) == (7u << 19));  // 3.5 MiB
  for (std::size_t n : {700u, 5000u, 123457u, 9999999u}) {
    const std::size_t c = CachingAllocator::size_class(n);
    CHECK(c >= n);
    CHECK(c <= n + n / 4 + 1);
  }
}

TEST_CASE("a freed block is reused for the next request of its size class without a raw allocation") {
  FakeDevice dev{1 << 20};
  CachingAllocator a = dev.allocator();
  void* p = a.allocate(1000);
  CHECK(dev.mallocs == 1);
  a.deallocate(p);
  CHECK(dev.frees == 0);  // kept in the cache
  void* q = a.allocate(900);  // same class (1024)
  CHECK(q == p);
  CHECK(dev.mallocs == 1);
  const auto s = a.stats();
  CHECK(s.cache_hits == 1);
  CHECK(s.device_mallocs == 1);
  CHECK(s.allocated_bytes == 1024);
  CHECK(s.reserved_bytes == 1024);
  CHECK(s.cached_bytes == 0);
  a.deallocate(q);
}

TEST_CASE("statistics track allocated, peak, reserved and cached bytes") {
  FakeDevice dev{1 << 20};
  CachingAllocator a = dev.allocator();
  void* p = a.allocate(512);
  void* q = a.allocate(2048);
  CHECK(a.stats().allocated_bytes == 2560);
  a.deallocate(q);
  auto s = a.stats();
  CHECK(s.allocated_bytes == 512);
  CHECK(s.peak_allocated_bytes == 2560);
  CHECK(s.reserved_bytes == 2560);
  CHECK(s.cached_bytes == 2048);
  a.empty_cache();
  s = a.stats();
  CHECK(s.cached_bytes == 0);
  CHECK(s.reserved_bytes == 512);
  CHECK(dev.frees == 1);
  a.deallocate(p);
  a.empty_cache();
  CHECK(dev.live.empty());
}

TEST_CASE("out of memory empties the cache and retries before failing") {
  FakeDevice dev{4096};
  CachingAllocator a = dev.allocator();
  void* p = a.allocate(3000);  // class 3072
  a.deallocate(p);             // cached: the fake device is now 3072 bytes full
  void* q = a.allocate(2048);  // does not fit beside the cached block: cache released, retried
  CHECK(q != nullptr);
  CHECK(a.stats().oom_retries == 1);
  CHECK(a.stats().cached_bytes == 0);
  CHECK(dev.frees == 1);
  a.deallocate(q);
}

TEST_CASE("an allocation that cannot fit throws a catchable ResourceExhaustedError naming the device and size") {
  FakeDevice dev{4096};
  CachingAllocator a = dev.allocator();
  void* p = a.allocate(1024);
  try {
    (void)a.allocate(1 << 20);
    FAIL("expected ResourceExhaustedError");
  } catch (const keel::ResourceExhaustedError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("out of memory on fake:0") != std::string::npos);
    CHECK(msg.find("1048576 bytes") != std::string::npos);
  }
  // The allocator still works after the failure.
  void* q = a.allocate(1024);
  CHECK(q != nullptr);
  a.deallocate(p);
  a.deallocate(q);
}

TEST_CASE("freeing a pointer the allocator did not hand out is a ValueError") {
  FakeDevice dev{4096};
  CachingAllocator a = dev.allocator();
  int x = 0;
  CHECK_THROWS_AS(a.deallocate(&x), keel::ValueError);
}

TEST_CASE("a freed block beyond the cap on cached bytes goes back to the raw allocator") {
  FakeDevice dev{1 << 20};
  CachingAllocator a = dev.allocator(4096);  // room for two 2048-byte blocks
  void* p[3] = {a.allocate(2048), a.allocate(2048), a.allocate(2048)};
  for (void* q : p) a.deallocate(q);
  CHECK(dev.frees == 1);  // the third did not fit in the cache
  CHECK(a.stats().cached_bytes == 4096);
  CHECK(a.stats().reserved_bytes == 4096);
  (void)a.allocate(2048);
  (void)a.allocate(2048);
  CHECK(dev.mallocs == 3);  // both came from the cache
}

TEST_CASE("host tensors of 1 KiB and more reuse the buffers of freed tensors of their size") {
  const void* first = nullptr;
  {
    const keel::Tensor t = keel::zeros({4096});  // 16 KiB
    first = t.raw_data();
  }
  const keel::Tensor u = keel::ones({4096});
  CHECK(u.raw_data() == first);
  CHECK(u.to_vector<float>() == std::vector<float>(4096, 1.0f));  // a reused buffer is rewritten
  CHECK(reinterpret_cast<std::uintptr_t>(u.raw_data()) % 64 == 0);  // 64-byte aligned, as every buffer
}

TEST_CASE("host tensors under 1 KiB are 64-byte aligned and hold every byte of their size") {
  // Every size from 0 to 1023 bytes (uint8 tensors), with many alive at once: a buffer aligned
  // by hand inside a malloc'd block must not overlap its neighbours or the block's bookkeeping.
  std::vector<keel::Tensor> alive;
  for (std::int64_t n = 0; n < 1024; ++n) {
    keel::Tensor t = keel::full({n}, static_cast<double>(n % 251), keel::DType::uint8);
    CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0);
    alive.push_back(std::move(t));
  }
  for (std::int64_t n = 0; n < 1024; ++n) {
    const auto v = alive[static_cast<std::size_t>(n)].to_vector<std::uint8_t>();
    REQUIRE(v.size() == static_cast<std::size_t>(n));
    CHECK(std::all_of(v.begin(), v.end(), [&](std::uint8_t b) { return b == n % 251; }));
  }
  alive.clear();  // freed in order of size, then made again: the same checks on reused blocks
  const keel::Tensor small = keel::ones({3});
  CHECK(reinterpret_cast<std::uintptr_t>(small.raw_data()) % 64 == 0);
  CHECK(small.to_vector<float>() == std::vector<float>(3, 1.0f));
}
