#include "server/model_config/max_length.h"

#include "absl/strings/str_cat.h"
#include "server/model_config/model_limits.h"

namespace relserve {

absl::StatusOr<MaxLength> ResolveMaxLength(const ModelConfig& config, const SentenceTransformersConfig& st,
                                           int requested) {
  if (requested > kMaxSequenceLength) {
    return absl::InvalidArgumentError(absl::StrCat("max_length ", requested, " exceeds the limit of ",
                                                   kMaxSequenceLength, " tokens"));
  }
  int max_length = config.max_length;
  std::string max_length_source =
      config.max_length_limit > 0 ? config.max_length_limit_source : "the model's default";
  if (st.max_seq_length > 0) {
    const std::string st_source = absl::StrCat("max_seq_length ", st.max_seq_length, " in ", st.transformer_config_path);
    if (config.max_length_limit > 0 && config.max_length_limit < st.max_seq_length) {
      // sentence-transformers would fail on inputs past the position table; TEI cuts there too.
      max_length = config.max_length_limit;
      max_length_source = absl::StrCat(config.max_length_limit_source, ", below ", st_source);
    } else if (st.max_seq_length > kMaxSequenceLength) {
      max_length = kMaxSequenceLength;
      max_length_source = absl::StrCat("relserve's limit, below ", st_source);
    } else {
      max_length = st.max_seq_length;
      max_length_source = st_source;
    }
  }
  if (requested > 0) {
    if (config.max_length_limit > 0 && requested > config.max_length_limit) {
      return absl::InvalidArgumentError(absl::StrCat("max_length ", requested, " exceeds the model's ",
                                                     config.max_length_limit_source));
    }
    if (st.max_seq_length > 0 && requested > max_length) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_length ", requested, " exceeds the model's ", max_length_source));
    }
    if (requested != max_length) {
      max_length_source = absl::StrCat("as asked; the model's own is ", max_length, ", ", max_length_source);
    }
    max_length = requested;
  }
  return MaxLength{max_length, max_length_source};
}

}  // namespace relserve
