#ifndef RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_FAMILY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_FAMILY_H_

#include "server/model/families/family_descriptor.h"

namespace relserve {

// BERT, RoBERTa, XLM-RoBERTa and ELECTRA encoders (model_type "bert", "roberta",
// "xlm-roberta", "electra"): *Model, *ForSequenceClassification and *ForMaskedLM (the backbone,
// and the masked-LM head where the checkpoint holds it), and the backbone of *ForPreTraining
// checkpoints. Every position_embedding_type: absolute,
// relative_key, relative_key_query. Creates "bert", "roberta", "xlm-roberta" and "electra".
const FamilyDescriptor& BertFamily();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_FAMILY_H_
