// SpecTrain (seed 000 eqs. 1, 4, 5, 6): smoothed gradient and weight
// prediction. Float32 arithmetic; γ, 1−γ and s·η are rounded to float once.
#include "exec/optim/spectrain.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "model/error.hpp"

namespace trainsim {

void validate_spectrain_options(const SpecTrainOptions& options) {
  if (!std::isfinite(options.learning_rate) || options.learning_rate <= 0) {
    throw InputError("--set learning_rate", "is " + std::to_string(options.learning_rate), "a number > 0");
  }
  if (!std::isfinite(options.gamma) || options.gamma <= 0 || options.gamma > 1) {
    throw InputError("--set gamma", "is " + std::to_string(options.gamma), "a decay factor in (0, 1]");
  }
}

SpecTrain::SpecTrain(SpecTrainOptions options) : options_(options) { validate_spectrain_options(options_); }

void SpecTrain::observe(const Weights& weights, const Gradients& grads, int64_t first, int64_t last) {
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(grads.size()) &&
                     weights.size() == grads.size(),
                 "SpecTrain range or sizes do not match the model");
  if (smoothed_.size() < weights.size()) {
    smoothed_.resize(weights.size());
    steps_.resize(weights.size(), 0);
    row_steps_.resize(weights.size());
  }
  const auto gamma = static_cast<float>(options_.gamma);
  const auto rest = static_cast<float>(1.0 - options_.gamma);
  for (int64_t layer = first; layer <= last; ++layer) {
    LayerParams& v = smoothed_[layer];
    if (v.size() != weights[layer].size()) {
      v.clear();
      for (const Tensor& param : weights[layer]) v.emplace_back(param.shape, 0.0f);
      row_steps_[layer].assign(v.size(), {});
    }
    TRAINSIM_CHECK(grads[layer].size() == v.size(), "layer " + std::to_string(layer) + " gradient count");
    const int64_t step = steps_[layer];  // observations before this one
    for (size_t p = 0; p < v.size(); ++p) {
      const ParamGrad& g = grads[layer][p];
      std::vector<float>& values = v[p].data;
      std::vector<int64_t>& row_step = row_steps_[layer][p];
      const int64_t width = v[p].row_size();
      if (!g.sparse) {
        TRAINSIM_CHECK(g.dense.data.size() == values.size(), "gradient size differs from its parameter's");
        for (int64_t r = 0; !row_step.empty() && r < v[p].rows(); ++r) catch_up(layer, p, r, values.data() + r * width);
        row_step.clear();  // every row up to date
        for (size_t i = 0; i < values.size(); ++i) values[i] = gamma * values[i] + rest * g.dense.data[i];
        continue;
      }
      TRAINSIM_CHECK(g.row_values.data.size() == g.rows.size() * static_cast<size_t>(width),
                     "sparse gradient width differs from its table's");
      if (row_step.empty()) row_step.assign(static_cast<size_t>(v[p].rows()), step);
      for (size_t r = 0; r < g.rows.size(); ++r) {
        const int64_t row = g.rows[r];
        TRAINSIM_CHECK(row >= 0 && row < v[p].rows(), "sparse row outside its table");
        float* out = values.data() + row * width;
        if (row_step[row] != step + 1) {  // the row's first touch this step: its decays, this step's included
          for (int64_t k = row_step[row]; k <= step; ++k) {
            for (int64_t j = 0; j < width; ++j) out[j] *= gamma;
          }
          row_step[row] = step + 1;
        }
        const float* in = g.row_values.data.data() + static_cast<int64_t>(r) * width;
        for (int64_t j = 0; j < width; ++j) out[j] += rest * in[j];
      }
    }
    steps_[layer] = step + 1;
  }
}

void SpecTrain::catch_up(int64_t layer, size_t p, int64_t row, float* out) const {
  const Tensor& v = smoothed_[layer][p];
  const int64_t width = v.row_size();
  std::copy_n(v.data.data() + row * width, width, out);
  const std::vector<int64_t>& row_step = row_steps_[layer][p];
  if (row_step.empty()) return;
  const auto gamma = static_cast<float>(options_.gamma);
  for (int64_t k = row_step[row]; k < steps_[layer]; ++k) {
    for (int64_t j = 0; j < width; ++j) out[j] *= gamma;
  }
}

