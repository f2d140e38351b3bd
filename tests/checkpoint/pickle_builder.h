#ifndef RELSERVE_TESTS_CHECKPOINT_PICKLE_BUILDER_H_
#define RELSERVE_TESTS_CHECKPOINT_PICKLE_BUILDER_H_

// Pickles written opcode by opcode, the way Python's pickle module (protocol 2) writes a state
// dict, so that tests can build both what torch.save writes and what an attacker would.

#include <cstdint>
#include <string>
#include <vector>

namespace relserve::testing {

class PickleBuilder {
 public:
  PickleBuilder& Raw(const std::string& bytes) {
    out_ += bytes;
    return *this;
  }
  PickleBuilder& Op(uint8_t op) {
    out_.push_back(static_cast<char>(op));
    return *this;
  }
  PickleBuilder& Proto(int version = 2) { return Op(0x80).Op(static_cast<uint8_t>(version)); }
  PickleBuilder& Stop() { return Op('.'); }
  PickleBuilder& Mark() { return Op('('); }
  PickleBuilder& Tuple() { return Op('t'); }
  PickleBuilder& EmptyTuple() { return Op(')'); }
  PickleBuilder& EmptyDict() { return Op('}'); }
  PickleBuilder& SetItem() { return Op('s'); }
  PickleBuilder& SetItems() { return Op('u'); }
  PickleBuilder& Reduce() { return Op('R'); }
  PickleBuilder& Build() { return Op('b'); }
  PickleBuilder& BinPersId() { return Op('Q'); }
  PickleBuilder& False() { return Op(0x89); }
  PickleBuilder& None() { return Op('N'); }
  PickleBuilder& BinPut(uint8_t i) { return Op('q').Op(i); }
  PickleBuilder& BinGet(uint8_t i) { return Op('h').Op(i); }
  PickleBuilder& Global(const std::string& module, const std::string& name) {
    return Op('c').Raw(module + "\n" + name + "\n");
  }
  PickleBuilder& Str(const std::string& s) {  // BINUNICODE
    Op('X');
    Le(s.size(), 4);
    return Raw(s);
  }
  // The shortest integer opcode, as Python chooses it.
  PickleBuilder& Int(int64_t v) {
    if (v >= 0 && v < 256) return Op('K').Op(static_cast<uint8_t>(v));
    if (v >= 0 && v < 65536) {
      Op('M');
      Le(static_cast<uint64_t>(v), 2);
      return *this;
    }
    if (v >= INT32_MIN && v <= INT32_MAX) {
      Op('J');
      Le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
      return *this;
    }
    Op(0x8a).Op(8);
    Le(static_cast<uint64_t>(v), 8);
    return *this;
  }
  PickleBuilder& Ints(const std::vector<int64_t>& values) {  // a tuple
    Mark();
    for (int64_t v : values) Int(v);
    return Tuple();
  }
  // collections.OrderedDict(): the empty hooks of a tensor, or a state dict about to be filled.
  PickleBuilder& OrderedDict() { return Global("collections", "OrderedDict").EmptyTuple().Reduce(); }
  // The persistent id torch.save gives a storage.
  PickleBuilder& StoragePid(const std::string& key, const std::string& type, int64_t numel,
                            const std::string& location = "cpu") {
    Mark().Str("storage").Global("torch", type).Str(key).Str(location).Int(numel).Tuple();
    return BinPersId();
  }
  // torch._utils._rebuild_tensor_v2((storage), offset, size, stride, False, OrderedDict()).
  PickleBuilder& Tensor(const std::string& key, const std::string& type, int64_t numel, int64_t offset,
                        const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
    Global("torch._utils", "_rebuild_tensor_v2").Mark();
    StoragePid(key, type, numel).Int(offset).Ints(shape).Ints(stride).False().OrderedDict();
    return Tuple().Reduce();
  }

  const std::string& bytes() const { return out_; }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }

  std::string out_;
};

// One tensor of a state dict: a view of storage data/<key>.
struct TensorSpec {
  std::string name;
  std::string key;
  std::string type;  // "FloatStorage", ...
  int64_t numel;     // the storage's
  int64_t offset;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

// {name: tensor, ...} as a plain dict, as transformers' save_pretrained pickles it.
inline std::string StateDictPickle(const std::vector<TensorSpec>& tensors) {
  PickleBuilder p;
  p.Proto().EmptyDict().Mark();
  for (const TensorSpec& t : tensors) p.Str(t.name).Tensor(t.key, t.type, t.numel, t.offset, t.shape, t.stride);
  return p.SetItems().Stop().bytes();
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_CHECKPOINT_PICKLE_BUILDER_H_
