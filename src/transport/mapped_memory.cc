#include "transport/mapped_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <podnet/xfer.h>

namespace podnet::detail {
namespace {
size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
}  // namespace

Result<std::unique_ptr<MappedMemory>> MappedMemory::create(size_t len) {
  if (len == 0) return Status::InvalidArgument("allocate_memory: length 0");
  const size_t page = page_bytes();
  if (len > (SIZE_MAX >> 1)) return Status::InvalidArgument("allocate_memory: length {} is too large", len);
  const size_t bytes = page + round_up(len, page);
  std::unique_ptr<MappedMemory> m(new MappedMemory);
  m->fd_ = memfd_create("podnet-region", MFD_CLOEXEC);
  if (m->fd_ < 0) return Status::Unavailable("allocate_memory: memfd_create: {}", std::strerror(errno));
  if (ftruncate(m->fd_, static_cast<off_t>(bytes)) != 0)
    return Status::Unavailable("allocate_memory: ftruncate of a {}-byte memfd: {}", bytes, std::strerror(errno));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd_, 0);
  if (p == MAP_FAILED) return Status::Unavailable("allocate_memory: mmap of {} bytes: {}", bytes, std::strerror(errno));
  m->map_ = p;
  m->map_bytes_ = bytes;
  m->header_ = new (p) MappedHeader;
  m->data_ = static_cast<std::byte*>(p) + page;
  m->length_ = len;
  m->header_->magic = MappedHeader::kMagic;
  m->header_->data_addr = reinterpret_cast<uint64_t>(m->data_);
  m->header_->length = len;
  return m;
}

MappedMemory::~MappedMemory() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
  if (fd_ >= 0) close(fd_);
}

Result<std::shared_ptr<PeerMapping>> PeerMapping::map(int fd, uint64_t key) {
  const size_t page = page_bytes();
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Unavailable("fstat: {}", std::strerror(errno));
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) < 2 * page)
    return Status::InvalidArgument("descriptor {} is not a podnet region ({} bytes)", fd, st.st_size);
  std::shared_ptr<PeerMapping> m(new PeerMapping);
  void* h = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED) return Status::Unavailable("mmap of the region header: {}", std::strerror(errno));
  m->header_ = static_cast<const MappedHeader*>(h);
  const MappedHeader& hdr = *m->header_;
  if (hdr.magic != MappedHeader::kMagic || hdr.key != key)
    return Status::InvalidArgument("descriptor {} does not hold the region of key {:#x}", fd, key);
  m->key_ = key;
  m->data_addr_ = hdr.data_addr;
  m->length_ = hdr.length;
  m->access_ = hdr.access;
  const size_t data_bytes = round_up(m->length_, page);
  if (m->length_ == 0 || data_bytes + page > static_cast<size_t>(st.st_size))
    return Status::InvalidArgument("region of key {:#x} claims {} bytes in a {}-byte file", key, m->length_,
                                   st.st_size);
  const int prot = has_access(static_cast<Access>(m->access_), Access::kRemoteWrite) ? PROT_READ | PROT_WRITE
                                                                                     : PROT_READ;
  void* d = mmap(nullptr, data_bytes, prot, MAP_SHARED, fd, static_cast<off_t>(page));
  if (d == MAP_FAILED) return Status::Unavailable("mmap of {} region bytes: {}", data_bytes, std::strerror(errno));
  m->data_ = static_cast<std::byte*>(d);
  m->data_bytes_ = data_bytes;
  return m;
}

PeerMapping::~PeerMapping() {
  if (data_ != nullptr) munmap(data_, data_bytes_);
  if (header_ != nullptr) munmap(const_cast<MappedHeader*>(header_), page_bytes());
}

}  // namespace podnet::detail
