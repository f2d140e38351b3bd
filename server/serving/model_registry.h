#ifndef RELSERVE_SERVER_SERVING_MODEL_REGISTRY_H_
#define RELSERVE_SERVER_SERVING_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/inference_backend.h"
#include "server/batching/model_batcher.h"

namespace relserve {

class Tokenizer;

// A model as the RPC layer sees it: its backend, tokenizer and batcher. Owned elsewhere
// (the server binary); they outlive the service.
struct ServedModel {
  std::string name;
  InferenceBackend* backend = nullptr;
  const Tokenizer* tokenizer = nullptr;  // null: token-id inputs only
  ModelBatcher* batcher = nullptr;
  int max_length = 0;                    // longest accepted sequence
  // Other names requests may use (a Hub model's "org/repo" and "repo"); an alias two models
  // share names neither.
  std::vector<std::string> aliases;
  std::string model_id;  // what --model gave: a Hub id or a directory (TEI's /info model_id)
  // Where its copies run, comma-separated ("cuda:0,cuda:1"); empty: the backend's own device.
  std::string devices;
};

class ModelRegistry {
 public:
  // The first model added is the default one (used when a request names none).
  void Add(ServedModel model);
  // By name, else by alias. NOT_FOUND naming the model and listing those served, or the
  // models an ambiguous alias could mean.
  absl::StatusOr<const ServedModel*> Find(const std::string& name) const;
  std::vector<const ServedModel*> All() const;
  const std::string& default_model() const { return default_; }

 private:
  std::map<std::string, ServedModel> models_;
  std::map<std::string, std::vector<std::string>> aliases_;  // alias -> the models it names
  std::vector<std::string> order_;
  std::string default_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_MODEL_REGISTRY_H_
