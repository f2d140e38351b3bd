#ifndef RELSERVE_SERVER_CHECKPOINT_ZIP_ARCHIVE_H_
#define RELSERVE_SERVER_CHECKPOINT_ZIP_ARCHIVE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// The entries of a zip archive held in memory, as torch.save writes them (through LibTorch's
// PyTorchStreamWriter, miniz underneath): stored uncompressed, with zip64 records once the
// archive passes 4 GiB. Only the central directory is trusted for sizes; every offset and size
// is checked against the buffer, so a hostile or truncated archive gives an error, never a read
// outside it. Entries are listed whatever their compression (so that a caller can tell what
// kind of archive it has); Verify refuses to hand out one that is not stored as is.
class ZipArchive {
 public:
  struct Entry {
    std::string name;
    const uint8_t* data;  // into the buffer given to Parse
    size_t size;          // as stored; for a compressed entry, not its real size
    uint32_t crc32;       // as the central directory records it
    uint16_t method;      // 0: stored
  };

  // `label` starts every message (the file's path). DATA_LOSS when the archive is cut short or
  // its records are inconsistent (no end-of-central-directory record, a signature or an offset
  // that does not fit, a local header or data descriptor whose CRC-32 or sizes differ from the
  // central directory's, two entries whose bytes overlap); INVALID_ARGUMENT for what torch.save
  // never writes (encryption, several disks, a name twice). No CRC is computed here. The buffer
  // must outlive the archive.
  static absl::StatusOr<ZipArchive> Parse(const uint8_t* data, size_t size, const std::string& label);

  // In central-directory order.
  const std::vector<Entry>& entries() const { return entries_; }
  // nullptr if absent.
  const Entry* Find(std::string_view name) const;
  // Whether `entry` can be read as it lies: INVALID_ARGUMENT when it is compressed, DATA_LOSS
  // naming it when its bytes do not match the CRC-32 the central directory records. A recorded
  // 0 is no exception (it would let a corrupted file through with its CRCs zeroed): the files
  // PyTorch writes under torch.serialization.set_crc32_options(False) fail here, saying so.
  absl::Status Verify(const Entry& entry) const;

 private:
  std::string label_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_ZIP_ARCHIVE_H_
