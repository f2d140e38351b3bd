#ifndef RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_C_API_H_
#define RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_C_API_H_

/*
 * The boundary between relserve and librelserve_sentencepiece.so.
 *
 * Debian's libsentencepiece carries its own protobuf-lite runtime and exports its symbols; in a
 * process that also loads the system libprotobuf (gRPC, LibTorch) SentencePiece aborts on its
 * version check. The module is therefore opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) so its
 * protobuf copy stays private, and only plain C crosses this boundary: no C++ types, no
 * exceptions, and memory is always released by the side that allocated it.
 *
 * The module exports a single symbol, RELSERVE_SPM_ENTRY_POINT, which hands out a table of
 * function pointers; the version argument lets a stale module be refused instead of misused.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RELSERVE_SPM_ABI_VERSION 2u
#define RELSERVE_SPM_ENTRY_POINT "relserve_sentencepiece_api"

/* A loaded SentencePiece model; opaque outside the module. Immutable once loaded, so the
 * read-only calls below may run concurrently on one model. */
typedef struct RelserveSpmModel RelserveSpmModel;

/* The result of one encode call: size pieces, each with its id and the byte span [begin, end)
 * of the input it covers (begin == end for pieces that cover nothing, such as a bare "▁").
 * The arrays belong to the module; release them with free_pieces. */
typedef struct RelserveSpmPieces {
  int32_t* ids;
  int32_t* begins;
  int32_t* ends;
  size_t size;
} RelserveSpmPieces;

/* Ids SentencePiece reserved when the model was trained; -1 where the model has none. */
typedef struct RelserveSpmReservedIds {
  int32_t unk;
  int32_t bos;
  int32_t eos;
  int32_t pad;
} RelserveSpmReservedIds;

/* Calls that can fail return 0 on success and nonzero on failure, and then write a
 * NUL-terminated message into error (cut to error_size bytes). */
typedef struct RelserveSpmApi {
  uint32_t abi_version;
  /* Loads a serialized model from a file. NULL on failure. */
  RelserveSpmModel* (*load)(const char* path, char* error, size_t error_size);
  /* Loads a model from its serialized ModelProto (size bytes; a model built in memory, such
   * as one made from a tokenizer.json). NULL on failure. */
  RelserveSpmModel* (*load_serialized)(const char* data, size_t size, char* error,
                                       size_t error_size);
  void (*free_model)(RelserveSpmModel* model);
  int32_t (*vocab_size)(const RelserveSpmModel* model);
  /* The id of exactly this piece, or -1 when the vocabulary lacks it (SentencePiece itself
   * would answer with the unknown id, which cannot be told apart from a real match). */
  int32_t (*piece_to_id)(const RelserveSpmModel* model, const char* piece, size_t piece_size);
  /* Copies the piece for id into buffer (NUL-terminated, cut to buffer_size) and returns its
   * full length; returns 0 for an id outside the vocabulary. */
  size_t (*id_to_piece)(const RelserveSpmModel* model, int32_t id, char* buffer,
                        size_t buffer_size);
  void (*reserved_ids)(const RelserveSpmModel* model, RelserveSpmReservedIds* out);
  /* Encodes text (text_size bytes, NUL bytes allowed) without any special tokens. */
  int (*encode)(const RelserveSpmModel* model, const char* text, size_t text_size,
                RelserveSpmPieces* out, char* error, size_t error_size);
  void (*free_pieces)(RelserveSpmPieces* pieces);
} RelserveSpmApi;

/* The entry point: the function table when the module speaks abi_version, otherwise NULL. */
typedef const RelserveSpmApi* (*RelserveSpmEntryPoint)(uint32_t abi_version);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_C_API_H_ */
