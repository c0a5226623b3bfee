// The `cpp` strategy's CPU kernels (impls/cpp.py builds this with torch.utils.cpp_extension.load).
//
// unfold: input (N, C, *S) -> output (N, C*K, L), the exact output of F.unfold.
// fold:   grad_output (N, C*K, L) -> grad_input (N, C, *S), its adjoint (col2im), as a gather.
//
// 1-d and 2-d problems run as 3-d ones with unit leading spatial dims (kernel 1, no padding), so there is one
// kernel per direction. Work is split over the N*C planes with at::parallel_for: OpenMP, as in PyTorch's CPU
// builds, once this file is compiled with -fopenmp (impls/cpp.py; without it the region runs on one thread), on
// torch's own OpenMP runtime, so torch.set_num_threads governs it.
//
// Forward: plane (n, c) of the output is one contiguous block of K*L elements, written row by row: for each
// kernel offset and each window row, zeros where the row reads padding, else one strided copy from the
// unpadded input (no padded copy) with zero borders. The copy moves bits (an unsigned integer of the element's
// width), so every dtype is bit-exact, NaN payloads and -0.0 included. Where the CPU has AVX-512, a 2-d plane
// whose window rows fit one register, at stride 1 or 2 along a contiguous innermost dim (All-CNN-C's layers from
// 16 x 16 down), is first copied into a zero-padded buffer in L1; each output row is then one or two unmasked
// loads, a deinterleaving permute (vpermt2w/d/q) at stride 2, and one store (padded_plane_rows). Otherwise stride
// 1 and rows of padding are written in whole AVX-512 registers (short_rows, write_row), stride 2 is gcc's
// vectorisation of `dst[i] = src[2 * i]` (-O3 -march=native: two loads and a permute per vector), and other
// steps are a scalar strided loop.
//
// Backward: for each input row of plane (n, c), a row of accumulators in the op-math type (float for half
// types, then rounded once) gathers, for each kernel offset whose windows read that row, the slice of
// grad_output those windows wrote: contiguous adds into the accumulators of one phase (x mod s along the
// innermost dim, stored phase-major), then the phases are interleaved into the gradient row. Each input entry
// sums its at most K terms in one fixed order: no atomics, deterministic. float16 is converted in vectors (F16C)
// where the CPU has them, since c10::Half's one-at-a-time conversion keeps those loops scalar. At stride 1 along a
// contiguous innermost dim, a plane whose padded sums fit in L1 keeps them there and adds grad_output's window rows
// in the order they are stored; with AVX-512, shorter window rows (under one register) are summed in registers
// under masks instead. Both add each entry's terms in the same order as the row loop, so give the same bits.
//
// Pointwise problems (kernel 1, stride 1 and no padding along every dim: a 1x1 convolution's unfold) are a copy of
// each plane in both directions: one Tensor::copy_ where the input's (or grad_output's) planes are contiguous.
//
// Memory: a fresh result costs a page fault per page on first touch. Taken inside the loops, such a fault costs more
// than in a plain write (the trap interrupts the streams of loads and stores), so each thread first faults in its
// part of a result whose pages are fresh with one call (populate_fresh_pages). Called with huge_pages (the
// cpp_huge_pages strategy), unfold and fold instead advise each fresh result of UNFOLD_HUGE_PAGE_RESULT_BYTES or
// more into transparent huge pages before writing it (advise_huge_pages), so it faults once per 2 MiB instead of
// once per 4 KiB (why, why that size, and what it can cost: impls/huge_pages.py); populating those first was
// slower, since it zeroes every huge page before any is written. A smaller result is populated as cpp's are. An
// `out` given by the caller is never advised.

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef UNFOLD_NAMESPACE
#define UNFOLD_NAMESPACE unfold_bench_cpp
#endif
// One indirection, so that UNFOLD_NAMESPACE (set per source hash by impls/cpp.py) is expanded before
// TORCH_LIBRARY stringifies it.
#define UNFOLD_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define UNFOLD_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace {

// A problem in three spatial dims (index 0 outermost). Strides are in elements.
struct Problem {
  int64_t N = 0, C = 0;
  int64_t size[3], kernel[3], dilation[3], padding[3], stride[3], windows[3];
  int64_t K = 1, L = 1;
};

Problem make_problem(at::IntArrayRef input_shape, at::IntArrayRef kernel, at::IntArrayRef dilation,
                     at::IntArrayRef padding, at::IntArrayRef stride) {
  const int64_t dims = static_cast<int64_t>(input_shape.size()) - 2;
  TORCH_CHECK(dims >= 1 && dims <= 3, "unfold_cpu: 1 to 3 spatial dims, got ", dims);
  TORCH_CHECK(static_cast<int64_t>(kernel.size()) == dims && static_cast<int64_t>(dilation.size()) == dims &&
                  static_cast<int64_t>(padding.size()) == dims && static_cast<int64_t>(stride.size()) == dims,
              "unfold_cpu: kernel_size, dilation, padding and stride need one entry per spatial dim");
  Problem p;
  p.N = input_shape[0];
  p.C = input_shape[1];
  const int64_t lead = 3 - dims;
  for (int64_t i = 0; i < 3; ++i) {
    const bool unit = i < lead;
    p.size[i] = unit ? 1 : input_shape[2 + i - lead];
    p.kernel[i] = unit ? 1 : kernel[i - lead];
    p.dilation[i] = unit ? 1 : dilation[i - lead];
    p.padding[i] = unit ? 0 : padding[i - lead];
    p.stride[i] = unit ? 1 : stride[i - lead];
    const int64_t span = p.dilation[i] * (p.kernel[i] - 1) + 1;
    const int64_t padded = p.size[i] + 2 * p.padding[i];
    TORCH_CHECK(p.kernel[i] >= 1 && p.dilation[i] >= 1 && p.padding[i] >= 0 && p.stride[i] >= 1 && span <= padded,
                "unfold_cpu: invalid geometry");
    p.windows[i] = (padded - span) / p.stride[i] + 1;
    p.K *= p.kernel[i];
    p.L *= p.windows[i];
  }
  return p;
}

