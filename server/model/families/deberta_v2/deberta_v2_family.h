#ifndef RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_FAMILY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_FAMILY_H_

#include "server/model/families/family_descriptor.h"

namespace relserve {

// DeBERTa-v2/v3 and mDeBERTa (model_type "deberta-v2"): DebertaV2Model,
// DebertaV2ForSequenceClassification and DebertaV2ForMaskedLM (the backbone, and the masked-LM
// head where the checkpoint holds it). Creates
// "deberta-v3" (relative positions only, shared attention key, log buckets) and "deberta-v2"
// (the same with the convolution layer of microsoft/deberta-v2-xlarge).
const FamilyDescriptor& DebertaV2Family();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_FAMILY_H_
