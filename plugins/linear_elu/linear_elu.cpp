// Linear attention (Katharopoulos et al., 2020, "Transformers are RNNs", eq. 6 with the feature
// map of eq. 7): φ(x) = elu(x) + 1 applied to q and k as they come, and
//   ATTN_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_j φ(k_j) + eps),
// sums over real keys only (rf::linear_attention). Deterministic: nothing is drawn.
// form = "nystromformer_lra": the Nyströmformer authors' LRA "linear" (LRA/code/attention_linear.py),
// no normaliser and a scale of the padded length n instead: ATTN = φ(Q) (φ(K)ᵀ V) / √n.
#include <cmath>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "random_features.hpp"

namespace attnlab::linear_elu {

const ParamSpec kParams[] = {
    {"eps", ParamType::real, "1e-06", 0, 1, nullptr, "guard added to the linear attention's denominator (authors: 1e-6)"},
    {"form", ParamType::string, "katharopoulos", 0, 0, "katharopoulos|nystromformer_lra",
     "katharopoulos: normalised by phi(q) . sum phi(k) (the paper, fast_transformers); nystromformer_lra: the "
     "Nystromformer authors' LRA code, phi(Q) (phi(K)^T V) / sqrt(n), n the padded length, no normaliser (depends "
     "on the padding; eps unused)"},
};

enum class Form { katharopoulos, nystromformer_lra };

at::Tensor phi(const at::Tensor& x) { return at::elu(x) + 1; }

class LinearEluAttention : public AttentionMethod {
 public:
  LinearEluAttention(double eps, Form form) : eps_(eps), form_(form) {}

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    // padded keys are zeroed first, so that no value sitting there can reach a real token
    const auto real = key_valid.unsqueeze(1).unsqueeze(-1);
    const auto zero = at::zeros({}, k.options());
    const auto k_real = at::where(real, k, zero);
    if (form_ == Form::katharopoulos) return rf::linear_attention(phi(q), phi(k_real), v, key_valid, eps_);
    const auto features = at::where(real, phi(k_real), zero), values = at::where(real, v, zero);
    return at::matmul(phi(q), at::matmul(features.transpose(-2, -1), values)) / std::sqrt(static_cast<double>(q.size(2)));
  }

 private:
  double eps_;
  Form form_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  return std::make_shared<LinearEluAttention>(
      params.real("eps"),
      params.choice<Form>("form", {{"katharopoulos", Form::katharopoulos}, {"nystromformer_lra", Form::nystromformer_lra}}));
}

}  // namespace attnlab::linear_elu

ATTNLAB_PLUGIN_INFO(attention, "linear_elu", "1.0",
                    "linear attention with phi(x) = elu(x) + 1 (Katharopoulos et al. 2020), O(n), deterministic",
                    attnlab::linear_elu::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::linear_elu::create);
