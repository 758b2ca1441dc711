// SHA-256 of a whole file, read through File (pread, bounded buffer). Here
// rather than in src/common because it reads files: common sits below
// format and includes nothing of it (scripts/check_layers.py).
#pragma once
#include <cstdint>
#include <string>

#include "common/sha256.h"
#include "common/status.h"

namespace sluice {

// Hashes a whole file in reads of at most 1 MiB; *size receives its length
// if not null.
Status sha256_file(const std::string &path, std::string *hex, uint64_t *size = nullptr);
class File;
// The same through a descriptor already open (the bytes a reader of F sees).
Status sha256_open_file(const File &f, std::string *hex);

}  // namespace sluice
