#include "server/checkpoint/state_dict_pickle.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/pickle_builder.h"

namespace relserve {
namespace {

using ::relserve::testing::PickleBuilder;
using ::relserve::testing::StateDictPickle;
using ::relserve::testing::TensorSpec;

absl::StatusOr<PickledStateDict> Read(const std::string& pickle) { return ReadStateDictPickle(pickle, "test.bin"); }

void ExpectRefused(const std::string& pickle, const std::string& needle,
                   absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  auto dict = Read(pickle);
  ASSERT_FALSE(dict.ok()) << "accepted a pickle that should fail with: " << needle;
  EXPECT_EQ(dict.status().code(), code) << dict.status();
  EXPECT_NE(dict.status().message().find(needle), std::string::npos) << dict.status();
  EXPECT_NE(dict.status().message().find("test.bin"), std::string::npos) << dict.status();
}

// {"t": _rebuild_tensor_v2(<args>)} where `args` is everything between the MARK and TUPLE.
std::string OneTensorWithArgs(const std::function<void(PickleBuilder&)>& args) {
  PickleBuilder p;
  p.Proto().EmptyDict().Str("t").Global("torch._utils", "_rebuild_tensor_v2").Mark();
  args(p);
  return p.Tuple().Reduce().SetItem().Stop().bytes();
}

TEST(StateDictPickleTest, ReadsViewsOfSharedStorages) {
  auto dict = Read(StateDictPickle({
      {"whole", "0", "FloatStorage", 12, 0, {12}, {1}},
      {"slice", "0", "FloatStorage", 12, 2, {2, 3}, {3, 1}},
      {"transposed", "0", "FloatStorage", 12, 0, {4, 3}, {1, 4}},
      {"half", "1", "HalfStorage", 4, 0, {2, 2}, {2, 1}},
      {"scalar", "2", "BFloat16Storage", 1, 0, {}, {}},
  }));
  ASSERT_TRUE(dict.ok()) << dict.status();
  ASSERT_EQ(dict->storages.size(), 3u);
  EXPECT_EQ(dict->storages[0].key, "0");
  EXPECT_EQ(dict->storages[0].dtype, StDType::kF32);
  EXPECT_EQ(dict->storages[0].numel, 12);
  EXPECT_EQ(dict->storages[0].location, "cpu");
  EXPECT_EQ(dict->storages[1].dtype, StDType::kF16);
  EXPECT_EQ(dict->storages[2].dtype, StDType::kBF16);
  ASSERT_EQ(dict->tensors.size(), 5u);
  const PickledTensor& slice = dict->tensors[1];
  EXPECT_EQ(slice.name, "slice");
  EXPECT_EQ(slice.storage, 0u);
  EXPECT_EQ(slice.offset, 2);
  EXPECT_EQ(slice.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(slice.stride, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(dict->tensors[2].stride, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(dict->tensors[3].storage, 1u);
  EXPECT_TRUE(dict->tensors[4].shape.empty());
}

TEST(StateDictPickleTest, MapsEveryStorageType) {
  const std::pair<const char*, StDType> types[] = {
      {"FloatStorage", StDType::kF32}, {"HalfStorage", StDType::kF16},  {"BFloat16Storage", StDType::kBF16},
      {"DoubleStorage", StDType::kF64}, {"LongStorage", StDType::kI64}, {"IntStorage", StDType::kI32},
      {"ShortStorage", StDType::kI16}, {"CharStorage", StDType::kI8},   {"ByteStorage", StDType::kU8},
      {"BoolStorage", StDType::kBool},
  };
  for (const auto& [type, dtype] : types) {
    SCOPED_TRACE(type);
    auto dict = Read(StateDictPickle({{"x", "k", type, 3, 0, {3}, {1}}}));
    ASSERT_TRUE(dict.ok()) << dict.status();
    EXPECT_EQ(dict->storages[0].dtype, dtype);
  }
  ExpectRefused(StateDictPickle({{"x", "k", "ComplexFloatStorage", 3, 0, {3}, {1}}}),
                "refused global \"torch.ComplexFloatStorage\"");
}

// What Module.state_dict() gives torch.save: an OrderedDict built by REDUCE, filled by SETITEMS,
// then BUILD with its _metadata attribute; a Parameter through _rebuild_parameter; the memo.
TEST(StateDictPickleTest, ReadsAnOrderedDictWithMetadataAndParameters) {
  PickleBuilder p;
  p.Proto().Global("collections", "OrderedDict").BinPut(0).EmptyTuple().Reduce().BinPut(1).Mark();
  p.Str("w").Global("torch._utils", "_rebuild_tensor_v2").BinPut(2).Mark();
  p.StoragePid("0", "FloatStorage", 4).Int(0).Ints({2, 2}).Ints({2, 1}).False();
  p.BinGet(0).EmptyTuple().Reduce().Tuple().Reduce();
  p.Str("p").Global("torch._utils", "_rebuild_parameter");
  p.BinGet(2).Mark().StoragePid("1", "FloatStorage", 2, "cuda:0").Int(0).Ints({2}).Ints({1}).False();
  p.BinGet(0).EmptyTuple().Reduce().Tuple().Reduce();
  p.Op(0x88).BinGet(0).EmptyTuple().Reduce().Op(0x87).Reduce();  // (tensor, True, OrderedDict())
  p.SetItems();
  p.EmptyDict().Str("_metadata").BinGet(0).EmptyTuple().Reduce();
  p.Str("").EmptyDict().Str("version").Int(1).SetItem().SetItem().SetItem().Build().Stop();
  auto dict = Read(p.bytes());
  ASSERT_TRUE(dict.ok()) << dict.status();
  ASSERT_EQ(dict->tensors.size(), 2u);
  EXPECT_EQ(dict->tensors[0].name, "w");
  EXPECT_EQ(dict->tensors[1].name, "p");
  EXPECT_EQ(dict->tensors[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(dict->storages[1].location, "cuda:0");
}

TEST(StateDictPickleTest, AcceptsTheMetadataArgumentWhenEmpty) {
  for (bool as_none : {true, false}) {
    auto dict = Read(OneTensorWithArgs([&](PickleBuilder& p) {
      p.StoragePid("0", "FloatStorage", 1).Int(0).Ints({1}).Ints({1}).False().OrderedDict();
      if (as_none) {
        p.None();
      } else {
        p.EmptyDict();
      }
    }));
    EXPECT_TRUE(dict.ok()) << dict.status();
  }
}

TEST(StateDictPickleTest, ReadsWideIntegers) {
  const int64_t big = int64_t{1} << 40;
  auto dict = Read(StateDictPickle({{"x", "0", "ByteStorage", big, big - 3, {3}, {1}}}));
  ASSERT_TRUE(dict.ok()) << dict.status();
  EXPECT_EQ(dict->storages[0].numel, big);
  EXPECT_EQ(dict->tensors[0].offset, big - 3);
  // LONG1 with fewer than 8 bytes is sign-extended: -2 in one byte is a negative offset.
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) {
                  p.StoragePid("0", "FloatStorage", 4).Op(0x8a).Op(1).Op(0xFE).Ints({1}).Ints({1}).False().OrderedDict();
                }),
                "the offset is not an int >= 0");
  ExpectRefused(PickleBuilder().Proto().Op(0x8a).Op(9).Raw(std::string(9, '\1')).Stop().bytes(), "beyond 64 bits");
}

// The globals and calls that make a pickle run code, and the objects a state dict does not hold.
TEST(StateDictPickleTest, RefusesEveryOtherGlobal) {
  ExpectRefused(PickleBuilder().Proto().Global("os", "system").Str("touch pwned").Op(0x85).Reduce().Stop().bytes(),
                "refused global \"os.system\"");
  ExpectRefused(PickleBuilder().Proto(4).Str("builtins").Str("eval").Op(0x93).Stop().bytes(),
                "refused global \"builtins.eval\"");
  ExpectRefused(PickleBuilder().Proto().Global("__main__", "Model").EmptyTuple().Reduce().Stop().bytes(),
                "refused global \"__main__.Model\"");
  ExpectRefused(PickleBuilder().Proto().Global("torch._utils", "_rebuild_qtensor").Stop().bytes(),
                "refused global \"torch._utils._rebuild_qtensor\"");
  ExpectRefused(PickleBuilder().Proto().Global("torch.jit._pickle", "restore_type_tag").Stop().bytes(),
                "refused global \"torch.jit._pickle.restore_type_tag\"");
  // Hidden in a tensor's arguments, and where the hooks go.
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) {
                  p.StoragePid("0", "FloatStorage", 1).Int(0).Ints({1}).Ints({1}).False();
                  p.Global("subprocess", "Popen").Str("id").Op(0x85).Reduce();
                }),
                "refused global \"subprocess.Popen\"");
  // The message says where: the GLOBAL opcode right after PROTO.
  ExpectRefused(PickleBuilder().Proto().Global("os", "system").Stop().bytes(), "data.pkl byte 2:");
}

TEST(StateDictPickleTest, RefusesCallsAndObjectsOutsideAStateDict) {
  ExpectRefused(PickleBuilder().Proto().EmptyTuple().EmptyTuple().Op(0x81).Stop().bytes(), "opcode NEWOBJ (0x81)");
  ExpectRefused(PickleBuilder().Proto().Mark().Raw("i__main__\nModel\n").Stop().bytes(), "opcode INST (0x69)");
  ExpectRefused(PickleBuilder().Proto().Raw("P0\n").Stop().bytes(), "opcode PERSID");
  ExpectRefused(PickleBuilder().Proto().Op(0xFF).Stop().bytes(), "unknown opcode 0xff");
  ExpectRefused(PickleBuilder().Proto().Global("torch", "FloatStorage").EmptyTuple().Reduce().Stop().bytes(),
                "REDUCE of torch.FloatStorage");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().EmptyTuple().Reduce().Stop().bytes(), "REDUCE calls a dict");
  ExpectRefused(PickleBuilder().Proto().OrderedDict().Str("x").Op(0x85).Build().Stop().bytes(),
                "BUILD sets a tuple of state on an OrderedDict");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().EmptyDict().Build().Stop().bytes(),
                "BUILD sets a dict of state on a plain dict");
  ExpectRefused(PickleBuilder().Proto().Global("collections", "OrderedDict").Str("x").Op(0x85).Reduce().Stop().bytes(),
                "REDUCE of collections.OrderedDict with arguments");
  // Nested objects: a checkpoint with the state dict inside, or other values beside tensors.
  PickleBuilder nested;
  nested.Proto().EmptyDict().Str("model").EmptyDict().Str("w");
  nested.Tensor("0", "FloatStorage", 1, 0, {1}, {1}).SetItem().SetItem().Stop();
  ExpectRefused(nested.bytes(), "entry \"model\" is a dict, not a tensor");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().Str("epoch").Int(3).SetItem().Stop().bytes(),
                "entry \"epoch\" is an int, not a tensor");
  ExpectRefused(PickleBuilder().Proto().Int(1).Stop().bytes(), "holds an int, not a state dict");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().Int(1).Int(2).SetItem().Stop().bytes(), "key that is an int");
}

