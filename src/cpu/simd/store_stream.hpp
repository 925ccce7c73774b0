#pragma once
// A streaming store of one SIMD batch (no read-for-ownership of the line, not kept in cache), for
// the kernels of src/cpu/simd/ whose large outputs would only evict their inputs. p is aligned to
// the batch's size; a writer ends with _mm_sfence() before its output is read.
#include <immintrin.h>

#include <type_traits>

namespace keel::cpu::simd_impl {

template <class B, class T>
inline void store_stream(const B& v, T* p) {
  if constexpr (sizeof(B) == 64 && std::is_same_v<T, float>) _mm512_stream_ps(p, v);
  else if constexpr (sizeof(B) == 64 && std::is_same_v<T, double>) _mm512_stream_pd(p, v);
  else if constexpr (sizeof(B) == 32 && std::is_same_v<T, float>) _mm256_stream_ps(p, v);
  else if constexpr (sizeof(B) == 32 && std::is_same_v<T, double>) _mm256_stream_pd(p, v);
  else if constexpr (sizeof(B) == 16 && std::is_same_v<T, float>) _mm_stream_ps(p, v);
  else if constexpr (sizeof(B) == 16 && std::is_same_v<T, double>) _mm_stream_pd(p, v);
  else v.store_aligned(p);
}

}  // namespace keel::cpu::simd_impl
