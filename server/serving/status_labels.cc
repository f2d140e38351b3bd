#include "server/serving/status_labels.h"

namespace relserve {

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

}  // namespace relserve
