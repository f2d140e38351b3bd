#ifndef RELSERVE_SERVER_CHECKPOINT_CRC32_H_
#define RELSERVE_SERVER_CHECKPOINT_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace relserve {

// The CRC-32 that zip archives record for each entry (IEEE 802.3, reflected, as zlib's crc32):
// `crc` is the value so far (0 to start), so a long buffer can be checked in pieces.
uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_CRC32_H_
