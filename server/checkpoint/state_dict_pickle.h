#ifndef RELSERVE_SERVER_CHECKPOINT_STATE_DICT_PICKLE_H_
#define RELSERVE_SERVER_CHECKPOINT_STATE_DICT_PICKLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/dtype.h"

namespace relserve {

// A storage the pickle refers to by persistent id: ('storage', torch.<Type>Storage, key,
// location, numel). Its bytes are the archive entry data/<key>.
struct PickledStorage {
  std::string key;
  StDType dtype;
  int64_t numel;         // elements
  std::string location;  // where it was saved from ("cpu", "cuda:0"); read onto the CPU regardless
};

// One entry of the state dict: a view of a storage, as torch._utils._rebuild_tensor_v2 builds it.
struct PickledTensor {
  std::string name;
  size_t storage;  // index into PickledStateDict::storages
  int64_t offset;  // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // each key once, in order of first use
  std::vector<PickledTensor> tensors;    // in the pickle's order
};

// The most dimensions a tensor may have here (LibTorch allows 64 too).
inline constexpr size_t kMaxPickledTensorDims = 64;

// Reads the data.pkl of a torch.save archive without running it: a pickle machine that knows
// only what a state dict needs and refuses everything else, so loading a checkpoint never
// executes code. It accepts
//   - the opcodes of protocols 2 to 5 that build plain data: None, bools, integers up to 64
//     bits, floats, str, tuples, lists, dicts, MARK, the memo, FRAME;
//   - GLOBAL / STACK_GLOBAL of collections.OrderedDict, torch._utils._rebuild_tensor_v2,
//     torch._utils._rebuild_parameter and torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,
//     Byte,Bool}Storage, and no other name;
//   - REDUCE of OrderedDict() with no arguments, of _rebuild_tensor_v2(storage, offset, size,
//     stride, requires_grad, backward_hooks[, metadata]) with no hooks and no metadata, and of
//     _rebuild_parameter(tensor, requires_grad, backward_hooks);
//   - BUILD on an OrderedDict with a dict of attributes (state_dict()'s _metadata), which is
//     ignored;
//   - BINPERSID of a storage's persistent id.
// The result must be a dict of str to tensors. Views are checked against their storage's
// element count (offset, sizes, strides, no overflow); storages are not read here.
// INVALID_ARGUMENT, naming `label`, the byte offset and the opcode or global, for anything else
// (e.g. "refused global posix.system"); DATA_LOSS when the pickle ends before STOP.
absl::StatusOr<PickledStateDict> ReadStateDictPickle(std::string_view pickle, const std::string& label);

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_STATE_DICT_PICKLE_H_