// [lo, hi): the windows of kernel offset j along one dim that read the input (impls/windows.py, _dim_range).
inline void window_range(int64_t size, int64_t padding, int64_t dilation, int64_t stride, int64_t windows, int64_t j,
                         int64_t& lo, int64_t& hi) {
  const int64_t shift = j * dilation - padding;  // the position window 0 reads
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  const int64_t last = size - 1 - shift;
  hi = last < 0 ? 0 : std::min(windows, last / stride + 1);
  if (hi < lo) hi = lo;
}

// The least size of a result advised into huge pages, and the huge page's size: impls/cpp.py passes
// impls.huge_pages.RESULT_BYTES and HUGE_PAGE_BYTES.
#if !defined(UNFOLD_HUGE_PAGE_RESULT_BYTES) || !defined(UNFOLD_HUGE_PAGE_BYTES)
#error "build through impls/cpp.py, which defines UNFOLD_HUGE_PAGE_RESULT_BYTES and UNFOLD_HUGE_PAGE_BYTES"
#endif
constexpr int64_t kHugePageResultBytes = UNFOLD_HUGE_PAGE_RESULT_BYTES;

// Advise the huge-page-aligned interior of a fresh tensor's memory into transparent huge pages before its first touch,
// as impls.huge_pages.advise does: a hint, so a refusal (no THP, the mode "never") is ignored.
// Whether it advised anything (a result too small is left in 4 KiB pages, and then populated as cpp's are).
bool advise_huge_pages(const at::Tensor& fresh) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const int64_t bytes = static_cast<int64_t>(fresh.nbytes());
  if (bytes < kHugePageResultBytes) return false;
  constexpr uintptr_t huge = UNFOLD_HUGE_PAGE_BYTES;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(fresh.data_ptr()) + huge - 1) & ~(huge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(fresh.data_ptr()) + bytes) & ~(huge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  return end > begin;
#else
  return false;
#endif
}

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14 on; older headers lack the name
#endif

// A thread's part of a result smaller than this is written as it is: too few pages to be worth a system call.
constexpr int64_t kPopulateLeastBytes = int64_t(1) << 20;

// Fault in the pages of a thread's part of a result, [data, data + bytes), with one call (madvise
// MADV_POPULATE_WRITE) before the thread writes them, where they are fresh (the part's middle page is not mapped in
// yet: glibc's mmap'd blocks, a fresh-pages process); pages already there (a block from the heap, a caller's
// buffer written before) are left alone. A hint: before Linux 5.14 the call fails and the pages fault on first
// touch as before.
inline void populate_fresh_pages(void* data, int64_t bytes) {
#if defined(__linux__)
  if (bytes < kPopulateLeastBytes) return;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  const uintptr_t middle = (begin + (end - begin) / 2) & ~(page - 1);
  unsigned char mapped = 0;
  if (mincore(reinterpret_cast<void*>(middle), page, &mapped) == 0 && (mapped & 1)) return;
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
}

// ---------------------------------------------------------------------------------------- AVX-512 rows
// With AVX-512 (F, BW, VL: -march=native on such a CPU) a contiguous row is written in whole registers, the
// padding by load masks (masked-off lanes are neither read nor faulted on), so a short row (8 to 32 elements in
// All-CNN-C) costs a load and a store instead of a vector loop's prologue, scalar remainder and a memset call per
// border. Stores are unmasked wherever they may run over into the plane's later rows (masked stores are slow on
// AMD's Zen 4). Masked loads are left to short rows of stride 1: for stride 2 two masked loads and a permute per
// row were slower in place on AMD's Zen 4 than gcc's loop, and so were masked float rows in the backward; the
// padded plane masks only the loads that copy the input's rows into it, not those of its output rows.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define UNFOLD_AVX512 1
#include <immintrin.h>

// The lanes k of a register of `lanes` with a <= k < b.
inline uint64_t lane_range(int64_t a, int64_t b, int64_t lanes) {
  a = std::max<int64_t>(a, 0);
  b = std::min<int64_t>(b, lanes);
  if (b <= a) return 0;
  const uint64_t below_b = b >= 64 ? ~uint64_t(0) : (uint64_t(1) << b) - 1;
  return below_b & ~((uint64_t(1) << a) - 1);
}

