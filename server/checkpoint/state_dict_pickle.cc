#include "server/checkpoint/state_dict_pickle.h"

#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/quote.h"
#include "server/util/status_macros.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

// Opcodes, with the names Python's pickletools gives them.
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kBinFloat = 'G',
  kEmptyList = ']',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyDict = '}',
  kEmptyTuple = ')',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// Opcodes a state dict never needs, named so that a refusal says what the file tried.
const char* RefusedOpcodeName(uint8_t op) {
  switch (op) {
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'P': return "PERSID";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'g': return "GET";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8b: return "LONG4";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a str";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kGlobal: return "a global";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "a value";
}

// A value on the stack or in the memo. Strings, containers, globals and tensors live in the
// machine's arenas and are referred to by index: copying a value (BINGET) costs nothing whatever
// it refers to, and containers that hold themselves are no trouble to free.
struct Value {
  Kind kind = Kind::kNone;
  int64_t number = 0;  // kBool, kInt
  double real = 0;     // kFloat
  size_t ref = 0;      // index into the arena of its kind
};

struct Object {
  std::vector<Value> items;  // a dict's keys and values alternate
  bool ordered = false;      // a dict that collections.OrderedDict() made
};

enum class Callable : uint8_t { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kStorageType };

struct Global {
  Callable callable;
  StDType dtype;  // kStorageType
  std::string name;
};

struct TensorValue {
  size_t storage;
  int64_t offset;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

constexpr char kAllowedGlobals[] =
    "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the "
    "torch.*Storage types";

// torch.<name> storage types and the elements they hold.
bool StorageDType(std::string_view name, StDType* dtype) {
  static const std::pair<const char*, StDType> kTypes[] = {
      {"FloatStorage", StDType::kF32}, {"HalfStorage", StDType::kF16},  {"BFloat16Storage", StDType::kBF16},
      {"DoubleStorage", StDType::kF64}, {"LongStorage", StDType::kI64}, {"IntStorage", StDType::kI32},
      {"ShortStorage", StDType::kI16}, {"CharStorage", StDType::kI8},   {"ByteStorage", StDType::kU8},
      {"BoolStorage", StDType::kBool},
  };
  for (const auto& [type, d] : kTypes) {
    if (name == type) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

class Machine {
 public:
  Machine(std::string_view pickle, const std::string& label)
      : p_(reinterpret_cast<const uint8_t*>(pickle.data())), size_(pickle.size()), label_(label) {}

  absl::StatusOr<PickledStateDict> Run() {
    while (true) {
      op_at_ = at_;
      const uint8_t* op;
      if (!Take(1, &op)) return Truncated();
      if (*op == kStop) break;
      absl::Status status = Step(*op);
      if (!status.ok()) return status;
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      return Invalid(absl::StrCat("STOP leaves ", stack_.size(), " values and ", marks_.size(),
                                  " marks on the stack, not one value"));
    }
    return Finish(stack_.back());
  }

 private:
  absl::Status Invalid(const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": data.pkl byte ", op_at_, ": ", problem));
  }
  absl::Status Truncated() const {
    return absl::DataLossError(
        absl::StrCat(label_, ": data.pkl ends at byte ", size_, " before its STOP opcode"));
  }

  bool Take(size_t n, const uint8_t** out) {
    if (n > size_ - at_) return false;
    *out = p_ + at_;
    at_ += n;
    return true;
  }
  // An n-byte little-endian unsigned argument (n <= 8).
  absl::StatusOr<uint64_t> Unsigned(size_t n) {
    const uint8_t* b;
    if (!Take(n, &b)) return Truncated();
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return v;
  }
  absl::StatusOr<std::string_view> Bytes(uint64_t n) {
    const uint8_t* b;
    if (n > size_ - at_ || !Take(static_cast<size_t>(n), &b)) return Truncated();
    return std::string_view(reinterpret_cast<const char*>(b), static_cast<size_t>(n));
  }
  // GLOBAL's arguments: text up to a newline, which is dropped.
  absl::StatusOr<std::string_view> Line() {
    const void* nl = std::memchr(p_ + at_, '\n', size_ - at_);
    if (nl == nullptr) return Truncated();
    const size_t n = static_cast<const uint8_t*>(nl) - (p_ + at_);
    std::string_view line(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n + 1;
    return line;
  }

  void Push(Value v) { stack_.push_back(v); }
  absl::StatusOr<Value> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return Invalid("an opcode needs a value and the stack (above the last MARK) is empty");
    }
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<std::vector<Value>> PopToMark() {
    if (marks_.empty()) return Invalid("an opcode needs a MARK and there is none");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  Value String(std::string_view s) {
    strings_.emplace_back(s);
    return Value{Kind::kString, 0, 0, strings_.size() - 1};
  }
  Value NewObject(Kind kind, std::vector<Value> items, bool ordered = false) {
    objects_.push_back(Object{std::move(items), ordered});
    return Value{kind, 0, 0, objects_.size() - 1};
  }
  Value Int(int64_t v, Kind kind = Kind::kInt) { return Value{kind, v, 0, 0}; }

  absl::Status PushGlobal(std::string_view module, std::string_view name) {
    const std::string full = std::string(module) + "." + std::string(name);
    Global g{Callable::kOrderedDict, StDType::kF32, full};
    if (module == "collections" && name == "OrderedDict") {
      g.callable = Callable::kOrderedDict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      g.callable = Callable::kRebuildTensorV2;
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      g.callable = Callable::kRebuildParameter;
    } else if (module == "torch" && StorageDType(name, &g.dtype)) {
      g.callable = Callable::kStorageType;
    } else {
      std::string why = "loading a checkpoint never runs code, and a state dict needs only ";
      absl::StrAppend(&why, kAllowedGlobals,
                      "; this file holds other objects (a pickled model, training state, a tensor type "
                      "relserve does not read) or was made to run code when unpickled");
      return Invalid(absl::StrCat("refused global ", Quote(full, 128), ": ", why));
    }
    globals_.push_back(std::move(g));
    Push(Value{Kind::kGlobal, 0, 0, globals_.size() - 1});
    return absl::OkStatus();
  }

  const std::string& StringOf(const Value& v) const { return strings_[v.ref]; }
  Object& ObjectOf(const Value& v) { return objects_[v.ref]; }
  bool IsEmptyDict(const Value& v) const { return v.kind == Kind::kDict && objects_[v.ref].items.empty(); }

  // ('storage', torch.<Type>Storage, key, location, numel), as torch.save's persistent_id makes it.
  absl::Status PersistentLoad() {
    ASSIGN_OR_RETURN(Value pid, Pop());
    const auto bad = [&](const std::string& what) {
      return Invalid(absl::StrCat("BINPERSID: ", what,
                                  "; a storage's persistent id is ('storage', torch.<Type>Storage, key, location, "
                                  "element count)"));
    };
    if (pid.kind != Kind::kTuple) return bad(absl::StrCat("the id is ", KindName(pid.kind)));
    if (ObjectOf(pid).items.size() != 5) return bad(absl::StrCat("the id has ", ObjectOf(pid).items.size(), " fields"));
    const std::vector<Value> f = ObjectOf(pid).items;  // a copy: new objects may move the arena
    if (f[0].kind != Kind::kString || StringOf(f[0]) != "storage") return bad("the first field is not 'storage'");
    if (f[1].kind != Kind::kGlobal || globals_[f[1].ref].callable != Callable::kStorageType) {
      return bad("the second field is not a storage type");
    }
    if (f[2].kind != Kind::kString || f[3].kind != Kind::kString) return bad("the key or location is not a str");
    if (f[4].kind != Kind::kInt || f[4].number < 0) return bad("the element count is not an int >= 0");
    const StDType dtype = globals_[f[1].ref].dtype;
    const std::string& key = StringOf(f[2]);
    auto [it, inserted] = storage_by_key_.emplace(key, result_.storages.size());
    if (inserted) {
      result_.storages.push_back(PickledStorage{key, dtype, f[4].number, StringOf(f[3])});
    } else {
      const PickledStorage& s = result_.storages[it->second];
      if (s.dtype != dtype || s.numel != f[4].number) {
        return Invalid(absl::StrCat("storage ", Quote(key), " is declared twice, as ", std::string(StDTypeName(s.dtype)), " x ",
                                    s.numel, " and as ", std::string(StDTypeName(dtype)), " x ", f[4].number));
      }
    }
    Push(Value{Kind::kStorage, 0, 0, it->second});
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int64_t>> Dims(const Value& v, const char* what) {
    if (v.kind != Kind::kTuple) return Invalid(absl::StrCat("_rebuild_tensor_v2: ", what, " is ", KindName(v.kind)));
    const std::vector<Value>& items = ObjectOf(v).items;
    if (items.size() > kMaxPickledTensorDims) {
      return Invalid(absl::StrCat("_rebuild_tensor_v2: ", what, " has ", items.size(), " dimensions, more than ",
                                  kMaxPickledTensorDims));
    }
    std::vector<int64_t> dims;
    for (const Value& d : items) {
      if (d.kind != Kind::kInt || d.number < 0) {
        return Invalid(absl::StrCat("_rebuild_tensor_v2: ", what, " holds ",
                                    d.kind == Kind::kInt ? "a negative int" : KindName(d.kind)));
      }
      dims.push_back(d.number);
    }
    return dims;
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  // backward_hooks[, metadata]).
  absl::StatusOr<Value> RebuildTensor(const std::vector<Value>& a) {
    if (a.size() != 6 && a.size() != 7) {
      return Invalid(absl::StrCat("_rebuild_tensor_v2 takes 6 or 7 arguments, not ", a.size()));
    }
    if (a[0].kind != Kind::kStorage) return Invalid(absl::StrCat("_rebuild_tensor_v2: the storage is ", KindName(a[0].kind)));
    if (a[1].kind != Kind::kInt || a[1].number < 0) return Invalid("_rebuild_tensor_v2: the offset is not an int >= 0");
    TensorValue t{a[0].ref, a[1].number, {}, {}};
    ASSIGN_OR_RETURN(t.shape, Dims(a[2], "the size"));
    ASSIGN_OR_RETURN(t.stride, Dims(a[3], "the stride"));
    if (t.shape.size() != t.stride.size()) {
      return Invalid(absl::StrCat("_rebuild_tensor_v2: ", t.shape.size(), " sizes but ", t.stride.size(), " strides"));
    }
    if (a[4].kind != Kind::kBool) return Invalid("_rebuild_tensor_v2: requires_grad is not a bool");
    if (!IsEmptyDict(a[5])) return Invalid("_rebuild_tensor_v2: the tensor has backward hooks, which a checkpoint cannot hold");
    if (a.size() == 7 && a[6].kind != Kind::kNone && !IsEmptyDict(a[6])) {
      return Invalid("_rebuild_tensor_v2: the tensor carries metadata (a tensor subclass or flags), which relserve does not read");
    }
    // The view must stay inside its storage: offset + sum((size - 1) * stride) < numel.
    const PickledStorage& storage = result_.storages[t.storage];
    int64_t numel = 1;
    int64_t last = t.offset;
    bool overflow = false;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      overflow = overflow || __builtin_mul_overflow(numel, t.shape[i], &numel);
      int64_t span = 0;
      if (t.shape[i] > 0) overflow = overflow || __builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &span);
      overflow = overflow || __builtin_add_overflow(last, span, &last);
    }
    if (overflow) return Invalid("_rebuild_tensor_v2: the size, stride and offset overflow 64 bits");
    const bool inside = numel == 0 ? t.offset <= storage.numel : last < storage.numel;
    if (!inside) {
      return Invalid(absl::StrCat("_rebuild_tensor_v2: a view reaching element ", numel == 0 ? t.offset : last,
                                  " of storage ", Quote(storage.key), ", which holds ", storage.numel, " elements"));
    }
    tensors_.push_back(std::move(t));
    return Value{Kind::kTensor, 0, 0, tensors_.size() - 1};
  }

  absl::Status Reduce() {
    ASSIGN_OR_RETURN(Value args, Pop());
    ASSIGN_OR_RETURN(Value callable, Pop());
    if (callable.kind != Kind::kGlobal) return Invalid(absl::StrCat("REDUCE calls ", KindName(callable.kind)));
    const Global& g = globals_[callable.ref];
    if (args.kind != Kind::kTuple) return Invalid(absl::StrCat("REDUCE of ", g.name, " with ", KindName(args.kind), " for arguments"));
    // Every call takes a handful of arguments: check the count before copying them, so that
    // calls on one huge memoized tuple cannot cost time quadratic in the input.
    const size_t count = ObjectOf(args).items.size();
    if (count > 7) return Invalid(absl::StrCat("REDUCE of ", g.name, " with ", count, " arguments"));
    const std::vector<Value> a = ObjectOf(args).items;
    switch (g.callable) {
      case Callable::kOrderedDict:
        if (!a.empty()) return Invalid("REDUCE of collections.OrderedDict with arguments");
        Push(NewObject(Kind::kDict, {}, /*ordered=*/true));
        return absl::OkStatus();
      case Callable::kRebuildTensorV2: {
        ASSIGN_OR_RETURN(Value tensor, RebuildTensor(a));
        Push(tensor);
        return absl::OkStatus();
      }
      case Callable::kRebuildParameter:
        // torch._utils._rebuild_parameter(data, requires_grad, backward_hooks): the data is the weight.
        if (a.size() != 3 || a[0].kind != Kind::kTensor || a[1].kind != Kind::kBool || !IsEmptyDict(a[2])) {
          return Invalid("_rebuild_parameter takes a tensor, a bool and no backward hooks");
        }
        Push(a[0]);
        return absl::OkStatus();
      case Callable::kStorageType:
        break;
    }
    return Invalid(absl::StrCat("REDUCE of ", g.name, ", which only names a persistent id's storage type"));
  }

  absl::Status SetItems(const Value& dict, const std::vector<Value>& items) {
    if (dict.kind != Kind::kDict) return Invalid(absl::StrCat("SETITEM(S) on ", KindName(dict.kind)));
    if (items.size() % 2 != 0) return Invalid("SETITEMS with a key and no value");
    std::vector<Value>& to = ObjectOf(dict).items;
    to.insert(to.end(), items.begin(), items.end());
    return absl::OkStatus();
  }
  absl::Status Appends(const Value& list, const std::vector<Value>& items) {
    if (list.kind != Kind::kList) return Invalid(absl::StrCat("APPEND(S) on ", KindName(list.kind)));
    std::vector<Value>& to = ObjectOf(list).items;
    to.insert(to.end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  absl::Status Memo(uint64_t index) {
    if (stack_.empty()) return Invalid("a memo store with an empty stack");
    memo_[index] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Recall(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Invalid(absl::StrCat("memo slot ", index, " is empty"));
    Push(it->second);
    return absl::OkStatus();
  }

  absl::Status Step(uint8_t op) {
    switch (op) {
      case kProto: {
        ASSIGN_OR_RETURN(uint64_t version, Unsigned(1));
        if (version < 2 || version > 5) return Invalid(absl::StrCat("pickle protocol ", version, "; torch.save writes 2"));
        return absl::OkStatus();
      }
      case kFrame:  // protocol 4's framing: a length prefix, nothing to interpret
        return Unsigned(8).status();
      case kMark:
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case kNone:
        Push(Value{});
        return absl::OkStatus();
      case kNewTrue:
      case kNewFalse:
        Push(Int(op == kNewTrue ? 1 : 0, Kind::kBool));
        return absl::OkStatus();
      case kBinInt1:
      case kBinInt2: {
        ASSIGN_OR_RETURN(uint64_t v, Unsigned(op == kBinInt1 ? 1 : 2));
        Push(Int(static_cast<int64_t>(v)));
        return absl::OkStatus();
      }
      case kBinInt: {
        ASSIGN_OR_RETURN(uint64_t v, Unsigned(4));
        Push(Int(static_cast<int32_t>(static_cast<uint32_t>(v))));
        return absl::OkStatus();
      }
      case kLong1: {
        ASSIGN_OR_RETURN(uint64_t n, Unsigned(1));
        if (n > 8) return Invalid(absl::StrCat("LONG1 of ", n, " bytes, beyond 64 bits"));
        ASSIGN_OR_RETURN(uint64_t v, Unsigned(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        Push(Int(static_cast<int64_t>(v)));
        return absl::OkStatus();
      }
      case kBinFloat: {
        ASSIGN_OR_RETURN(std::string_view b, Bytes(8));
        uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);  // big-endian
        Value v{Kind::kFloat, 0, 0, 0};
        std::memcpy(&v.real, &bits, sizeof(bits));
        Push(v);
        return absl::OkStatus();
      }
      case kShortBinUnicode:
      case kBinUnicode:
      case kBinUnicode8: {
        ASSIGN_OR_RETURN(uint64_t n, Unsigned(op == kShortBinUnicode ? 1 : op == kBinUnicode ? 4 : 8));
        ASSIGN_OR_RETURN(std::string_view s, Bytes(n));
        Push(String(s));
        return absl::OkStatus();
      }
      case kEmptyTuple:
        Push(NewObject(Kind::kTuple, {}));
        return absl::OkStatus();
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = op - kTuple1 + 1;
        std::vector<Value> items(n);
        for (size_t i = n; i-- > 0;) {
          ASSIGN_OR_RETURN(items[i], Pop());
        }
        Push(NewObject(Kind::kTuple, std::move(items)));
        return absl::OkStatus();
      }
      case kTuple:
      case kList: {
        ASSIGN_OR_RETURN(std::vector<Value> items, PopToMark());
        Push(NewObject(op == kTuple ? Kind::kTuple : Kind::kList, std::move(items)));
        return absl::OkStatus();
      }
      case kEmptyList:
        Push(NewObject(Kind::kList, {}));
        return absl::OkStatus();
      case kEmptyDict:
        Push(NewObject(Kind::kDict, {}));
        return absl::OkStatus();
      case kDict: {
        ASSIGN_OR_RETURN(std::vector<Value> items, PopToMark());
        Value dict = NewObject(Kind::kDict, {});
        RETURN_IF_ERROR(SetItems(dict, items));
        Push(dict);
        return absl::OkStatus();
      }
      case kSetItem: {
        ASSIGN_OR_RETURN(Value value, Pop());
        ASSIGN_OR_RETURN(Value key, Pop());
        ASSIGN_OR_RETURN(Value dict, Pop());
        RETURN_IF_ERROR(SetItems(dict, {key, value}));
        Push(dict);
        return absl::OkStatus();
      }
      case kSetItems: {
        ASSIGN_OR_RETURN(std::vector<Value> items, PopToMark());
        ASSIGN_OR_RETURN(Value dict, Pop());
        RETURN_IF_ERROR(SetItems(dict, items));
        Push(dict);
        return absl::OkStatus();
      }
      case kAppend: {
        ASSIGN_OR_RETURN(Value value, Pop());
        ASSIGN_OR_RETURN(Value list, Pop());
        RETURN_IF_ERROR(Appends(list, {value}));
        Push(list);
        return absl::OkStatus();
      }
      case kAppends: {
        ASSIGN_OR_RETURN(std::vector<Value> items, PopToMark());
        ASSIGN_OR_RETURN(Value list, Pop());
        RETURN_IF_ERROR(Appends(list, items));
        Push(list);
        return absl::OkStatus();
      }
      case kBinPut:
      case kLongBinPut: {
        ASSIGN_OR_RETURN(uint64_t index, Unsigned(op == kBinPut ? 1 : 4));
        return Memo(index);
      }
      case kMemoize:
        return Memo(memo_.size());
      case kBinGet:
      case kLongBinGet: {
        ASSIGN_OR_RETURN(uint64_t index, Unsigned(op == kBinGet ? 1 : 4));
        return Recall(index);
      }
      case kGlobal: {
        ASSIGN_OR_RETURN(std::string_view module, Line());
        ASSIGN_OR_RETURN(std::string_view name, Line());
        return PushGlobal(module, name);
      }
      case kStackGlobal: {
        ASSIGN_OR_RETURN(Value name, Pop());
        ASSIGN_OR_RETURN(Value module, Pop());
        if (module.kind != Kind::kString || name.kind != Kind::kString) return Invalid("STACK_GLOBAL of values that are not str");
        return PushGlobal(StringOf(module), StringOf(name));
      }
      case kBinPersId:
        return PersistentLoad();
      case kReduce:
        return Reduce();
      case kBuild: {
        // Attributes set on the object below: only an OrderedDict's, such as state_dict()'s
        // _metadata (per-module versions), which hold no weights and are dropped.
        ASSIGN_OR_RETURN(Value state, Pop());
        ASSIGN_OR_RETURN(Value object, Pop());
        if (object.kind != Kind::kDict || !ObjectOf(object).ordered || state.kind != Kind::kDict) {
          const char* target = object.kind != Kind::kDict  ? KindName(object.kind)
                               : ObjectOf(object).ordered ? "an OrderedDict"
                                                          : "a plain dict";
          return Invalid(absl::StrCat("BUILD sets ", KindName(state.kind), " of state on ", target,
                                      "; only an OrderedDict's attributes (a dict) are accepted"));
        }
        Push(object);
        return absl::OkStatus();
      }
      default:
        break;
    }
    const char* name = RefusedOpcodeName(op);
    if (name != nullptr) {
      return Invalid(absl::StrCat("opcode ", name, " (0x", absl::Hex(op, absl::kZeroPad2),
                                  ") is not one a state dict needs"));
    }
    return Invalid(absl::StrCat("unknown opcode 0x", absl::Hex(op, absl::kZeroPad2)));
  }

  absl::StatusOr<PickledStateDict> Finish(const Value& root) {
    op_at_ = size_;
    if (root.kind != Kind::kDict) {
      return Invalid(absl::StrCat("the pickle holds ", KindName(root.kind), ", not a state dict (a dict of tensors)"));
    }
    const std::vector<Value>& items = ObjectOf(root).items;
    std::map<std::string_view, size_t> seen;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& key = items[i];
      const Value& value = items[i + 1];
      if (key.kind != Kind::kString) return Invalid(absl::StrCat("the state dict has a key that is ", KindName(key.kind)));
      const std::string& name = StringOf(key);
      // Not quoted: the bytes that are not UTF-8 would travel in the message.
      RETURN_IF_ERROR(ValidateUtf8(name, absl::StrCat(label_, ": the name of state dict entry ", i / 2)));
      if (value.kind != Kind::kTensor) {
        return Invalid(absl::StrCat("the state dict's entry ", Quote(name), " is ", KindName(value.kind),
                                    ", not a tensor"));
      }
      if (!seen.emplace(name, i).second) return Invalid(absl::StrCat("the state dict holds ", Quote(name), " twice"));
      const TensorValue& t = tensors_[value.ref];
      result_.tensors.push_back(PickledTensor{name, t.storage, t.offset, t.shape, t.stride});
    }
    return std::move(result_);
  }

  const uint8_t* p_;
  size_t size_;
  const std::string& label_;
  size_t at_ = 0;
  size_t op_at_ = 0;  // where the opcode being run starts, for messages

  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::vector<std::string> strings_;
  std::vector<Object> objects_;
  std::vector<Global> globals_;
  std::vector<TensorValue> tensors_;
  std::map<std::string, size_t> storage_by_key_;
  PickledStateDict result_;
};

}  // namespace

absl::StatusOr<PickledStateDict> ReadStateDictPickle(std::string_view pickle, const std::string& label) {
  return Machine(pickle, label).Run();
}

}  // namespace relserve
