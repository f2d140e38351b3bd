#include "tests/model/naive_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "server/checkpoint/safetensors_checkpoint.h"

namespace relserve::naive {

Weights::Weights(const std::string& dir, const std::string& who) : who_(who) {
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir);
  if (!ckpt.ok()) throw std::runtime_error(who_ + std::string(ckpt.status().message()));
  for (const std::string& name : (*ckpt)->Names()) {
    const TensorView* v = (*ckpt)->Find(name);
    if (v->dtype != StDType::kF32) throw std::runtime_error(who_ + "reads only F32 tensors: " + name);
    std::vector<float> f(static_cast<size_t>(v->numel()));
    std::memcpy(f.data(), v->data, v->nbytes);
    tensors_[name] = Tensor{v->shape, Vec(f.begin(), f.end())};
  }
}

bool Weights::AnyStartsWith(const std::string& prefix) const {
  for (const auto& [name, t] : tensors_) {
    if (name.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

const Tensor& Weights::Get(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::runtime_error(who_ + "checkpoint has no tensor " + name);
  if (it->second.shape != shape) throw std::runtime_error(who_ + "tensor " + name + " has an unexpected shape");
  return it->second;
}

Vec Linear(const Vec& x, int64_t rows, const Tensor& w, const Tensor* b) {
  const int64_t out = w.shape[0], in = w.shape[1];
  if (static_cast<int64_t>(x.size()) != rows * in) throw std::runtime_error("Linear: input size mismatch");
  Vec y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w.data[o * in + i];
      if (b != nullptr) s += b->data[o];
      y[r * out + o] = s;
    }
  }
  return y;
}

Vec LayerNorm(const Vec& x, int64_t rows, int64_t n, const Tensor& w, const Tensor& b, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[r * n + i];
    mean /= static_cast<double>(n);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    var /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + eps) * w.data[i] + b.data[i];
    }
  }
  return y;
}

void SoftmaxRow(double* row, int64_t n) {
  double max = row[0];
  for (int64_t j = 1; j < n; ++j) max = std::max(max, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - max);
    sum += row[j];
  }
  for (int64_t j = 0; j < n; ++j) row[j] /= sum;
}

}  // namespace relserve::naive