template <int Bytes>
struct Register;  // one zmm register of elements Bytes wide, moved as bits
template <>
struct Register<2> {
  static constexpr int64_t lanes = 32;
  static __m512i load(uint64_t m, const void* p) { return _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m), p); }
  static void store(void* p, uint64_t m, __m512i v) {
    if (m == lane_range(0, lanes, lanes)) _mm512_storeu_si512(p, v);  // a whole register: no masked store
    else _mm512_mask_storeu_epi16(p, static_cast<__mmask32>(m), v);
  }
  // Lane k of the result is lane idx[k] of the concatenation (a, b).
  static __m512i pick(__m512i a, __m512i idx, __m512i b) { return _mm512_permutex2var_epi16(a, idx, b); }
};
template <>
struct Register<4> {
  static constexpr int64_t lanes = 16;
  static __m512i load(uint64_t m, const void* p) { return _mm512_maskz_loadu_epi32(static_cast<__mmask16>(m), p); }
  static void store(void* p, uint64_t m, __m512i v) {
    if (m == lane_range(0, lanes, lanes)) _mm512_storeu_si512(p, v);  // a whole register: no masked store
    else _mm512_mask_storeu_epi32(p, static_cast<__mmask16>(m), v);
  }
  // Lane k of the result is lane idx[k] of the concatenation (a, b).
  static __m512i pick(__m512i a, __m512i idx, __m512i b) { return _mm512_permutex2var_epi32(a, idx, b); }
};
template <>
struct Register<8> {
  static constexpr int64_t lanes = 8;
  static __m512i load(uint64_t m, const void* p) { return _mm512_maskz_loadu_epi64(static_cast<__mmask8>(m), p); }
  static void store(void* p, uint64_t m, __m512i v) {
    if (m == lane_range(0, lanes, lanes)) _mm512_storeu_si512(p, v);  // a whole register: no masked store
    else _mm512_mask_storeu_epi64(p, static_cast<__mmask8>(m), v);
  }
  // Lane k of the result is lane idx[k] of the concatenation (a, b).
  static __m512i pick(__m512i a, __m512i idx, __m512i b) { return _mm512_permutex2var_epi64(a, idx, b); }
};
// Rows of one register (of Reg) or less: dst row o1 = the input row x1(o1), lanes [lo, hi), zeros elsewhere.
template <typename Reg, typename V, typename T>
inline void short_rows(T* dst, const T* row, const T* plane_end, int64_t O1, int64_t O2, int64_t lo, int64_t hi,
                       bool in0, int64_t first_x1, int64_t x1_step, int64_t size1, int64_t row_stride) {
  const uint64_t read = lane_range(lo, hi, Reg::lanes);
  for (int64_t o1 = 0, x1 = first_x1; o1 < O1; ++o1, x1 += x1_step, dst += O2) {
    const bool inside = in0 && x1 >= 0 && x1 < size1 && read;
    V v;
    if constexpr (sizeof(V) == 64) v = inside ? Reg::load(read, row + x1 * row_stride) : _mm512_setzero_si512();
    else v = inside ? Reg::load(read, row + x1 * row_stride) : _mm256_setzero_si256();
    if (plane_end - dst >= Reg::lanes) {
      if constexpr (sizeof(V) == 64) _mm512_storeu_si512(dst, v);
      else _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
    } else {
      Reg::store(dst, lane_range(0, O2, Reg::lanes), v);
    }
  }
}

// The lane indices 0, 2, 4, ... (every other element of two registers) for Reg's element width.
template <typename Reg, typename T>
inline __m512i even_lanes() {
  alignas(64) T index[Reg::lanes];
  for (int64_t k = 0; k < Reg::lanes; ++k) index[k] = static_cast<T>(2 * k);
  return _mm512_load_si512(index);
}

// A 2-d plane whose window rows fit one register and whose innermost stride is 1 or 2: the plane is first copied
// into `padded` (its zero borders written once per thread), so every output row is one or two unmasked loads from
// L1, a deinterleaving permute for stride 2, and one store: no borders, no masks on the loads.
template <typename Reg, typename T>
inline void padded_plane_rows(T* dst, const T* src, T* padded, const Problem& p, int64_t row_stride) {
  const int64_t H = p.size[1], W = p.size[2], Wp = W + 2 * p.padding[2];
  const int64_t O1 = p.windows[1], O2 = p.windows[2], s1 = p.stride[1], s2 = p.stride[2];
  // Each input row in whole registers, loaded under a mask of its W elements and stored unmasked: the zeros past
  // the row land on its right border, the next row's left border and the next row itself (written next), or the
  // bottom border and the buffer's room after it, so the borders stay zero. (A copy call per row cost more.)
  for (int64_t x1 = 0; x1 < H; ++x1) {
    const T* from = src + x1 * row_stride;
    T* to = padded + (x1 + p.padding[1]) * Wp + p.padding[2];
    for (int64_t k = 0; k < W; k += Reg::lanes)
      _mm512_storeu_si512(to + k, Reg::load(lane_range(0, W - k, Reg::lanes), from + k));
  }
  const __m512i even = even_lanes<Reg, T>();
  const T* const plane_end = dst + p.K * p.L;
  const uint64_t row = lane_range(0, O2, Reg::lanes);
  for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1)
    for (int64_t j2 = 0; j2 < p.kernel[2]; ++j2) {
      const T* from = padded + j1 * p.dilation[1] * Wp + j2 * p.dilation[2];
      for (int64_t o1 = 0; o1 < O1; ++o1, from += s1 * Wp, dst += O2) {
        __m512i v = _mm512_loadu_si512(from);
        if (s2 == 2) v = Reg::pick(v, even, _mm512_loadu_si512(from + Reg::lanes));
        if (plane_end - dst >= Reg::lanes) _mm512_storeu_si512(dst, v);  // later rows overwrite the excess
        else Reg::store(dst, row, v);
      }
    }
}
#endif

// ---------------------------------------------------------------------------------------- pointwise copy

