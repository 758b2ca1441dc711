// The one way sluice opens a file it did not create in this run, and the one
// way it publishes a file it writes.
//
// Inputs: opened O_NONBLOCK and fstat'ed before anything is read, so a FIFO
// (which blocks an ordinary open until a writer appears, for ever) or a
// device in a file's place is refused with a named error instead of hanging
// the process; a size bound stops a huge file from being read into memory.
//
// Outputs: written to PATH.tmp (created O_EXCL | O_NOFOLLOW, so a link or a
// FIFO planted at the temporary name is never written through) and renamed
// over PATH once complete, so a failed write never leaves a partial file
// under the final name, and a symlink at PATH is replaced, not followed.
// PATH itself may not be a FIFO, device, directory or a link to one.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/output_path.h"
#include "common/status.h"

namespace sluice {

// Opens PATH for reading (plus extra_flags, e.g. O_DIRECT): a regular file
// or an error naming PATH. *size gets its size when non-null.
Status open_input_file(const std::string &path, int *fd, uint64_t *size = nullptr, int extra_flags = 0);
// The checks of open_input_file on a descriptor opened with O_NONBLOCK by
// other means (platform reads); clears O_NONBLOCK once the file is regular.
Status check_input_fd(int fd, const std::string &path, uint64_t *size);
// Reads all of PATH (a regular file of at most max_bytes) into *out.
Status read_input_file(const std::string &path, size_t max_bytes, std::string *out);

// Writes BYTES to PATH through PATH.tmp and a rename (fsync first when sync).
Status write_output_file(const std::string &path, std::string_view bytes, bool sync = true);

// The two steps of OutputFile for writers that manage their own descriptor
// (pwrite at offsets, reads back): checks PATH and creates PATH.tmp
// (O_RDWR, O_EXCL, O_NOFOLLOW); then, once the file is complete and closed,
// checks PATH again and renames TMP over it (TMP removed on failure).
Status create_output_temp(const std::string &path, int *fd, std::string *tmp, int extra_flags = 0);
Status publish_output_temp(const std::string &tmp, const std::string &path);

// For an output that must exist under its final name while it is written
// (a log appended as a run goes, a data file whose folder is published by a
// later rename): the checks of create_output_temp, a symlink at PATH
// replaced (unlinked) rather than followed, then PATH created and truncated.
Status create_output_in_place(const std::string &path, int *fd);

// An output written piece by piece: create() makes PATH.tmp, commit()
// renames it over PATH; destroyed uncommitted, the temporary is removed.
class OutputFile {
public:
    OutputFile() = default;
    ~OutputFile() { discard(); }
    OutputFile(const OutputFile &) = delete;
    OutputFile &operator=(const OutputFile &) = delete;

    Status create(const std::string &path, int extra_flags = 0);
    int fd() const { return fd_; }
    // A stdio stream on the descriptor, for printf-style writers (owned here).
    std::FILE *stream();
    Status write(const void *p, size_t n);
    Status commit(bool sync = true);
    void discard();
    const std::string &path() const { return path_; }
    const std::string &temp_path() const { return tmp_; }
    bool is_open() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::FILE *f_ = nullptr;
    bool failed_ = false;
    std::string path_, tmp_;
};

// Non-empty when OUT is, or lies inside, directory DIR (compared by device
// and inode of OUT's existing ancestors, so links and ".." do not hide it):
// "OUT: lies inside WHAT DIR; refusing to write there". Empty when DIR does
// not exist (nothing to protect). ALLOWED names the one file directly in DIR
// that may be written (the container's hotlist, usage.waste), or is null.
std::string output_inside_reason(const std::string &out, const std::string &dir, const std::string &what,
                                 const char *allowed = nullptr);

}  // namespace sluice
