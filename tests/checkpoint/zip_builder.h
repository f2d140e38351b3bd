#ifndef RELSERVE_TESTS_CHECKPOINT_ZIP_BUILDER_H_
#define RELSERVE_TESTS_CHECKPOINT_ZIP_BUILDER_H_

// Zip archives laid out as PyTorchStreamWriter lays them out (stored entries, data aligned to
// 64 bytes by a padding extra field in the local header), optionally with zip64 records, and
// with hooks to break them on purpose. Torch-free, for the reader's own tests and the fuzzer's
// seeds; LibTorch's writer itself is used in libtorch_archive_test.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <zlib.h>

namespace relserve::testing {

class ZipBuilder {
 public:
  struct Entry {
    std::string name;
    std::string data;
    uint16_t method = 0;  // 0: stored; anything else claims compression
    bool corrupt_crc = false;  // every record of the CRC-32 is off by one bit
    bool zero_crc = false;     // every record of the CRC-32 is 0
    // As miniz (and so torch.save) writes: general-purpose flag bit 3 set, the local header's
    // CRC-32 and sizes 0, and a data descriptor (signature, CRC-32, sizes) after the data.
    bool data_descriptor = false;
    bool local_crc_differs = false;  // the local header's (or data descriptor's) CRC-32 is another
  };

  // Zip64 records throughout: sizes and offsets saturated in the 32-bit fields and given in
  // zip64 extra fields, and a zip64 end record with its locator, as miniz writes past 4 GiB.
  explicit ZipBuilder(bool zip64 = false) : zip64_(zip64) {}

  ZipBuilder& Add(const std::string& name, const std::string& data) {
    entries_.push_back(Entry{name, data});
    return *this;
  }
  Entry& last() { return entries_.back(); }

  std::string Build() const {
    std::string out;
    std::vector<uint64_t> offsets;
    for (const Entry& e : entries_) {
      offsets.push_back(out.size());
      const uint64_t header_end = out.size() + 30 + e.name.size() + 4;
      const uint64_t padding = (64 - (header_end % 64)) % 64;
      const uint32_t local_crc = e.local_crc_differs ? Crc(e) ^ 0x10 : Crc(e);
      const uint32_t local_size = e.data_descriptor ? 0 : zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(e.data.size());
      U32(&out, 0x04034b50);
      U16(&out, zip64_ ? 45 : 20);
      U16(&out, e.data_descriptor ? 0x0808 : 0);
      U16(&out, e.method);
      U16(&out, 0);
      U16(&out, 0);
      U32(&out, e.data_descriptor ? 0 : local_crc);
      U32(&out, local_size);
      U32(&out, local_size);
      U16(&out, static_cast<uint16_t>(e.name.size()));
      U16(&out, static_cast<uint16_t>(4 + padding));
      out += e.name;
      U16(&out, 0x4246);  // "FB", PyTorchStreamWriter's padding field
      U16(&out, static_cast<uint16_t>(padding));
      out.append(padding, 'Z');
      out += e.data;
      if (e.data_descriptor) {
        U32(&out, 0x08074b50);
        U32(&out, local_crc);
        Le(&out, e.data.size(), zip64_ ? 8 : 4);
        Le(&out, e.data.size(), zip64_ ? 8 : 4);
      }
    }
    const uint64_t directory_at = out.size();
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      U32(&out, 0x02014b50);
      U16(&out, zip64_ ? 45 : 20);
      U16(&out, zip64_ ? 45 : 20);
      U16(&out, e.data_descriptor ? 0x0808 : 0);
      U16(&out, e.method);
      U16(&out, 0);
      U16(&out, 0);
      U32(&out, Crc(e));
      U32(&out, zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(e.data.size()));
      U32(&out, zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(e.data.size()));
      U16(&out, static_cast<uint16_t>(e.name.size()));
      U16(&out, zip64_ ? 28 : 0);
      U16(&out, 0);
      U16(&out, 0);
      U16(&out, 0);
      U32(&out, 0);
      U32(&out, zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(offsets[i]));
      out += e.name;
      if (zip64_) {
        U16(&out, 0x0001);
        U16(&out, 24);
        U64(&out, e.data.size());
        U64(&out, e.data.size());
        U64(&out, offsets[i]);
      }
    }
    const uint64_t directory_size = out.size() - directory_at;
    if (zip64_) {
      const uint64_t end64_at = out.size();
      U32(&out, 0x06064b50);
      U64(&out, 44);
      U16(&out, 45);
      U16(&out, 45);
      U32(&out, 0);
      U32(&out, 0);
      U64(&out, entries_.size());
      U64(&out, entries_.size());
      U64(&out, directory_size);
      U64(&out, directory_at);
      U32(&out, 0x07064b50);
      U32(&out, 0);
      U64(&out, end64_at);
      U32(&out, 1);
    }
    U32(&out, 0x06054b50);
    U16(&out, 0);
    U16(&out, 0);
    U16(&out, zip64_ ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
    U16(&out, zip64_ ? 0xFFFF : static_cast<uint16_t>(entries_.size()));
    U32(&out, zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(directory_size));
    U32(&out, zip64_ ? 0xFFFFFFFF : static_cast<uint32_t>(directory_at));
    U16(&out, 0);
    return out;
  }