// Whether every kernel size and stride is 1 and nothing is padded: then plane (n, c) of the result is the plane
// (n, c) of the source, element for element.
inline bool pointwise(const Problem& p) {
  for (int64_t i = 0; i < 3; ++i)
    if (p.kernel[i] != 1 || p.stride[i] != 1 || p.padding[i] != 0) return false;
  return true;
}

// The pointwise problem's result (N, C, plane), contiguous, from source's planes at n sN + c sC, each contiguous:
// one Tensor::copy_, which merges the planes that lie one after another into one run; its fresh pages faulted in
// first if `populate`, each thread's share by that thread.
void copy_planes(at::Tensor result, const at::Tensor& source, int64_t sN, int64_t sC, const Problem& p, bool populate) {
  const int64_t plane = p.K * p.L, bytes = int64_t(result.nbytes());
  char* data = static_cast<char*>(result.data_ptr());
  if (populate)
    at::parallel_for(0, bytes, kPopulateLeastBytes, [&](int64_t begin, int64_t end) {
      populate_fresh_pages(data + begin, end - begin);
    });
  result.view({p.N, p.C, plane}).copy_(source.as_strided({p.N, p.C, plane}, {sN, sC, 1}));
}

// ---------------------------------------------------------------------------------------------- forward

// dst[i] = source[i * step] for i in [lo, hi), zero for the other i in [0, n). `source` is where window 0 would
// read; it may lie before the row, and only the elements of [lo, hi) are read. `room`: how many elements from
// dst on belong to this thread and are written after this row anyway (the rest of the plane): a register may be
// stored whole over them, which is much faster than a masked store on AMD's Zen 4 and no slower elsewhere.
template <typename T>
inline void write_row(T* __restrict dst, const T* source, int64_t n, int64_t lo, int64_t hi, int64_t step,
                      int64_t room) {
#ifdef UNFOLD_AVX512
  using R = Register<sizeof(T)>;
  constexpr int64_t lanes = R::lanes;
  if (step == 1 || hi <= lo) {  // a contiguous copy with zero borders, or a row of zeros
    for (int64_t i = 0; i < n; i += lanes) {
      const uint64_t read = lane_range(lo - i, hi - i, lanes);
      R::store(dst + i, lane_range(0, i + lanes <= room ? lanes : n - i, lanes),
               read ? R::load(read, source + i) : _mm512_setzero_si512());
    }
    return;
  }
#endif
  if (hi <= lo) lo = hi = 0;
  for (int64_t i = 0; i < lo; ++i) dst[i] = T(0);
  if (step == 1) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = source[i];
  } else if (step == 2) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = source[2 * i];  // gcc: two loads and a permute per vector
  } else {
    for (int64_t i = lo; i < hi; ++i) dst[i] = source[i * step];
  }
  for (int64_t i = hi; i < n; ++i) dst[i] = T(0);
}

// T: an unsigned integer of the element's width (the forward only moves bits).
template <typename T>
void unfold_kernel(const at::Tensor& input, at::Tensor& out, const Problem& p, bool populate) {
  const T* in = reinterpret_cast<const T*>(input.const_data_ptr());
  T* o = reinterpret_cast<T*>(out.mutable_data_ptr());
  const int64_t dims = input.dim() - 2;
  int64_t in_stride[3];
  for (int64_t i = 0; i < 3; ++i) in_stride[i] = i < 3 - dims ? 0 : input.stride(2 + i - (3 - dims));
  const int64_t sN = input.stride(0), sC = input.stride(1);
  const int64_t O0 = p.windows[0], O1 = p.windows[1], O2 = p.windows[2];
  const int64_t plane = p.K * p.L;
  bool contiguous_planes = true;  // a plane's elements one after another (a size-1 dim's stride is free)
  for (int64_t i = 2, expected = 1; i >= 0; expected *= p.size[i], --i)
    contiguous_planes = contiguous_planes && (p.size[i] == 1 || in_stride[i] == expected);
  if (pointwise(p) && contiguous_planes) {
    copy_planes(out, input, sN, sC, p, populate);
    return;
  }
  // Along the innermost dim each kernel offset's [lo, hi) is the same for every window row: computed once.
  std::vector<int64_t> lo2(p.kernel[2]), hi2(p.kernel[2]);
  for (int64_t j = 0; j < p.kernel[2]; ++j)
    window_range(p.size[2], p.padding[2], p.dilation[2], p.stride[2], O2, j, lo2[j], hi2[j]);
  const int64_t step = p.stride[2] * in_stride[2];
#ifdef UNFOLD_AVX512
  // Rows of one register or less, copied contiguously (stride 1 along a contiguous innermost dim): 6 to 32
  // elements in All-CNN-C, where the per-row work of write_row (masks from lo, hi and n) would dominate.
  const bool one_register = step == 1 && O2 <= Register<sizeof(T)>::lanes;
#endif
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, plane));
#ifdef UNFOLD_AVX512
  // 2-d planes (one window along the outermost dim; a 3-d input padded along it has more) with rows of one
  // register, stride 1 or 2 along a contiguous innermost dim, small enough to pad in L1 (with room for the last
  // row's two-register load): padded_plane_rows.
  using R = Register<sizeof(T)>;
  const int64_t padded_elements =
      (p.size[1] + 2 * p.padding[1]) * (p.size[2] + 2 * p.padding[2]) + 2 * R::lanes;
  const bool via_padded_plane = p.size[0] == 1 && p.kernel[0] == 1 && p.padding[0] == 0 && in_stride[2] == 1 &&
                                p.stride[2] <= 2 && O2 <= R::lanes &&
                                padded_elements * int64_t(sizeof(T)) <= (int64_t(32) << 10);
