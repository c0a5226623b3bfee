// The `cpp` strategy's CPU kernels (impls/cpp.py builds this with torch.utils.cpp_extension.load).
//
// unfold: input (N, C, *S) -> output (N, C*K, L), the exact output of F.unfold.
// fold:   grad_output (N, C*K, L) -> grad_input (N, C, *S), its adjoint (col2im), as a gather.
//
// 1-d and 2-d problems run as 3-d ones with unit leading spatial dims (kernel 1, no padding), so there is one
// kernel per direction. Work is split over the N*C planes with at::parallel_for (OpenMP in PyTorch's CPU
// builds, so torch.set_num_threads governs it and no second OpenMP runtime is linked).
//
// Forward: plane (n, c) of the output is one contiguous block of K*L elements, written row by row: for each
// kernel offset and each window row, zeros where the row reads padding, else one strided copy from the
// unpadded input (no padded copy) with zero borders. The copy moves bits (an unsigned integer of the element's
// width), so every dtype is bit-exact, NaN payloads and -0.0 included. With the step 1 (stride 1 along a
// contiguous innermost dim) it is a plain vectorised copy; with step 2 gcc -O3 -march=native loads two vectors
// and deinterleaves them with one permute (vpermt2d/w/q on AVX-512); other steps are a scalar strided loop.
//
// Backward: for each input row of plane (n, c), a row of accumulators in the op-math type (float for half
// types, then rounded once) gathers, for each kernel offset whose windows read that row, the slice of
// grad_output those windows wrote: contiguous adds into the accumulators of one phase (x mod s along the
// innermost dim, stored phase-major), then the phases are interleaved into the gradient row. Each input entry
// sums its at most K terms in one fixed order: no atomics, deterministic.

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <vector>

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

// ---------------------------------------------------------------------------------------------- forward

template <typename T>
inline void copy_row(T* __restrict dst, const T* __restrict src, int64_t n, int64_t step) {
  if (step == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else if (step == 2) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[2 * i];  // two loads and one deinterleaving permute per vector
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * step];
  }
}

template <typename T>
inline void zero_row(T* dst, int64_t n) {
  std::fill(dst, dst + n, T(0));
}

// T: an unsigned integer of the element's width (the forward only moves bits).
template <typename T>
void unfold_kernel(const at::Tensor& input, at::Tensor& out, const Problem& p) {
  const T* in = reinterpret_cast<const T*>(input.const_data_ptr());
  T* o = reinterpret_cast<T*>(out.mutable_data_ptr());
  const int64_t dims = input.dim() - 2;
  int64_t in_stride[3];
  for (int64_t i = 0; i < 3; ++i) in_stride[i] = i < 3 - dims ? 0 : input.stride(2 + i - (3 - dims));
  const int64_t sN = input.stride(0), sC = input.stride(1);
  const int64_t O0 = p.windows[0], O1 = p.windows[1], O2 = p.windows[2];
  const int64_t plane = p.K * p.L;
  // Along the innermost dim each kernel offset's [lo, hi) is the same for every window row: computed once.
  std::vector<int64_t> lo2(p.kernel[2]), hi2(p.kernel[2]);
  for (int64_t j = 0; j < p.kernel[2]; ++j)
    window_range(p.size[2], p.padding[2], p.dilation[2], p.stride[2], O2, j, lo2[j], hi2[j]);
  const int64_t step = p.stride[2] * in_stride[2];
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, plane));
  at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const T* src = in + (nc / p.C) * sN + (nc % p.C) * sC;
      T* dst = o + nc * plane;
      for (int64_t j0 = 0; j0 < p.kernel[0]; ++j0)
        for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1)
          for (int64_t j2 = 0; j2 < p.kernel[2]; ++j2) {
            const int64_t lo = lo2[j2], hi = hi2[j2];
            const int64_t x2 = lo * p.stride[2] + j2 * p.dilation[2] - p.padding[2];
            for (int64_t o0 = 0; o0 < O0; ++o0) {
              const int64_t x0 = o0 * p.stride[0] + j0 * p.dilation[0] - p.padding[0];
              const bool in0 = x0 >= 0 && x0 < p.size[0];
              for (int64_t o1 = 0; o1 < O1; ++o1, dst += O2) {
                const int64_t x1 = o1 * p.stride[1] + j1 * p.dilation[1] - p.padding[1];
                if (!in0 || x1 < 0 || x1 >= p.size[1] || hi == lo) {
                  zero_row(dst, O2);
                  continue;
                }
                zero_row(dst, lo);
                copy_row(dst + lo, src + x0 * in_stride[0] + x1 * in_stride[1] + x2 * in_stride[2], hi - lo, step);
                zero_row(dst + hi, O2 - hi);
              }
            }
          }
    }
  });
}

