#ifndef RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_FAMILY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_FAMILY_H_

#include "server/model/families/family_descriptor.h"

namespace relserve {

// MPNet (model_type "mpnet"): MPNetModel, MPNetForSequenceClassification and MPNetForMaskedLM
// (the backbone, and lm_head where the checkpoint holds it). WordPiece tokenizer (vocab.txt,
// <s> a </s></s> b </s>); no token types. The longest input is max_position_embeddings - 2
// (positions start after padding_idx 1). Creates "mpnet" (all-mpnet-base-v2's layout).
const FamilyDescriptor& MpnetFamily();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_FAMILY_H_
