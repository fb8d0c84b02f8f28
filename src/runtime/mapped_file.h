#pragma once
// Read-only memory map of a whole file. Checkpoints are mapped rather than read so that loading
// touches only the pages that are converted, and the OS can drop them afterwards.
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace slab {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws std::runtime_error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release();
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace slab