#endif
  at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
    if (populate) populate_fresh_pages(o + begin * plane, (end - begin) * plane * int64_t(sizeof(T)));
#ifdef UNFOLD_AVX512
    if (via_padded_plane) {
      std::vector<T> padded(padded_elements, T(0));  // its borders stay zero: each plane writes the interior
      for (int64_t nc = begin; nc < end; ++nc)
        padded_plane_rows<R, T>(o + nc * plane, in + (nc / p.C) * sN + (nc % p.C) * sC, padded.data(), p,
                                in_stride[1]);
      return;
    }
#endif
    for (int64_t nc = begin; nc < end; ++nc) {
      const T* src = in + (nc / p.C) * sN + (nc % p.C) * sC;
      T* dst = o + nc * plane;
      const T* const plane_end = dst + plane;
      for (int64_t j0 = 0; j0 < p.kernel[0]; ++j0)
        for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1)
          for (int64_t j2 = 0; j2 < p.kernel[2]; ++j2) {
            const int64_t lo = lo2[j2], hi = hi2[j2];
            const int64_t x2 = j2 * p.dilation[2] - p.padding[2];  // where window 0 reads (may be < 0)
            for (int64_t o0 = 0; o0 < O0; ++o0) {
              const int64_t x0 = o0 * p.stride[0] + j0 * p.dilation[0] - p.padding[0];
              const bool in0 = x0 >= 0 && x0 < p.size[0];
#ifdef UNFOLD_AVX512
              if (one_register) {  // one register per row, its masks the same for every row of this offset
                const T* row = src + x0 * in_stride[0] + x2 * in_stride[2];
                const int64_t x1 = j1 * p.dilation[1] - p.padding[1];
                short_rows<Register<sizeof(T)>, __m512i>(dst, row, plane_end, O1, O2, lo, hi, in0, x1, p.stride[1],
                                                         p.size[1], in_stride[1]);
                dst += O1 * O2;
                continue;
              }
#endif
              for (int64_t o1 = 0; o1 < O1; ++o1, dst += O2) {
                const int64_t room = plane_end - dst;
                const int64_t x1 = o1 * p.stride[1] + j1 * p.dilation[1] - p.padding[1];
                if (!in0 || x1 < 0 || x1 >= p.size[1]) {
                  write_row(dst, src, O2, 0, 0, step, room);  // a row of padding: zeros, nothing read
                  continue;
                }
                write_row(dst, src + x0 * in_stride[0] + x1 * in_stride[1] + x2 * in_stride[2], O2, lo, hi, step,
                          room);
              }
            }
          }
    }
  });
}

void unfold_into(const at::Tensor& input, at::Tensor& out, const Problem& p, bool populate) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(), "unfold_cpu: CPU tensors only");
  TORCH_CHECK(out.is_contiguous() && out.dtype() == input.dtype(), "unfold_cpu: out must be contiguous, input's dtype");
  TORCH_CHECK(out.sizes() == at::IntArrayRef({p.N, p.C * p.K, p.L}), "unfold_cpu: out has the wrong shape");
  if (out.numel() == 0) return;
  switch (input.element_size()) {
    case 2: unfold_kernel<uint16_t>(input, out, p, populate); break;
    case 4: unfold_kernel<uint32_t>(input, out, p, populate); break;
    case 8: unfold_kernel<uint64_t>(input, out, p, populate); break;
    default: TORCH_CHECK(false, "unfold_cpu: unsupported element size ", input.element_size());
  }
}

at::Tensor unfold(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride, bool huge_pages) {
  const Problem p = make_problem(input.sizes(), kernel, dilation, padding, stride);
  at::Tensor out = at::empty({p.N, p.C * p.K, p.L}, input.options().memory_format(at::MemoryFormat::Contiguous));
  const bool advised = huge_pages && advise_huge_pages(out);
  unfold_into(input, out, p, !advised);
  return out;
}

void unfold_out(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                at::IntArrayRef stride, at::Tensor out) {
  const Problem p = make_problem(input.sizes(), kernel, dilation, padding, stride);
  unfold_into(input, out, p, true);
}

// ---------------------------------------------------------------------------------------------- backward

