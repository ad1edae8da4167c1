// Mlp: the digits example's model, a two-layer perceptron 64 -> hidden (ReLU) -> 10 with a
// softmax cross-entropy loss, written out by hand in float32. Gradients have the same named
// layout as the parameters, so that each can be averaged across ranks as one kolo tensor.
// Not thread-safe; one per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/digits/digits_data.h"

namespace kolo::examples {

// One named float buffer with its shape: a parameter or its gradient.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

class Mlp {
 public:
  // Glorot-uniform weights and zero biases drawn from `seed`: identical on every rank.
  Mlp(int hidden, uint64_t seed);

  // Mean cross-entropy over samples `indices[0..count)` of `data`; writes the gradient of that
  // mean into `gradients`: laid out like parameters(), named "grad/w1", ... (the vector is
  // rebuilt if its size is not that of parameters()).
  float LossAndGradients(const Dataset& data, const int* indices, int count,
                         std::vector<NamedTensor>* gradients) const;

  // parameters -= learning_rate * gradients.
  void SgdStep(const std::vector<NamedTensor>& gradients, float learning_rate);

  // The class with the highest score.
  int Predict(const float* x) const;
  // Fraction of `data` predicted correctly.
  double Accuracy(const Dataset& data) const;

  // FNV-1a 64 over the bytes of every parameter: equal on two ranks iff the weights are
  // bit-identical (up to hash collisions).
  uint64_t WeightsChecksum() const;

  // "w1" [hidden, 64], "b1" [hidden], "w2" [10, hidden], "b2" [10].
  const std::vector<NamedTensor>& parameters() const { return params_; }

 private:
  // Forward pass for one sample: hidden activations (after ReLU) and class scores.
  void Forward(const float* x, float* hidden, float* scores) const;
  // Adds one sample's gradient, given d(loss)/d(scores), into `grads`.
  void Backward(const float* x, const float* hidden, const float* d_scores,
                std::vector<NamedTensor>* grads) const;

  const int hidden_;
  std::vector<NamedTensor> params_;
};

}  // namespace kolo::examples