  // `head` laid out as Build does (without padding), then one entry per name in `shared`, all
  // of whose data is the same single copy of `data`: their local headers follow one another,
  // each with an extra field that runs over the next ones up to that copy. Each entry is
  // consistent on its own (CRC-32 and sizes right), but together they overlap: a file of
  // data.size() bytes that stands for shared.size() * data.size().
  static std::string Overlapping(const std::vector<std::pair<std::string, std::string>>& head,
                                 const std::vector<std::string>& shared, const std::string& data) {
    std::string out;
    struct Record {
      std::string name;
      uint64_t offset;
      uint64_t size;
      uint32_t crc;
    };
    std::vector<Record> records;
    auto local_header = [&out](const std::string& name, uint64_t size, uint32_t crc, uint64_t extra) {
      U32(&out, 0x04034b50);
      U16(&out, 20);
      U16(&out, 0);
      U16(&out, 0);
      U16(&out, 0);
      U16(&out, 0);
      U32(&out, crc);
      U32(&out, size);
      U32(&out, size);
      U16(&out, name.size());
      U16(&out, extra);
      out += name;
    };
    for (const auto& [name, contents] : head) {
      records.push_back({name, out.size(), contents.size(), Crc(contents)});
      local_header(name, contents.size(), records.back().crc, 0);
      out += contents;
    }
    uint64_t data_at = out.size();
    for (const std::string& name : shared) data_at += 30 + name.size();
    const uint32_t crc = Crc(data);
    for (const std::string& name : shared) {
      records.push_back({name, out.size(), data.size(), crc});
      local_header(name, data.size(), crc, data_at - (out.size() + 30 + name.size()));
    }
    out += data;
    const uint64_t directory_at = out.size();
    for (const Record& r : records) {
      U32(&out, 0x02014b50);
      U16(&out, 20);
      U16(&out, 20);
      U16(&out, 0);
      U16(&out, 0);
      U16(&out, 0);
      U16(&out, 0);
      U32(&out, r.crc);
      U32(&out, r.size);
      U32(&out, r.size);
      U16(&out, r.name.size());
      for (int i = 0; i < 4; ++i) U16(&out, 0);
      U32(&out, 0);
      U32(&out, r.offset);
      out += r.name;
    }
    const uint64_t directory_size = out.size() - directory_at;
    U32(&out, 0x06054b50);
    U16(&out, 0);
    U16(&out, 0);
    U16(&out, records.size());
    U16(&out, records.size());
    U32(&out, directory_size);
    U32(&out, directory_at);
    U16(&out, 0);
    return out;
  }

 private:
  static uint32_t Crc(const std::string& data) {
    return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  }
  static uint32_t Crc(const Entry& e) {
    if (e.zero_crc) return 0;
    const uint32_t crc = Crc(e.data);
    return e.corrupt_crc ? crc ^ 1 : crc;
  }
  static void U16(std::string* out, uint64_t v) { Le(out, v, 2); }
  static void U32(std::string* out, uint64_t v) { Le(out, v, 4); }
  static void U64(std::string* out, uint64_t v) { Le(out, v, 8); }
  static void Le(std::string* out, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }

  bool zip64_;
  std::vector<Entry> entries_;
};

// Little-endian bytes of `values`: a storage's contents.
template <typename T>
std::string StorageBytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_CHECKPOINT_ZIP_BUILDER_H_