// a[i] += row[i * step] for i in [0, n), in the accumulators' type.
template <typename acc_t, typename scalar_t>
inline void add_row(acc_t* __restrict a, const scalar_t* __restrict row, int64_t n, int64_t step) {
  if (step == 1) {
    for (int64_t i = 0; i < n; ++i) a[i] += static_cast<acc_t>(row[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] += static_cast<acc_t>(row[i * step]);
  }
}

// dst[x] = acc at padded position y = x + pad, (y mod s) M + y div s, for x in [0, n), rounded once to scalar_t:
// the phases interleaved, the padding's sums dropped.
template <typename acc_t, typename scalar_t>
inline void store_row(scalar_t* __restrict dst, const acc_t* __restrict acc, int64_t n, int64_t s, int64_t M,
                      int64_t pad) {
  if (s == 1) {
    for (int64_t x = 0; x < n; ++x) dst[x] = static_cast<scalar_t>(acc[x + pad]);
  } else if (s == 2 && pad % 2 == 0) {
    const acc_t* __restrict even = acc + pad / 2;
    const acc_t* __restrict odd = acc + M + pad / 2;
    const int64_t pairs = n / 2;
    for (int64_t m = 0; m < pairs; ++m) {
      dst[2 * m] = static_cast<scalar_t>(even[m]);
      dst[2 * m + 1] = static_cast<scalar_t>(odd[m]);
    }
    if (n % 2) dst[n - 1] = static_cast<scalar_t>(even[pairs]);
  } else if (s == 2) {  // odd padding: x even lands on the odd phase
    const acc_t* __restrict odd = acc + M + pad / 2;
    const acc_t* __restrict even = acc + (pad + 1) / 2;
    const int64_t pairs = n / 2;
    for (int64_t m = 0; m < pairs; ++m) {
      dst[2 * m] = static_cast<scalar_t>(odd[m]);
      dst[2 * m + 1] = static_cast<scalar_t>(even[m]);
    }
    if (n % 2) dst[n - 1] = static_cast<scalar_t>(odd[pairs]);
  } else {
    for (int64_t x = 0; x < n; ++x) dst[x] = static_cast<scalar_t>(acc[((x + pad) % s) * M + (x + pad) / s]);
  }
}

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define UNFOLD_F16C 1

// float16 rows, eight lanes at a time with F16C's conversions. c10::Half converts one element at a time
// (_cvtsh_ss, _cvtss_sh), which keeps gcc from vectorising the loops above, so float16's backward ran far behind
// bfloat16's (whose conversions are shifts, vectorised). The same conversions in vector form give the same bits:
// float16 to float is exact, and float to float16 rounds to nearest even in both.
template <>
inline void add_row<float, c10::Half>(float* __restrict a, const c10::Half* __restrict row, int64_t n, int64_t step) {
  int64_t i = 0;
  if (step == 1) {
    for (; i + 8 <= n; i += 8) {
      const __m256 h = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
      _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i), h));
    }
  }
  for (; i < n; ++i) a[i] += static_cast<float>(row[i * step]);
}

// dst[x] = src[x] rounded to float16, for x in [0, n).
inline void round_row(c10::Half* __restrict dst, const float* __restrict src, int64_t n) {
  int64_t x = 0;
  for (; x + 8 <= n; x += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; x < n; ++x) dst[x] = static_cast<c10::Half>(src[x]);
}
#endif

// store_row, rounded to scalar_t in whole vectors where the element-wise conversion would not vectorise (float16
// with F16C): the row is interleaved in float into `scratch` (n elements), then rounded.
template <typename acc_t, typename scalar_t>
inline void store_gradient_row(scalar_t* __restrict dst, const acc_t* __restrict acc, int64_t n, int64_t s, int64_t M,
                               int64_t pad, acc_t* __restrict scratch) {
#ifdef UNFOLD_F16C
  if constexpr (std::is_same_v<scalar_t, c10::Half>) {
    const float* row = acc + pad;  // stride 1: the row is the accumulators from the padding on
    if (s != 1) {
      store_row(scratch, acc, n, s, M, pad);
      row = scratch;
    }
    round_row(dst, row, n);
    return;
  }
#endif
  (void)scratch;
  store_row(dst, acc, n, s, M, pad);
}


#ifdef UNFOLD_AVX512
// Elements a float register can gather (float32 itself, or a half type converted exactly on load).
template <typename scalar_t>
constexpr bool kGathersInFloatRegisters = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16> ||
                                          std::is_same_v<scalar_t, c10::Half>;

// The lanes of m, read from p and converted to float (exactly), zeros elsewhere; masked-off lanes are not read.
template <typename scalar_t>
inline __m512 load_as_float(const scalar_t* p, __mmask16 m) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}
#endif

