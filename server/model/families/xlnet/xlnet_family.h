#ifndef RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_FAMILY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_FAMILY_H_

#include "server/model/families/family_descriptor.h"

namespace relserve {

// XLNet (model_type "xlnet"): XLNetModel, XLNetForSequenceClassification, and the backbone of
// XLNetLMHeadModel (the architecture of the published base checkpoints), whose lm_loss is
// ignored. Token types reach the model as segment ids (compared for equality only). Creates
// "xlnet" (xlnet-base-cased's configuration).
const FamilyDescriptor& XlnetFamily();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_FAMILY_H_
