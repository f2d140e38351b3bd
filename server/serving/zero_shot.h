#ifndef RELSERVE_SERVER_SERVING_ZERO_SHOT_H_
#define RELSERVE_SERVER_SERVING_ZERO_SHOT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// Zero-shot classification with an NLI model, as transformers 4.40.2's
// ZeroShotClassificationPipeline computes it: each candidate label becomes a hypothesis
// (hypothesis_template.format(label)), each (text, hypothesis) pair goes through the model's
// sequence-classification head, and the labels' scores come from the entailment logits.

// The pipeline's default hypothesis_template.
inline constexpr char kDefaultHypothesisTemplate[] = "This example is {}.";

// Python's str.format(label) for a template with one positional field: one "{}", or "{0}" any
// number of times, becomes `label`; "{{" and "}}" become braces. INVALID_ARGUMENT naming the
// template when it has no field for the label (the pipeline refuses a template that formats to
// itself), or a field Python could not fill with one positional argument ("{1}", "{name}",
// "{:>5}", a second "{}", "{}" beside "{0}", an unmatched brace).
// A hypothesis longer than kMaxHypothesisBytes is INVALID_ARGUMENT before it is built (a template
// of many {} and a long label would otherwise multiply into gigabytes).
inline constexpr size_t kMaxHypothesisBytes = 64 << 10;
absl::StatusOr<std::string> FormatHypothesis(const std::string& hypothesis_template, const std::string& label);

// The pipeline's entailment_id: the id of the first label (in label2id's order, which
// save_pretrained writes sorted by name) whose lower-cased name starts with "entail". `labels`
// is id2label by id. FAILED_PRECONDITION naming the model and its labels when none does (the
// pipeline would fall back to the last logit and answer nonsense).
absl::StatusOr<int> EntailmentIndex(const std::vector<std::string>& labels, const std::string& model);

// The scores of the candidate labels from their pairs' logits (logits[k]: the head's logits of
// the pair of label k). Single-label with two labels or more: softmax over the labels'
// entailment logits. multi_label, or a single candidate label: for each label on its own, the
// softmax of (contradiction, entailment) logits' entailment part, contradiction being logit 0,
// or the last one when entailment is 0.
std::vector<double> ZeroShotScores(const std::vector<std::vector<float>>& logits, int entailment, bool multi_label);

// The order the pipeline lists labels in: highest score first; equal scores keep numpy's
// reversed argsort order, the later label first.
std::vector<int> ZeroShotOrder(const std::vector<double>& scores);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_ZERO_SHOT_H_