TEST(StateDictPickleTest, RefusesBadTensorArguments) {
  auto tensor = [](int64_t numel, int64_t offset, std::vector<int64_t> shape, std::vector<int64_t> stride) {
    return StateDictPickle({{"t", "0", "FloatStorage", numel, offset, std::move(shape), std::move(stride)}});
  };
  ExpectRefused(tensor(12, 10, {4}, {1}), "a view reaching element 13 of storage \"0\", which holds 12 elements");
  ExpectRefused(tensor(12, 0, {4, 4}, {4, 1}), "reaching element 15");
  ExpectRefused(tensor(12, 13, {0}, {1}), "reaching element 13");
  EXPECT_TRUE(Read(tensor(12, 12, {0}, {1})).ok());  // an empty view at the very end
  EXPECT_TRUE(Read(tensor(3, 0, {4, 3}, {0, 1})).ok());  // expanded views pass here; the file reader decides
  const int64_t huge = int64_t{1} << 62;
  ExpectRefused(tensor(12, 0, {huge, 4}, {1, huge}), "overflow 64 bits");
  ExpectRefused(tensor(12, 0, {-1}, {1}), "the size holds a negative int");
  ExpectRefused(tensor(12, 0, {2, 2}, {1}), "2 sizes but 1 strides");
  ExpectRefused(tensor(1, 0, std::vector<int64_t>(65, 1), std::vector<int64_t>(65, 1)), "65 dimensions");
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) {
                  p.StoragePid("0", "FloatStorage", 1).Int(0).Ints({1}).Ints({1}).False();
                  p.OrderedDict().Str("hook").Int(1).SetItem();
                }),
                "backward hooks");
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) {
                  p.StoragePid("0", "FloatStorage", 1).Int(0).Ints({1}).Ints({1}).False().OrderedDict();
                  p.EmptyDict().Str("conj").Int(1).SetItem();
                }),
                "carries metadata");
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) { p.Int(0).Int(0).Ints({1}).Ints({1}).False().OrderedDict(); }),
                "the storage is an int");
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) {
                  p.StoragePid("0", "FloatStorage", 1).Int(0).Ints({1}).Ints({1}).Int(0).OrderedDict();
                }),
                "requires_grad is not a bool");
  ExpectRefused(OneTensorWithArgs([](PickleBuilder& p) { p.StoragePid("0", "FloatStorage", 1).Int(0); }),
                "takes 6 or 7 arguments, not 2");
}