void unfold_into(const at::Tensor& input, at::Tensor& out, const Problem& p) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(), "unfold_cpu: CPU tensors only");
  TORCH_CHECK(out.is_contiguous() && out.dtype() == input.dtype(), "unfold_cpu: out must be contiguous, input's dtype");
  TORCH_CHECK(out.sizes() == at::IntArrayRef({p.N, p.C * p.K, p.L}), "unfold_cpu: out has the wrong shape");
  if (out.numel() == 0) return;
  switch (input.element_size()) {
    case 2: unfold_kernel<uint16_t>(input, out, p); break;
    case 4: unfold_kernel<uint32_t>(input, out, p); break;
    case 8: unfold_kernel<uint64_t>(input, out, p); break;
    default: TORCH_CHECK(false, "unfold_cpu: unsupported element size ", input.element_size());
  }
}

at::Tensor unfold(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride) {
  const Problem p = make_problem(input.sizes(), kernel, dilation, padding, stride);
  at::Tensor out = at::empty({p.N, p.C * p.K, p.L}, input.options().memory_format(at::MemoryFormat::Contiguous));
  unfold_into(input, out, p);
  return out;
}

void unfold_out(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef dilation, at::IntArrayRef padding,
                at::IntArrayRef stride, at::Tensor out) {
  const Problem p = make_problem(input.sizes(), kernel, dilation, padding, stride);
  unfold_into(input, out, p);
}

// ---------------------------------------------------------------------------------------------- backward

