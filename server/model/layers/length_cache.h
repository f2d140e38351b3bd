#ifndef RELSERVE_SERVER_MODEL_LAYERS_LENGTH_CACHE_H_
#define RELSERVE_SERVER_MODEL_LAYERS_LENGTH_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace relserve {

// What a model builds once per sequence length and every forward of that length reads
// (relative-position indices, position-bias tables): immutable values shared between the
// threads that run the model. A value is built outside the lock; when two threads build the
// same length at once, both get the one stored first.
template <typename T>
class LengthCache {
 public:
  // The value for `length`, from make() (a std::shared_ptr<T> or <const T>) the first time.
  template <typename Make>
  std::shared_ptr<const T> Get(int64_t length, Make&& make) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = values_.find(length);
      if (it != values_.end()) return it->second;
    }
    std::shared_ptr<const T> value = make();
    std::lock_guard<std::mutex> lock(mu_);
    return values_.emplace(length, std::move(value)).first->second;
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::shared_ptr<const T>> values_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_LENGTH_CACHE_H_