TEST(StateDictPickleTest, RefusesBadPersistentIds) {
  ExpectRefused(PickleBuilder().Proto().Mark().Str("storage").Global("torch", "FloatStorage").Str("0").Str("cpu")
                    .Tuple().BinPersId().Stop().bytes(),
                "the id has 4 fields");
  ExpectRefused(PickleBuilder().Proto().Mark().Str("module").Global("torch", "FloatStorage").Str("0").Str("cpu")
                    .Int(1).Tuple().BinPersId().Stop().bytes(),
                "the first field is not 'storage'");
  ExpectRefused(PickleBuilder().Proto().Str("0").BinPersId().Stop().bytes(), "the id is a str");
  ExpectRefused(StateDictPickle({{"a", "0", "FloatStorage", 4, 0, {4}, {1}}, {"b", "0", "HalfStorage", 4, 0, {4}, {1}}}),
                "storage \"0\" is declared twice, as F32 x 4 and as F16 x 4");
}

TEST(StateDictPickleTest, RefusesMalformedPickles) {
  const std::string good = StateDictPickle({{"t", "0", "FloatStorage", 1, 0, {1}, {1}}});
  ExpectRefused(good.substr(0, good.size() - 1), "before its STOP opcode", absl::StatusCode::kDataLoss);
  ExpectRefused(good.substr(0, 8), "before its STOP opcode", absl::StatusCode::kDataLoss);
  ExpectRefused(PickleBuilder().Proto(1).Stop().bytes(), "pickle protocol 1");
  ExpectRefused(PickleBuilder().Proto().BinGet(5).Stop().bytes(), "memo slot 5 is empty");
  ExpectRefused(PickleBuilder().Proto().Reduce().Stop().bytes(), "the stack (above the last MARK) is empty");
  ExpectRefused(PickleBuilder().Proto().Int(1).Mark().Op(0x85).Stop().bytes(), "above the last MARK");
  ExpectRefused(PickleBuilder().Proto().Tuple().Stop().bytes(), "needs a MARK");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().EmptyDict().Stop().bytes(), "leaves 2 values");
  ExpectRefused(PickleBuilder().Proto().EmptyDict().Mark().Stop().bytes(), "1 marks");
  ExpectRefused(StateDictPickle({{"t", "0", "FloatStorage", 1, 0, {1}, {1}}, {"t", "1", "FloatStorage", 1, 0, {1}, {1}}}),
                "holds \"t\" twice");
  ExpectRefused(StateDictPickle({{"ok", "0", "FloatStorage", 1, 0, {1}, {1}}, {"bad\xff", "1", "FloatStorage", 1, 0, {1}, {1}}}),
                "the name of state dict entry 1: invalid UTF-8 at byte offset 3");
}