template <typename scalar_t>
void fold_kernel(const at::Tensor& grad_output, at::Tensor& grad_input, const Problem& p) {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* g = grad_output.const_data_ptr<scalar_t>();
  scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
  const int64_t gN = grad_output.stride(0), gR = grad_output.stride(1), gL = grad_output.stride(2);
  const int64_t S0 = p.size[0], S1 = p.size[1], S2 = p.size[2];
  const int64_t O1 = p.windows[1], O2 = p.windows[2];
  const int64_t s2 = p.stride[2];
  const int64_t M = (S2 + s2 - 1) / s2;  // positions per phase along the innermost dim
  // Per innermost kernel offset: its windows [lo, hi), and where they land: phase r, first position m.
  const int64_t k2 = p.kernel[2];
  std::vector<int64_t> lo2(k2), hi2(k2), phase(k2), first(k2);
  for (int64_t j = 0; j < k2; ++j) {
    window_range(S2, p.padding[2], p.dilation[2], s2, O2, j, lo2[j], hi2[j]);
    const int64_t x = lo2[j] * s2 + j * p.dilation[2] - p.padding[2];  // >= 0 when the range is not empty
    phase[j] = hi2[j] > lo2[j] ? x % s2 : 0;
    first[j] = hi2[j] > lo2[j] ? x / s2 : 0;
  }
  // The window o along an outer dim that kernel offset j reads at position x, or -1.
  auto window_of = [&](int64_t dim, int64_t x, int64_t j) -> int64_t {
    const int64_t t = x + p.padding[dim] - j * p.dilation[dim];
    if (t < 0 || t % p.stride[dim] != 0) return -1;
    const int64_t o = t / p.stride[dim];
    return o < p.windows[dim] ? o : -1;
  };
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.K * p.L));
  at::parallel_for(0, p.N * p.C, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(s2 * M);
    for (int64_t nc = begin; nc < end; ++nc) {
      const scalar_t* plane = g + (nc / p.C) * gN + (nc % p.C) * p.K * gR;
      scalar_t* dst = gi + nc * S0 * S1 * S2;
      for (int64_t x0 = 0; x0 < S0; ++x0)
        for (int64_t x1 = 0; x1 < S1; ++x1, dst += S2) {
          std::fill(acc.begin(), acc.end(), acc_t(0));
          for (int64_t j0 = 0; j0 < p.kernel[0]; ++j0) {
            const int64_t o0 = window_of(0, x0, j0);
            if (o0 < 0) continue;
            for (int64_t j1 = 0; j1 < p.kernel[1]; ++j1) {
              const int64_t o1 = window_of(1, x1, j1);
              if (o1 < 0) continue;
              for (int64_t j2 = 0; j2 < k2; ++j2) {
                const int64_t n = hi2[j2] - lo2[j2];
                if (n <= 0) continue;
                const scalar_t* row =
                    plane + ((j0 * p.kernel[1] + j1) * k2 + j2) * gR + ((o0 * O1 + o1) * O2 + lo2[j2]) * gL;
                acc_t* __restrict a = acc.data() + phase[j2] * M + first[j2];
                if (gL == 1) {
                  for (int64_t i = 0; i < n; ++i) a[i] += static_cast<acc_t>(row[i]);
                } else {
                  for (int64_t i = 0; i < n; ++i) a[i] += static_cast<acc_t>(row[i * gL]);
                }
              }
            }
          }
          if (s2 == 1) {
            for (int64_t x = 0; x < S2; ++x) dst[x] = static_cast<scalar_t>(acc[x]);
          } else if (s2 == 2) {
            const acc_t* __restrict even = acc.data();
            const acc_t* __restrict odd = acc.data() + M;
            const int64_t pairs = S2 / 2;
            for (int64_t m = 0; m < pairs; ++m) {  // interleave the two phases
              dst[2 * m] = static_cast<scalar_t>(even[m]);
              dst[2 * m + 1] = static_cast<scalar_t>(odd[m]);
            }
            if (S2 % 2) dst[S2 - 1] = static_cast<scalar_t>(even[pairs]);
          } else {
            for (int64_t x = 0; x < S2; ++x) dst[x] = static_cast<scalar_t>(acc[(x % s2) * M + x / s2]);
          }
        }
    }
  });
}

at::Tensor fold(const at::Tensor& grad_output, at::IntArrayRef input_shape, at::IntArrayRef kernel,
                at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  TORCH_CHECK(grad_output.device().is_cpu(), "fold_cpu: CPU tensors only");
  const Problem p = make_problem(input_shape, kernel, dilation, padding, stride);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef({p.N, p.C * p.K, p.L}), "fold_cpu: grad_output has the wrong shape");
  at::Tensor grad_input = at::empty(input_shape, grad_output.options().memory_format(at::MemoryFormat::Contiguous));
  if (grad_input.numel() == 0) return grad_input;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad_output.scalar_type(), "fold_cpu",
                                  [&] { fold_kernel<scalar_t>(grad_output, grad_input, p); });
  return grad_input;
}

}  // namespace

UNFOLD_LIBRARY(UNFOLD_NAMESPACE, m) {
  m.def("unfold(Tensor input, int[] kernel_size, int[] dilation, int[] padding, int[] stride) -> Tensor");
  m.def("unfold_out(Tensor input, int[] kernel_size, int[] dilation, int[] padding, int[] stride, Tensor(a!) out) -> ()");
  m.def("fold(Tensor grad_output, int[] input_shape, int[] kernel_size, int[] dilation, int[] padding, int[] stride) -> Tensor");
}

UNFOLD_LIBRARY_IMPL(UNFOLD_NAMESPACE, CPU, m) {
  m.impl("unfold", &unfold);
  m.impl("unfold_out", &unfold_out);
  m.impl("fold", &fold);
}