template <typename scalar_t>
void fold_kernel(const at::Tensor& grad_output, at::Tensor& grad_input, const Problem& p, bool populate) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
  const int64_t gN = grad_output.stride(0), gR = grad_output.stride(1), gL = grad_output.stride(2);
  if (pointwise(p) && (gL == 1 || p.L == 1)) {  // one term per entry: its sum is itself
    copy_planes(grad_input, grad_output, gN, gR, p, populate);
    return;
  }
  const int64_t S0 = p.size[0], S1 = p.size[1], S2 = p.size[2], in_plane = S0 * S1 * S2;
  const int64_t O1 = p.windows[1], O2 = p.windows[2];
  const int64_t s2 = p.stride[2];
  // The accumulators span the padded row (position y = x + padding), so every kernel offset adds all O2 of its
  // windows, padding reads included, as one full-length contiguous add (no borders, no remainders that differ
  // per offset); the padding's sums are dropped when the row is stored. Phase-major: y = r + s2 m.
  const int64_t pad2 = p.padding[2];
  const int64_t M = (S2 + 2 * pad2 + s2 - 1) / s2;  // positions per phase along the padded innermost dim
  // Per innermost kernel offset: where its windows land, phase r and first position m (window o at m + o).
  const int64_t k2 = p.kernel[2];
  std::vector<int64_t> phase(k2), first(k2);
  for (int64_t j = 0; j < k2; ++j) {
    phase[j] = (j * p.dilation[2]) % s2;
    first[j] = (j * p.dilation[2]) / s2;
  }
  // Along each outer dim, the window that kernel offset j reads at position x, or -1. From a table made once
  // (no integer division in the loops over a plane), unless the table would be large (a huge kernel).
  std::vector<int64_t> table[2];
  auto compute = [&](int64_t dim, int64_t x, int64_t j) -> int64_t {
    const int64_t t = x + p.padding[dim] - j * p.dilation[dim];
    if (t < 0 || t % p.stride[dim] != 0) return -1;
    return t / p.stride[dim] < p.windows[dim] ? t / p.stride[dim] : -1;
  };
  for (int64_t dim = 0; dim < 2; ++dim) {
    if (p.size[dim] * p.kernel[dim] > (int64_t(1) << 16)) continue;
    table[dim].resize(p.size[dim] * p.kernel[dim]);
    for (int64_t x = 0; x < p.size[dim]; ++x)
      for (int64_t j = 0; j < p.kernel[dim]; ++j) table[dim][x * p.kernel[dim] + j] = compute(dim, x, j);
  }
  auto window_of = [&](int64_t dim, int64_t x, int64_t j) -> int64_t {
    return table[dim].empty() ? compute(dim, x, j) : table[dim][x * p.kernel[dim] + j];
  };
  // f(j0, j1, o0, o1) for every kernel offset along the outer dims whose window reads input row (x0, x1), in order.
  auto for_each_outer_window = [&](int64_t x0, int64_t x1, auto&& f) {
    for (int64_t j0 = 0; j0 < p.kernel[0]; ++j0) {
      const int64_t o0 = window_of(0, x0, j0);
      if (o0 < 0) continue;
      for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1) {
        const int64_t o1 = window_of(1, x1, j1);
        if (o1 < 0) continue;
        f(j0, j1, o0, o1);
      }
    }
  };
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.K * p.L));
  // Each thread first faults in its own planes [begin, end) of a fresh grad_input.
  auto populate_planes = [&](int64_t begin, int64_t end) {
    if (populate) populate_fresh_pages(gi + begin * in_plane, (end - begin) * in_plane * int64_t(sizeof(scalar_t)));
  };
  // A plane whose padded accumulators fit in L1, stride 1 along a contiguous innermost dim, window rows of a whole
  // register of accumulators or more (shorter ones go to the rows in registers below, where AVX-512 has them): the
  // sums of the whole padded plane are kept in L1, and grad_output's plane is read once front to back, each window
  // row of each kernel offset added where it lands (one contiguous add, no masks, no two adds in a row to
  // overlapping places); every entry still gets its terms in the generic loop's order (one per offset, offsets in
  // order), so the same bits. Then the interior is rounded and stored.
  const int64_t Hp0 = S0 + 2 * p.padding[0], Hp1 = S1 + 2 * p.padding[1], Wp = S2 + 2 * pad2;
  bool plane_in_l1 = s2 == 1 && gL == 1 && Hp0 * Hp1 * Wp * int64_t(sizeof(acc_t)) <= (int64_t(24) << 10);
#ifdef UNFOLD_AVX512
  plane_in_l1 = plane_in_l1 && O2 * int64_t(sizeof(acc_t)) >= 64;
#endif
  if (plane_in_l1) {
    at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
      populate_planes(begin, end);
      std::vector<acc_t> acc(Hp0 * Hp1 * Wp), scratch(S2);
      for (int64_t nc = begin; nc < end; ++nc) {
        const scalar_t* from = g + (nc / p.C) * gN + (nc % p.C) * p.K * gR;
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t j0 = 0; j0 < p.kernel[0]; ++j0)
          for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1)
            for (int64_t j2 = 0; j2 < k2; ++j2, from += gR) {
              const scalar_t* row = from;
              for (int64_t o0 = 0; o0 < p.windows[0]; ++o0) {
                acc_t* a = acc.data() + ((o0 * p.stride[0] + j0 * p.dilation[0]) * Hp1 + j1 * p.dilation[1]) * Wp +
                           j2 * p.dilation[2];
                for (int64_t o1 = 0; o1 < O1; ++o1, row += O2, a += p.stride[1] * Wp) add_row(a, row, O2, int64_t(1));
              }
            }
        scalar_t* dst = gi + nc * S0 * S1 * S2;
        for (int64_t x0 = 0; x0 < S0; ++x0)
          for (int64_t x1 = 0; x1 < S1; ++x1, dst += S2)
            store_gradient_row(dst, acc.data() + ((x0 + p.padding[0]) * Hp1 + x1 + p.padding[1]) * Wp, S2, 1, 0,
                               pad2, scratch.data());
      }
    });
    return;
  }
