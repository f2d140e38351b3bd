#ifndef RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_FAMILY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_FAMILY_H_

#include "server/model/families/family_descriptor.h"

namespace relserve {

// T5, T5 v1.1 and mT5 encoders (model_type "t5", "mt5"): T5EncoderModel, and the encoder of
// T5Model / T5ForConditionalGeneration, whose decoder is ignored. Creates "t5" (ReLU
// feed-forward, tied embeddings) and "t5-v1.1" (gated-GELU, untied).
const FamilyDescriptor& T5Family();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_FAMILY_H_
