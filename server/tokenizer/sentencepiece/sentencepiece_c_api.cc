// The body of librelserve_sentencepiece.so: the only file that includes SentencePiece's header
// (it declares `namespace absl { using std::string_view; }`, which clashes with Abseil) and the
// only code that links libsentencepiece. See sentencepiece_c_api.h for why this is a module.

#include "server/tokenizer/sentencepiece/sentencepiece_c_api.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include <sentencepiece_processor.h>

struct RelserveSpmModel {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void SetError(char* error, size_t error_size, const std::string& message) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// A model loaded by load(processor), which returns SentencePiece's status; NULL with the
// message in error when it fails or throws.
template <typename LoadFn>
RelserveSpmModel* LoadWith(LoadFn load, char* error, size_t error_size) {
  try {
    auto model = std::make_unique<RelserveSpmModel>();
    const auto status = load(model->processor);
    if (!status.ok()) {
      SetError(error, error_size, status.ToString());
      return nullptr;
    }
    return model.release();
  } catch (const std::exception& e) {
    SetError(error, error_size, e.what());
  } catch (...) {
    SetError(error, error_size, "unknown exception while loading the model");
  }
  return nullptr;
}

RelserveSpmModel* Load(const char* path, char* error, size_t error_size) {
  // SentencePiece throws std::ios_base::failure when handed a directory; answer plainly.
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    SetError(error, error_size, std::string(path) + ": not a regular file");
    return nullptr;
  }
  return LoadWith([path](sentencepiece::SentencePieceProcessor& p) { return p.Load(path); },
                  error, error_size);
}

RelserveSpmModel* LoadSerialized(const char* data, size_t size, char* error, size_t error_size) {
  return LoadWith(
      [data, size](sentencepiece::SentencePieceProcessor& p) {
        return p.LoadFromSerializedProto(std::string_view(data, size));
      },
      error, error_size);
}

void FreeModel(RelserveSpmModel* model) { delete model; }

int32_t VocabSize(const RelserveSpmModel* model) { return model->processor.GetPieceSize(); }

int32_t PieceToId(const RelserveSpmModel* model, const char* piece, size_t piece_size) {
  try {
    const std::string_view wanted(piece, piece_size);
    const int id = model->processor.PieceToId(wanted);
    if (id < 0 || id >= model->processor.GetPieceSize()) return -1;
    return model->processor.IdToPiece(id) == wanted ? id : -1;
  } catch (...) {
    return -1;
  }
}

size_t IdToPiece(const RelserveSpmModel* model, int32_t id, char* buffer, size_t buffer_size) {
  if (id < 0 || id >= model->processor.GetPieceSize()) return 0;
  const std::string& piece = model->processor.IdToPiece(id);
  if (buffer != nullptr && buffer_size > 0) {
    const size_t n = std::min(piece.size(), buffer_size - 1);
    std::memcpy(buffer, piece.data(), n);
    buffer[n] = '\0';
  }
  return piece.size();
}

void ReservedIds(const RelserveSpmModel* model, RelserveSpmReservedIds* out) {
  out->unk = model->processor.unk_id();
  out->bos = model->processor.bos_id();
  out->eos = model->processor.eos_id();
  out->pad = model->processor.pad_id();
}

int Encode(const RelserveSpmModel* model, const char* text, size_t text_size,
           RelserveSpmPieces* out, char* error, size_t error_size) {
  *out = RelserveSpmPieces{nullptr, nullptr, nullptr, 0};
  try {
    // Offsets travel as int32; SentencePiece itself keeps them as uint32.
    if (text_size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      SetError(error, error_size, "text longer than 2^31-1 bytes");
      return 1;
    }
    sentencepiece::ImmutableSentencePieceText spt;
    const auto status =
        model->processor.Encode(std::string_view(text, text_size), spt.mutable_proto());
    if (!status.ok()) {
      SetError(error, error_size, status.ToString());
      return 1;
    }
    const size_t n = spt.pieces_size();
    if (n == 0) return 0;
    // One block for the three arrays, so free_pieces has a single pointer to release.
    auto* block = static_cast<int32_t*>(std::malloc(3 * n * sizeof(int32_t)));
    if (block == nullptr) {
      SetError(error, error_size, "out of memory");
      return 1;
    }
    for (size_t i = 0; i < n; ++i) {
      const auto piece = spt.pieces(static_cast<int>(i));
      block[i] = static_cast<int32_t>(piece.id());
      block[n + i] = static_cast<int32_t>(piece.begin());
      block[2 * n + i] = static_cast<int32_t>(piece.end());
    }
    *out = RelserveSpmPieces{block, block + n, block + 2 * n, n};
    return 0;
  } catch (const std::exception& e) {
    SetError(error, error_size, e.what());
  } catch (...) {
    SetError(error, error_size, "unknown exception while encoding");
  }
  return 1;
}

void FreePieces(RelserveSpmPieces* pieces) {
  if (pieces == nullptr) return;
  std::free(pieces->ids);
  *pieces = RelserveSpmPieces{nullptr, nullptr, nullptr, 0};
}

constexpr RelserveSpmApi kApi = {
    RELSERVE_SPM_ABI_VERSION, &Load,   &LoadSerialized, &FreeModel, &VocabSize,
    &PieceToId,               &IdToPiece, &ReservedIds,  &Encode,    &FreePieces,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const RelserveSpmApi* relserve_sentencepiece_api(
    uint32_t abi_version) {
  return abi_version == RELSERVE_SPM_ABI_VERSION ? &kApi : nullptr;
}