Weights SpecTrain::smoothed_gradient() const {
  Weights v = smoothed_;
  for (size_t layer = 0; layer < v.size(); ++layer) {
    for (size_t p = 0; p < v[layer].size(); ++p) {
      Tensor& t = v[layer][p];
      for (int64_t r = 0; !row_steps_[layer][p].empty() && r < t.rows(); ++r) {
        catch_up(static_cast<int64_t>(layer), p, r, t.data.data() + r * t.row_size());
      }
    }
  }
  return v;
}

void SpecTrain::set_smoothed_gradient(Weights smoothed) {
  smoothed_ = std::move(smoothed);
  steps_.assign(smoothed_.size(), 0);
  row_steps_.assign(smoothed_.size(), {});
  for (size_t layer = 0; layer < smoothed_.size(); ++layer) row_steps_[layer].assign(smoothed_[layer].size(), {});
}

Weights SpecTrain::predict(const Weights& weights, int64_t version_difference, int64_t first, int64_t last) const {
  Weights predicted = weights;
  predict_into(weights, version_difference, first, last, predicted);
  return predicted;
}

void SpecTrain::predict_into(const Weights& weights, int64_t version_difference, int64_t first, int64_t last,
                             Weights& out) const {
  predict_into(weights, version_difference, first, last, out, Only{});
}

void SpecTrain::predict_into(const Weights& weights, int64_t version_difference, int64_t first, int64_t last,
                             Weights& out, const Only& only) const {
  TRAINSIM_CHECK(version_difference >= 0, "negative version difference");
  TRAINSIM_CHECK(first >= 0 && first <= last && last < static_cast<int64_t>(weights.size()),
                 "SpecTrain range outside the model");
  if (out.size() != weights.size()) out.resize(weights.size());
  const auto step = static_cast<float>(static_cast<double>(version_difference) * options_.learning_rate);
  std::vector<float> v_row;
  for (int64_t layer = first; layer <= last; ++layer) {
    if (layer < static_cast<int64_t>(only.skip.size()) && only.skip[layer] != 0) continue;
    const LayerParams& w = weights[layer];
    LayerParams& predicted = out[layer];
    // Before the first observation v = 0 and the prediction is W_t itself.
    const bool moves =
        version_difference != 0 && layer < static_cast<int64_t>(smoothed_.size()) && !smoothed_[layer].empty();
    if (predicted.size() != w.size()) predicted.resize(w.size());
    for (size_t p = 0; p < w.size(); ++p) {
      Tensor& to = predicted[p];
      if (to.shape != w[p].shape) to = Tensor(w[p].shape);
      const int64_t width = w[p].row_size();
      const bool lazy = moves && !row_steps_[layer][p].empty();
      const auto predict_row = [&](int64_t r) {
        const float* from = w[p].data.data() + r * width;
        float* into = to.data.data() + r * width;
        if (!moves) {
          std::copy_n(from, width, into);
          return;
        }
        const float* v = smoothed_[layer][p].data.data() + r * width;
        if (lazy) {
          v_row.resize(static_cast<size_t>(width));
          catch_up(layer, p, r, v_row.data());
          v = v_row.data();
        }
        for (int64_t j = 0; j < width; ++j) into[j] = from[j] - step * v[j];
      };
      if (layer == only.sparse_layer) {
        for (int64_t r : only.rows) {
          TRAINSIM_CHECK(r >= 0 && r < w[p].rows(), "a predicted row outside its table");
          predict_row(r);
        }
        continue;
      }
      if (!moves) {
        std::copy(w[p].data.begin(), w[p].data.end(), to.data.begin());
        continue;
      }
      TRAINSIM_CHECK(w[p].data.size() == smoothed_[layer][p].data.size(), "smoothed gradient shaped unlike the weights");
      if (lazy) {
        for (int64_t r = 0; r < w[p].rows(); ++r) predict_row(r);
        continue;
      }
      const std::vector<float>& v = smoothed_[layer][p].data;
      const float* from = w[p].data.data();
      float* into = to.data.data();
      for (size_t i = 0; i < v.size(); ++i) into[i] = from[i] - step * v[i];
    }
  }
}

int64_t SpecTrain::forward_version_difference(int64_t stages, int64_t stage) {
  TRAINSIM_CHECK(stages >= 1 && stage >= 0 && stage < stages, "stage outside the pipeline");
  return 2 * stages - stage - 2;
}

int64_t SpecTrain::backward_version_difference(int64_t stages, int64_t stage) {
  TRAINSIM_CHECK(stages >= 1 && stage >= 0 && stage < stages, "stage outside the pipeline");
  return stage;
}

}  // namespace trainsim
