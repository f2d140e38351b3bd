#include "server/checkpoint/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/quote.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Record layouts: APPNOTE.TXT (PKWARE's zip specification), sections 4.3.7, 4.3.12, 4.3.14-16.
constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kDataDescriptorSignature = 0x08074b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kMaxCommentSize = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagDataDescriptor = 1 << 3;
constexpr uint16_t kFlagStrongEncryption = 1 << 6;

// [offset, offset + length) lies within [0, size), without overflow.
bool Fits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// Little-endian fields at offsets the caller has checked with Fits.
uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t U32(const uint8_t* p) { return static_cast<uint32_t>(U16(p)) | (static_cast<uint32_t>(U16(p + 2)) << 16); }
uint64_t U64(const uint8_t* p) { return static_cast<uint64_t>(U32(p)) | (static_cast<uint64_t>(U32(p + 4)) << 32); }

std::string Crc(uint32_t crc) { return absl::StrCat(absl::Hex(crc, absl::kZeroPad8)); }

// The bytes an entry takes before the central directory: its local header, its data and its
// data descriptor.
struct Extent {
  uint64_t begin;
  uint64_t end;
  size_t entry;
};

struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t end = 0;  // where the records after the central directory begin
};

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, const std::string& label) : data_(data), size_(size), label_(label) {}

  absl::Status Corrupt(const std::string& problem) const {
    return absl::DataLossError(absl::StrCat(label_, ": corrupt or truncated zip archive: ", problem));
  }
  absl::Status Unsupported(const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": ", problem));
  }

  absl::StatusOr<Directory> FindDirectory() const {
    // The end record is the last thing in the file, followed only by a comment of up to 64 KiB.
    if (size_ < kEndSize) {
      return Corrupt(absl::StrCat("no end-of-central-directory record (the file has ", size_, " bytes)"));
    }
    size_t end_at = size_ - kEndSize;
    const size_t lowest = size_ - kEndSize > kMaxCommentSize ? size_ - kEndSize - kMaxCommentSize : 0;
    while (true) {
      if (U32(data_ + end_at) == kEndSignature && end_at + kEndSize + U16(data_ + end_at + 20) <= size_) break;
      if (end_at == lowest) {
        return Corrupt("no end-of-central-directory record: the file is cut short or is not a zip archive");
      }
      --end_at;
    }
    const uint8_t* e = data_ + end_at;
    Directory d;
    const uint16_t disk = U16(e + 4);
    const uint16_t directory_disk = U16(e + 6);
    const uint16_t entries_here = U16(e + 8);
    d.entries = U16(e + 10);
    d.size = U32(e + 12);
    d.offset = U32(e + 16);
    d.end = end_at;

    const bool has_locator = end_at >= kZip64LocatorSize &&
                             U32(data_ + end_at - kZip64LocatorSize) == kZip64LocatorSignature;
    if (has_locator) {
      const uint8_t* locator = data_ + end_at - kZip64LocatorSize;
      const uint64_t zip64_end_at = U64(locator + 8);
      if (U32(locator + 4) != 0 || U32(locator + 16) > 1) return Unsupported("the archive spans several disks");
      if (!Fits(zip64_end_at, kZip64EndSize, end_at - kZip64LocatorSize) ||
          U32(data_ + zip64_end_at) != kZip64EndSignature) {
        return Corrupt("the zip64 end-of-central-directory record is missing or out of place");
      }
      const uint8_t* z = data_ + zip64_end_at;
      if (U32(z + 16) != 0 || U32(z + 20) != 0 || U64(z + 24) != U64(z + 32)) {
        return Unsupported("the archive spans several disks");
      }
      d.entries = U64(z + 32);
      d.size = U64(z + 40);
      d.offset = U64(z + 48);
      d.end = zip64_end_at;
    } else {
      if (d.entries == 0xFFFF || d.size == 0xFFFFFFFF || d.offset == 0xFFFFFFFF) {
        return Corrupt("the end record defers to a zip64 record that is missing");
      }
      if (disk != 0 || directory_disk != 0 || entries_here != d.entries) {
        return Unsupported("the archive spans several disks");
      }
    }
    if (!Fits(d.offset, d.size, d.end)) {
      return Corrupt(absl::StrCat("the central directory (", d.size, " bytes at offset ", d.offset,
                                  ") does not fit before its end record at offset ", d.end));
    }
    // Every entry takes at least a fixed-size header, which bounds what the count may claim.
    if (d.entries > d.size / kCentralHeaderSize) {
      return Corrupt(absl::StrCat("the end record counts ", d.entries, " entries, more than the ", d.size,
                                  "-byte central directory can hold"));
    }
    return d;
  }

  absl::Status ReadEntries(const Directory& d, std::vector<ZipArchive::Entry>* entries,
                           std::map<std::string, size_t, std::less<>>* by_name, std::vector<Extent>* extents) const {
    uint64_t at = d.offset;
    const uint64_t directory_end = d.offset + d.size;
    entries->reserve(d.entries);
    extents->reserve(d.entries);
    for (uint64_t i = 0; i < d.entries; ++i) {
      if (!Fits(at, kCentralHeaderSize, directory_end) || U32(data_ + at) != kCentralHeaderSignature) {
        return Corrupt(absl::StrCat("central directory entry ", i, " (at offset ", at, ") is not a file header"));
      }
      const uint8_t* h = data_ + at;
      const uint16_t flags = U16(h + 8);
      const uint16_t method = U16(h + 10);
      const uint32_t crc = U32(h + 16);
      uint64_t compressed = U32(h + 20);
      uint64_t uncompressed = U32(h + 24);
      const uint16_t name_size = U16(h + 28);
      const uint16_t extra_size = U16(h + 30);
      const uint16_t comment_size = U16(h + 32);
      const uint16_t start_disk = U16(h + 34);
      uint64_t local_at = U32(h + 42);
      const uint64_t variable = uint64_t{name_size} + extra_size + comment_size;
      if (!Fits(at + kCentralHeaderSize, variable, directory_end)) {
        return Corrupt(absl::StrCat("central directory entry ", i, " runs past the directory"));
      }
      std::string name(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_size);
      const uint8_t* extra = h + kCentralHeaderSize + name_size;

      // Fields saturated at their 16- or 32-bit maximum continue in the zip64 extra field, in
      // this order, each present only if its field is saturated.
      const bool need_uncompressed = uncompressed == 0xFFFFFFFF;
      const bool need_compressed = compressed == 0xFFFFFFFF;
      const bool need_offset = local_at == 0xFFFFFFFF;
      if (need_uncompressed || need_compressed || need_offset || start_disk == 0xFFFF) {
        bool found = false;
        for (size_t x = 0; x + 4 <= extra_size;) {
          const uint16_t id = U16(extra + x);
          const uint16_t length = U16(extra + x + 2);
          if (!Fits(x + 4, length, extra_size)) break;
          if (id == kZip64ExtraId) {
            const uint8_t* f = extra + x + 4;
            const size_t needed = 8 * (size_t{need_uncompressed} + need_compressed + need_offset);
            if (length < needed) {
              return Corrupt(absl::StrCat("the zip64 field of entry ", Quote(name), " is too short"));
            }
            if (need_uncompressed) {
              uncompressed = U64(f);
              f += 8;
            }
            if (need_compressed) {
              compressed = U64(f);
              f += 8;
            }
            if (need_offset) local_at = U64(f);
            found = true;
            break;
          }
          x += 4 + length;
        }
        if (!found) return Corrupt(absl::StrCat("entry ", Quote(name), " lacks the zip64 field its sizes defer to"));
      }
      if (start_disk != 0 && start_disk != 0xFFFF) return Unsupported("the archive spans several disks");
      if ((flags & (kFlagEncrypted | kFlagStrongEncryption)) != 0) {
        return Unsupported(absl::StrCat("entry ", Quote(name), " is encrypted; torch.save never encrypts"));
      }
      if (method == 0 && compressed != uncompressed) {
        return Corrupt(absl::StrCat("stored entry ", Quote(name), " has a compressed size of ", compressed,
                                    " bytes and an uncompressed size of ", uncompressed));
      }

      // The data follows the local header, whose name and extra field may differ in length from
      // the central directory's (torch pads the local extra field to align the data).
      if (!Fits(local_at, kLocalHeaderSize, d.offset) || U32(data_ + local_at) != kLocalHeaderSignature) {
        return Corrupt(absl::StrCat("the local header of entry ", Quote(name), " (at offset ", local_at,
                                    ") is missing"));
      }
      const uint8_t* local = data_ + local_at;
      const uint64_t local_name_size = U16(local + 26);
      const uint64_t data_at = local_at + kLocalHeaderSize + local_name_size + U16(local + 28);
      if (local_name_size != name_size ||
          !Fits(local_at + kLocalHeaderSize, local_name_size, d.offset) ||
          std::memcmp(local + kLocalHeaderSize, name.data(), name_size) != 0) {
        return Corrupt(absl::StrCat("the local header of entry ", Quote(name), " names another entry"));
      }
      if (!Fits(data_at, compressed, d.offset)) {
        return Corrupt(absl::StrCat("the ", compressed, " bytes of entry ", Quote(name), " at offset ", data_at,
                                    " run past the data area, which ends at offset ", d.offset));
      }
      // The central directory's CRC is the one Verify checks the data against; the local
      // records must say the same, so that no reader of this file sees other contents.
      uint64_t end = data_at + compressed;
      const uint16_t local_flags = U16(local + 6);
      const uint32_t local_crc = U32(local + 14);
      if ((local_flags & kFlagDataDescriptor) != 0) {
        // The local header leaves the CRC and sizes at 0 (miniz, and so torch.save, always
        // does); a data descriptor after the data gives them.
        if (local_crc != 0 && local_crc != crc) return CrcMismatch(name, "local header", local_crc, crc);
        ASSIGN_OR_RETURN(end, ReadDescriptor(name, end, d.offset, crc, compressed, uncompressed));
      } else {
        if (local_crc != crc) return CrcMismatch(name, "local header", local_crc, crc);
        const uint32_t local_compressed = U32(local + 18);
        const uint32_t local_uncompressed = U32(local + 22);
        if ((local_compressed != 0xFFFFFFFF && local_compressed != compressed) ||
            (local_uncompressed != 0xFFFFFFFF && local_uncompressed != uncompressed)) {
          return Corrupt(absl::StrCat("the local header of entry ", Quote(name), " records sizes of ", local_compressed,
                                      " and ", local_uncompressed, " bytes, the central directory ", compressed, " and ",
                                      uncompressed));
        }
      }
      if (!by_name->emplace(name, entries->size()).second) {
        return Unsupported(absl::StrCat("entry ", Quote(name), " appears twice in the archive"));
      }
      extents->push_back(Extent{local_at, end, entries->size()});
      entries->push_back(
          ZipArchive::Entry{std::move(name), data_ + data_at, static_cast<size_t>(compressed), crc, method});
      at += kCentralHeaderSize + variable;
    }
    return absl::OkStatus();
  }

  // No two entries may share bytes: overlapping entries let a small file stand for many large
  // ones (each checked by CRC on its own). Every extent already ends before the central
  // directory. O(n log n).
  absl::Status CheckDisjoint(std::vector<Extent> extents, const std::vector<ZipArchive::Entry>& entries) const {
    std::sort(extents.begin(), extents.end(),
              [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i) {
      const Extent& a = extents[i - 1];
      const Extent& b = extents[i];
      if (b.begin < a.end) {
        return Corrupt(absl::StrCat("entries ", Quote(entries[a.entry].name), " (bytes ", a.begin, " to ", a.end,
                                    ") and ", Quote(entries[b.entry].name), " (bytes ", b.begin, " to ", b.end,
                                    ") overlap; the entries of a zip archive lie apart"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CrcMismatch(const std::string& name, const char* where, uint32_t recorded, uint32_t central) const {
    return Corrupt(absl::StrCat("the ", where, " of entry ", Quote(name), " records CRC-32 ", Crc(recorded),
                                ", the central directory ", Crc(central)));
  }

  // The data descriptor at `at` (an optional signature, the CRC-32, then both sizes in 4 or, for
  // zip64, 8 bytes each): it must agree with the central directory. Returns where it ends.
  absl::StatusOr<uint64_t> ReadDescriptor(const std::string& name, uint64_t at, uint64_t limit, uint32_t crc,
                                          uint64_t compressed, uint64_t uncompressed) const {
    const bool signed_form = Fits(at, 4, limit) && U32(data_ + at) == kDataDescriptorSignature;
    // Without a signature the CRC comes first; with one, a CRC that happens to equal the
    // signature is still read correctly by trying the signed form first.
    for (const uint64_t skip : {signed_form ? uint64_t{4} : uint64_t{0}, uint64_t{0}}) {
      const uint64_t p = at + skip;
      if (!Fits(p, 12, limit) || U32(data_ + p) != crc) continue;
      if (U32(data_ + p + 4) == compressed && U32(data_ + p + 8) == uncompressed) return p + 12;
      if (Fits(p, 20, limit) && U64(data_ + p + 4) == compressed && U64(data_ + p + 12) == uncompressed) return p + 20;
    }
    if (!Fits(at + (signed_form ? 4 : 0), 12, limit)) {
      return Corrupt(absl::StrCat("the data descriptor of entry ", Quote(name), " (at offset ", at,
                                  ") runs past the data area, which ends at offset ", limit));
    }
    const uint32_t recorded = U32(data_ + at + (signed_form ? 4 : 0));
    if (recorded != crc) return CrcMismatch(name, "data descriptor", recorded, crc);
    return Corrupt(absl::StrCat("the data descriptor of entry ", Quote(name), " (at offset ", at,
                                ") records other sizes than the central directory's ", compressed, " and ",
                                uncompressed));
  }

  const uint8_t* data_;
  size_t size_;
  const std::string& label_;
};

}  // namespace

absl::StatusOr<ZipArchive> ZipArchive::Parse(const uint8_t* data, size_t size, const std::string& label) {
  Parser parser(data, size, label);
  auto directory = parser.FindDirectory();
  if (!directory.ok()) return directory.status();
  ZipArchive archive;
  archive.label_ = label;
  std::vector<Extent> extents;
  RETURN_IF_ERROR(parser.ReadEntries(*directory, &archive.entries_, &archive.by_name_, &extents));
  RETURN_IF_ERROR(parser.CheckDisjoint(std::move(extents), archive.entries_));
  return archive;
}

const ZipArchive::Entry* ZipArchive::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

absl::Status ZipArchive::Verify(const Entry& entry) const {
  if (entry.method != 0) {
    return absl::InvalidArgumentError(absl::StrCat(label_, ": entry ", Quote(entry.name), " is compressed (zip method ",
                                                   entry.method, "); torch.save stores entries uncompressed: re-save "
                                                   "the file with torch.save instead of re-zipping it"));
  }
  // Always checked: a recorded 0 is only right for data whose CRC-32 is 0 (the empty entry).
  const uint32_t actual = static_cast<uint32_t>(crc32_z(0, entry.data, entry.size));
  if (actual == entry.crc32) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      label_, ": entry ", Quote(entry.name), " is corrupt: its CRC-32 is ", Crc(actual), ", the archive records ",
      Crc(entry.crc32),
      entry.crc32 == 0 ? " (PyTorch writes 0 when torch.serialization.set_crc32_options(False) is in effect; "
                         "relserve checks every entry, so re-save the file with CRC-32s, the default)"
                       : ""));
}

}  // namespace relserve
