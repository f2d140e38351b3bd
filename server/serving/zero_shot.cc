#include "server/serving/zero_shot.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/field_error.h"
#include "server/util/quote.h"

namespace relserve {
namespace {

absl::Status BadTemplate(const std::string& hypothesis_template, const std::string& why) {
  return FieldError(FieldErrorKind::kInvalid, "hypothesis_template", 
      absl::StrCat("hypothesis_template ", Quote(hypothesis_template), " ", why,
                   " (it must hold {} where the label goes, as \"", kDefaultHypothesisTemplate, "\")"));
}

double Softmax2(double other, double entail) {
  // exp(entail) / (exp(other) + exp(entail)), without overflow.
  return 1.0 / (1.0 + std::exp(other - entail));
}

}  // namespace

absl::StatusOr<std::string> FormatHypothesis(const std::string& t, const std::string& label) {
  // An upper bound of the result's size: every "{" a field holding the label.
  const size_t braces = static_cast<size_t>(std::count(t.begin(), t.end(), '{'));
  if (t.size() > kMaxHypothesisBytes || (label.size() > 0 && braces > kMaxHypothesisBytes / label.size()) ||
      t.size() + braces * label.size() > kMaxHypothesisBytes) {
    // The exact size, counted without building it.
    size_t bytes = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '{' && i + 1 < t.size() && t[i + 1] != '{') {
        const size_t close = t.find('}', i + 1);
        if (close == std::string::npos) break;
        bytes += label.size();
        i = close;
      } else {
        ++bytes;
        if ((t[i] == '{' || t[i] == '}') && i + 1 < t.size() && t[i + 1] == t[i]) ++i;
      }
    }
    if (bytes > kMaxHypothesisBytes) {
      return FieldError(FieldErrorKind::kTooLong, "hypothesis_template",
                        absl::StrCat("hypothesis_template with the label ", Quote(label),
                                                     " makes a hypothesis of ", bytes, " bytes, more than the limit of ",
                                                     kMaxHypothesisBytes));
    }
  }
  std::string out;
  out.reserve(t.size() + label.size());
  int fields = 0;
  int automatic = 0;  // "{}" fields: Python numbers them 0, 1, ..., and has one argument to give
  int manual = 0;     // "{0}" fields
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '{') {
      if (i + 1 < t.size() && t[i + 1] == '{') {
        out += '{';
        ++i;
        continue;
      }
      const size_t close = t.find('}', i + 1);
      if (close == std::string::npos) return BadTemplate(t, "has a '{' that is never closed");
      const std::string field = t.substr(i + 1, close - i - 1);
      if (!field.empty() && field != "0") {
        return BadTemplate(t, absl::StrCat("has the field {", field, "}, which one label cannot fill"));
      }
      (field.empty() ? automatic : manual) += 1;
      if (automatic > 1) {
        return BadTemplate(t, "has more than one {}, which one label cannot fill (write {0} to repeat the label)");
      }
      if (automatic > 0 && manual > 0) {
        return BadTemplate(t, "mixes {} and {0} (Python cannot switch from automatic to manual field numbering)");
      }
      out += label;
      ++fields;
      i = close;
    } else if (c == '}') {
      if (i + 1 < t.size() && t[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return BadTemplate(t, "has a single '}' (write }} for a brace)");
    } else {
      out += c;
    }
  }
  if (fields == 0) return BadTemplate(t, "has no {} for the label");
  return out;
}

absl::StatusOr<int> EntailmentIndex(const std::vector<std::string>& labels, const std::string& model) {
  int found = -1;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!absl::StartsWith(absl::AsciiStrToLower(labels[i]), "entail")) continue;
    // label2id as save_pretrained writes it: sorted by name, the first match wins.
    if (found < 0 || labels[i] < labels[found]) found = static_cast<int>(i);
  }
  if (found >= 0) return found;
  return WithFieldError(absl::FailedPreconditionError(absl::StrCat(
      "model ", model, " has no entailment label (its labels: ", labels.empty() ? "none" : absl::StrJoin(labels, ", "),
      "): zero-shot classification needs an NLI model whose id2label names a label starting with \"entail\"")),
                        FieldErrorKind::kInvalid, "model");
}

std::vector<double> ZeroShotScores(const std::vector<std::vector<float>>& logits, int entailment, bool multi_label) {
  const size_t n = logits.size();
  std::vector<double> scores(n);
  if (n == 0) return scores;
  if (multi_label || n == 1) {
    for (size_t k = 0; k < n; ++k) {
      const int contradiction = entailment == 0 ? static_cast<int>(logits[k].size()) - 1 : 0;
      scores[k] = Softmax2(logits[k][contradiction], logits[k][entailment]);
    }
    return scores;
  }
  double max = -INFINITY;
  for (const auto& l : logits) max = std::max(max, static_cast<double>(l[entailment]));
  double sum = 0;
  for (size_t k = 0; k < n; ++k) {
    scores[k] = std::exp(static_cast<double>(logits[k][entailment]) - max);
    sum += scores[k];
  }
  for (double& s : scores) s /= sum;
  return scores;
}

std::vector<int> ZeroShotOrder(const std::vector<double>& scores) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a > b;
  });
  return order;
}

}  // namespace relserve
