// The digits example's two-layer perceptron; see mlp.h.
#include "examples/digits/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "examples/digits/split_mix.h"

namespace kolo::examples {
namespace {

enum Param { kW1 = 0, kB1 = 1, kW2 = 2, kB2 = 3 };

void FillUniform(std::vector<float>* values, float limit, SplitMix64* rng) {
  for (float& v : *values) v = (2.0f * rng->NextFloat() - 1.0f) * limit;
}

}  // namespace

Mlp::Mlp(int hidden, uint64_t seed) : hidden_(hidden) {
  const int64_t h = hidden, in = kDigitsFeatures, out = kDigitsClasses;
  params_ = {{"w1", {h, in}, std::vector<float>(h * in)},
             {"b1", {h}, std::vector<float>(h)},
             {"w2", {out, h}, std::vector<float>(out * h)},
             {"b2", {out}, std::vector<float>(out)}};
  SplitMix64 rng(seed);
  FillUniform(&params_[kW1].values, std::sqrt(6.0f / static_cast<float>(in + h)), &rng);
  FillUniform(&params_[kW2].values, std::sqrt(6.0f / static_cast<float>(h + out)), &rng);
}

void Mlp::Forward(const float* x, float* hidden, float* scores) const {
  const float* w1 = params_[kW1].values.data();
  const float* b1 = params_[kB1].values.data();
  const float* w2 = params_[kW2].values.data();
  const float* b2 = params_[kB2].values.data();
  for (int k = 0; k < hidden_; ++k) {
    float sum = b1[k];
    for (int i = 0; i < kDigitsFeatures; ++i) sum += w1[k * kDigitsFeatures + i] * x[i];
    hidden[k] = std::max(sum, 0.0f);
  }
  for (int c = 0; c < kDigitsClasses; ++c) {
    float sum = b2[c];
    for (int k = 0; k < hidden_; ++k) sum += w2[c * hidden_ + k] * hidden[k];
    scores[c] = sum;
  }
}

void Mlp::Backward(const float* x, const float* hidden, const float* d_scores,
                   std::vector<NamedTensor>* grads) const {
  const float* w2 = params_[kW2].values.data();
  float* g_w1 = (*grads)[kW1].values.data();
  float* g_b1 = (*grads)[kB1].values.data();
  float* g_w2 = (*grads)[kW2].values.data();
  float* g_b2 = (*grads)[kB2].values.data();
  for (int c = 0; c < kDigitsClasses; ++c) {
    g_b2[c] += d_scores[c];
    for (int k = 0; k < hidden_; ++k) g_w2[c * hidden_ + k] += d_scores[c] * hidden[k];
  }
  for (int k = 0; k < hidden_; ++k) {
    if (hidden[k] <= 0.0f) continue;  // ReLU passes no gradient where it was off
    float d_hidden = 0.0f;
    for (int c = 0; c < kDigitsClasses; ++c) d_hidden += w2[c * hidden_ + k] * d_scores[c];
    g_b1[k] += d_hidden;
    for (int i = 0; i < kDigitsFeatures; ++i) g_w1[k * kDigitsFeatures + i] += d_hidden * x[i];
  }
}

float Mlp::LossAndGradients(const Dataset& data, const int* indices, int count,
                            std::vector<NamedTensor>* gradients) const {
  if (gradients->size() != params_.size()) {
    *gradients = params_;  // same shapes; names "grad/w1", ...
    for (NamedTensor& g : *gradients) g.name = "grad/" + g.name;
  }
  for (NamedTensor& g : *gradients) std::fill(g.values.begin(), g.values.end(), 0.0f);
  std::vector<float> hidden(static_cast<size_t>(hidden_));
  float scores[kDigitsClasses], d_scores[kDigitsClasses];
  double total_loss = 0.0;
  for (int n = 0; n < count; ++n) {
    const float* x = data.sample(indices[n]);
    Forward(x, hidden.data(), scores);
    // Softmax cross-entropy, shifted by the largest score for stability.
    float top = *std::max_element(scores, scores + kDigitsClasses);
    float norm = 0.0f;
    for (int c = 0; c < kDigitsClasses; ++c) norm += std::exp(scores[c] - top);
    const int label = data.labels[indices[n]];
    total_loss += std::log(norm) - (scores[label] - top);
    for (int c = 0; c < kDigitsClasses; ++c) d_scores[c] = std::exp(scores[c] - top) / norm;
    d_scores[label] -= 1.0f;
    Backward(x, hidden.data(), d_scores, gradients);
  }
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  for (NamedTensor& g : *gradients) {
    for (float& v : g.values) v *= scale;
  }
  return static_cast<float>(total_loss) * scale;
}

void Mlp::SgdStep(const std::vector<NamedTensor>& gradients, float learning_rate) {
  for (size_t p = 0; p < params_.size(); ++p) {
    std::vector<float>& values = params_[p].values;
    for (size_t i = 0; i < values.size(); ++i) values[i] -= learning_rate * gradients[p].values[i];
  }
}

int Mlp::Predict(const float* x) const {
  std::vector<float> hidden(static_cast<size_t>(hidden_));
  float scores[kDigitsClasses];
  Forward(x, hidden.data(), scores);
  return static_cast<int>(std::max_element(scores, scores + kDigitsClasses) - scores);
}

double Mlp::Accuracy(const Dataset& data) const {
  int correct = 0;
  for (int n = 0; n < data.size(); ++n) correct += Predict(data.sample(n)) == data.labels[n];
  return data.size() > 0 ? static_cast<double>(correct) / data.size() : 0.0;
}

uint64_t Mlp::WeightsChecksum() const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const NamedTensor& p : params_) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.values.data());
    for (size_t i = 0; i < p.values.size() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
    }
  }
  return hash;
}

}  // namespace kolo::examples