#ifdef UNFOLD_AVX512
  // Gradient rows of one or two float registers, stride 1 along a contiguous innermost dim (All-CNN-C's 8 x 8 layer;
  // the plane above takes those with longer window rows that fit L1): the sums stay in registers, each kernel offset's slice added under a mask of the lanes whose window
  // exists (a masked-off lane is neither read nor changed), in the generic loop's order, so with the same bits. The
  // generic loop's accumulators in memory make each offset's add, shifted by one element from the previous one's,
  // wait for that store (a failed store-to-load forwarding).
  const int64_t row_registers = (S2 + 15) / 16;
  if constexpr (kGathersInFloatRegisters<scalar_t>) {
    if (s2 == 1 && gL == 1 && row_registers <= 2) {
      std::vector<__mmask16> masks(k2 * 2);  // per innermost offset and register: the lanes its windows reach
      for (int64_t j = 0; j < k2; ++j) {
        const int64_t shift = j * p.dilation[2] - pad2;  // gradient position x gathers window x - shift
        for (int64_t r = 0; r < 2; ++r)
          masks[j * 2 + r] = static_cast<__mmask16>(lane_range(shift - 16 * r, std::min(shift + O2, S2) - 16 * r, 16));
      }
      at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
        populate_planes(begin, end);
        alignas(64) float sums[32];
        scalar_t* const region_end = gi + end * S0 * S1 * S2;  // this thread's rows end here
        for (int64_t nc = begin; nc < end; ++nc) {
          const scalar_t* plane = g + (nc / p.C) * gN + (nc % p.C) * p.K * gR;
          scalar_t* dst = gi + nc * S0 * S1 * S2;
          for (int64_t x0 = 0; x0 < S0; ++x0)
            for (int64_t x1 = 0; x1 < S1; ++x1, dst += S2) {
              __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
              for_each_outer_window(x0, x1, [&](int64_t j0, int64_t j1, int64_t o0, int64_t o1) {
                const scalar_t* rows = plane + (j0 * p.kernel[1] + j1) * k2 * gR + (o0 * O1 + o1) * O2;
                for (int64_t j2 = 0; j2 < k2; ++j2) {
                  const scalar_t* from = rows + j2 * gR - (j2 * p.dilation[2] - pad2);  // lane x: window x - shift
                  const __mmask16 m0 = masks[j2 * 2];
                  acc0 = _mm512_mask_add_ps(acc0, m0, acc0, load_as_float(from, m0));
                  if (row_registers == 2) {
                    const __mmask16 m1 = masks[j2 * 2 + 1];
                    acc1 = _mm512_mask_add_ps(acc1, m1, acc1, load_as_float(from + 16, m1));
                  }
                }
              });
              if constexpr (std::is_same_v<scalar_t, float>) {
                const __m512 acc[2] = {acc0, acc1};
                for (int64_t r = 0; r < row_registers; ++r) {  // whole registers where this thread's later rows follow
                  if (region_end - (dst + 16 * r) >= 16) _mm512_storeu_ps(dst + 16 * r, acc[r]);
                  else _mm512_mask_storeu_ps(dst + 16 * r, static_cast<__mmask16>(lane_range(0, S2 - 16 * r, 16)), acc[r]);
                }
              } else {
                _mm512_store_ps(sums, acc0);
                _mm512_store_ps(sums + 16, acc1);
                store_gradient_row(dst, sums, S2, 1, 0, 0, static_cast<float*>(nullptr));  // rounded once, as before
              }
            }
        }
      });
      return;
    }
  }
#endif
  at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
    populate_planes(begin, end);
    std::vector<acc_t> acc(s2 * M), scratch(S2);
    for (int64_t nc = begin; nc < end; ++nc) {
      const scalar_t* plane = g + (nc / p.C) * gN + (nc % p.C) * p.K * gR;
      scalar_t* dst = gi + nc * S0 * S1 * S2;
      for (int64_t x0 = 0; x0 < S0; ++x0)
        for (int64_t x1 = 0; x1 < S1; ++x1, dst += S2) {
          std::fill(acc.begin(), acc.end(), acc_t(0));
          for_each_outer_window(x0, x1, [&](int64_t j0, int64_t j1, int64_t o0, int64_t o1) {
            for (int64_t j2 = 0; j2 < k2; ++j2) {
              const scalar_t* row = plane + ((j0 * p.kernel[1] + j1) * k2 + j2) * gR + (o0 * O1 + o1) * O2 * gL;
              add_row(acc.data() + phase[j2] * M + first[j2], row, O2, gL);
            }
          });
          store_gradient_row(dst, acc.data(), S2, s2, M, pad2, scratch.data());
        }
    }
  });
}

at::Tensor fold(const at::Tensor& grad_output, at::IntArrayRef input_shape, at::IntArrayRef kernel,
                at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride, bool huge_pages) {
  TORCH_CHECK(grad_output.device().is_cpu(), "fold_cpu: CPU tensors only");
  const Problem p = make_problem(input_shape, kernel, dilation, padding, stride);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef({p.N, p.C * p.K, p.L}), "fold_cpu: grad_output has the wrong shape");
  at::Tensor grad_input = at::empty(input_shape, grad_output.options().memory_format(at::MemoryFormat::Contiguous));
  if (grad_input.numel() == 0) return grad_input;
  const bool advised = huge_pages && advise_huge_pages(grad_input);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad_output.scalar_type(), "fold_cpu",
                                  [&] { fold_kernel<scalar_t>(grad_output, grad_input, p, !advised); });
  return grad_input;
}

// The threads a parallel region of this build runs on: 1 where it was compiled without OpenMP.
int64_t parallel_threads() {
  int64_t threads = 0;
  at::parallel_for(0, 1 << 20, 1, [&](int64_t begin, int64_t) {
    if (begin != 0) return;  // one writer
#ifdef _OPENMP
    threads = omp_get_num_threads();
#else
    threads = 1;
#endif
  });
  return threads;
}

}  // namespace

UNFOLD_LIBRARY(UNFOLD_NAMESPACE, m) {
  m.def("unfold(Tensor input, int[] kernel_size, int[] dilation, int[] padding, int[] stride, bool huge_pages) -> Tensor");
  m.def("unfold_out(Tensor input, int[] kernel_size, int[] dilation, int[] padding, int[] stride, Tensor(a!) out) -> ()");
  m.def("fold(Tensor grad_output, int[] input_shape, int[] kernel_size, int[] dilation, int[] padding, int[] stride, "
        "bool huge_pages) -> Tensor");
  m.def("parallel_threads() -> int", &parallel_threads);
}

UNFOLD_LIBRARY_IMPL(UNFOLD_NAMESPACE, CPU, m) {
  m.impl("unfold", &unfold);
  m.impl("unfold_out", &unfold_out);
  m.impl("fold", &fold);
}
