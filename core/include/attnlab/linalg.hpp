#pragma once
// Linear algebra shared by the landmark methods (Skyformer, Nyströmformer): the Moore-Penrose
// pseudo-inverse of batched square matrices, by the iteration of Razavi et al. (2014) or exactly,
// and the Gaussian kernel between two sets of rows. All of them compute in fp32 (at least) inside
// autocast, and return fp32 for bf16/fp16 inputs.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab::linalg {

// The initial value Z₀ = Aᵀ / s of the iteration: which norms make s, over which matrices.
enum class NormScope {
  per_matrix,  // s = ‖A‖₁ ‖A‖∞ of each [m, m] matrix (Razavi's): the matrices stay independent
  global,      // s = max ‖A‖₁ · max ‖A‖∞ over the whole batch and heads: couples the batch
  global_column_sum,  // s = max ‖A‖₁ over the whole batch and heads (the largest column sum), no ‖A‖∞:
                      // the Skyformer authors' iterative_inv (init_option = "original"); couples the batch
};

enum class PinvMethod {
  iterative,  // Razavi et al. (2014) iteration, `iterations` steps (what the methods train with)
  exact,      // SVD / eigendecomposition (at::linalg_pinv): the methods' exactness limit
};

struct PinvOptions {
  PinvMethod method = PinvMethod::iterative;
  int iterations = 6;
  NormScope scope = NormScope::per_matrix;
  bool hermitian = false;  // exact method only: the matrices are symmetric (eigh instead of SVD)
};

// Pseudo-inverse of every [m, m] matrix of `a` [..., m, m] by the iteration (Nyströmformer
// supplement, eq. 10; Razavi et al. 2014)
//   Z_{j+1} = ¼ Z_j (13 I − A Z_j (15 I − A Z_j (7 I − A Z_j))),   Z_0 = Aᵀ / (‖A‖₁ ‖A‖∞) (NormScope),
// run `iterations` times. Differentiable; no host synchronisation. On A's range the residual
// R = I − A Z shrinks at third order, R_{j+1} = R_j³ (3I + R_j) / 4, so a start with small
// singular values of A Z_0 (an ill-conditioned A) takes a few steps of ×≈3.25 before converging.
// For a singular A, rounding outside A's range grows by 13/4 a step once converged: many more
// steps than needed hurt (Skyformer's ridge γ keeps its matrix non-singular).
// Differentiable through the iteration itself (what the methods train with), its backward written
// out (PinvTape) as one autograd node.
at::Tensor iterative_pinv(const at::Tensor& a, int iterations, NormScope scope = NormScope::per_matrix);

// iterative_pinv's forward with what its backward needs kept (A, Z_0 and its norms, and Z_j, P, U, V,
// T of each step), for a hand-written backward that contains it (Skyformer's): the gradient of A
// from that of the result, as autograd would give it through the iteration and Z_0's norms.
class PinvTape {
 public:
  PinvTape() = default;
  // A tape read back from tensors() (AutogradContext::save_for_backward keeps them).
  PinvTape(std::vector<at::Tensor> tensors, NormScope scope) : tensors_(std::move(tensors)), scope_(scope) {}
  // Z; keeps the tape when `keep`.
  at::Tensor forward(const at::Tensor& a, int iterations, NormScope scope, bool keep);
  // dL/dA from dL/dZ. `symmetric`: A is symmetric, so every matrix of the iteration is (they are
  // polynomials in A): the transposes are left out (the gradient then differs by rounding only).
  at::Tensor backward(const at::Tensor& grad_z, bool symmetric = false) const;
  const std::vector<at::Tensor>& tensors() const { return tensors_; }
  NormScope scope() const { return scope_; }

 private:
  static constexpr std::size_t kInitTensors = 7, kStepTensors = 5;
  std::vector<at::Tensor> tensors_;
  NormScope scope_ = NormScope::per_matrix;
};

// at::linalg_pinv over the batch, singular values below rcond × the largest treated as zero.
at::Tensor exact_pinv(const at::Tensor& a, bool hermitian = false, double rcond = 1e-15);

at::Tensor pinv(const at::Tensor& a, const PinvOptions& options);

// Parameter values: "per_head" | "global" | "global_column_sum"; "iterative" | "exact". Throw std::invalid_argument.
NormScope parse_norm_scope(const std::string& text);
PinvMethod parse_pinv_method(const std::string& text);

// κ(x, y) = exp(−‖x − y‖² / 2) between the rows of x [..., n, d] and y [..., m, d]: [..., n, m].
// The squared distance is ‖x‖² + ‖y‖² − 2 xᵀy clamped at 0, so κ ≤ 1 despite rounding.
// x_valid / y_valid (bool, broadcastable to [..., n] / [..., m]; optional): the rows or columns
// of invalid x / y rows are exactly 0. Every row, valid or not, must hold finite values (the
// methods zero padded rows first).
at::Tensor gaussian_kernel(const at::Tensor& x, const at::Tensor& y, const at::Tensor& x_valid = {},
                           const at::Tensor& y_valid = {});

// q and k scaled by p^-¼ (so that (q/p^¼)(k/p^¼)ᵀ = q kᵀ/√p, and κ works on Q/p^¼, K/p^¼ as in
// Skyformer eq. 3), v as it is, with every padded row of the three zeroed: whatever sits at
// padding (even inf or nan) then never reaches a real token's output or gradient.
struct ScaledRows {
  at::Tensor q, k, v;  // [B, H, N, p]
  at::Tensor valid;    // [B, N] bool
};
ScaledRows scale_and_mask(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid);
// The same with q and k scaled by factors of the caller's (1/√p and 1 for q kᵀ/√p, say). One
// autograd node for the three.
ScaledRows mask_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid,
                     double q_scale, double k_scale);

}  // namespace attnlab::linalg