// Minimal deterministic generator for the mutation tests.
uint64_t Next(uint64_t* state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return *state >> 33;
}

// Cut short, flipped or spliced, the pickle gives an error or a state dict whose views stay
// inside their storages; it never crashes (the sanitizer builds run this too).
TEST(StateDictPickleTest, SurvivesMutations) {
  PickleBuilder p;
  p.Proto().OrderedDict().BinPut(0).Mark();
  p.Str("a").Tensor("0", "FloatStorage", 12, 2, {2, 3}, {3, 1});
  p.Str("b").Tensor("0", "FloatStorage", 12, 0, {4, 3}, {1, 4});
  p.Str("c").Tensor("1", "HalfStorage", 300, 0, {300}, {1});
  p.SetItems().EmptyDict().Str("_metadata").OrderedDict().SetItem().Build().Stop();
  const std::string good = p.bytes();
  ASSERT_TRUE(Read(good).ok()) << Read(good).status();

  auto check = [](const std::string& pickle) {
    auto dict = Read(pickle);
    if (!dict.ok()) {
      const absl::StatusCode code = dict.status().code();
      ASSERT_TRUE(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss) << dict.status();
      return;
    }
    for (const PickledTensor& t : dict->tensors) {
      ASSERT_LT(t.storage, dict->storages.size());
      int64_t last = t.offset;
      bool empty = false;
      for (size_t i = 0; i < t.shape.size(); ++i) {
        empty = empty || t.shape[i] == 0;
        if (t.shape[i] > 0) last += (t.shape[i] - 1) * t.stride[i];
      }
      if (!empty) {
        ASSERT_LT(last, dict->storages[t.storage].numel) << t.name;
      }
    }
  };
  for (size_t n = 0; n < good.size(); ++n) check(good.substr(0, n));
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t value : std::vector<uint8_t>{0x00, 0x01, 0x7F, 0x80, 0xFF, static_cast<uint8_t>(good[i] ^ 0x20)}) {
      std::string mutated = good;
      mutated[i] = static_cast<char>(value);
      check(mutated);
    }
  }
  uint64_t state = 1;
  for (int round = 0; round < 3000; ++round) {
    std::string mutated = good;
    const int edits = 1 + static_cast<int>(Next(&state) % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = Next(&state) % mutated.size();
      switch (Next(&state) % 3) {
        case 0: mutated[at] = static_cast<char>(Next(&state)); break;
        case 1: mutated.insert(at, 1, good[Next(&state) % good.size()]); break;
        default: mutated.erase(at, 1 + Next(&state) % 8); break;
      }
      if (mutated.empty()) mutated = "\x80";
    }
    check(mutated);
  }
}

}  // namespace
}  // namespace relserve
