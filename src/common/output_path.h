// Output files are written to PATH.tmp and renamed over PATH. rename()
// replaces whatever PATH names, so a FIFO, a device node or a directory
// given as --out would be destroyed (and opening a FIFO temp name blocks).
// Every writer asks this first: absent or a regular file is fine, anything
// else is refused with a reason naming the path.
#pragma once
#include <sys/stat.h>

#include <string>

namespace sluice {

inline std::string nonregular_output_reason(const std::string &path) {
    for (const std::string &p : {path, path + ".tmp"}) {
        struct stat st;
        if (::lstat(p.c_str(), &st) != 0) continue;  // absent: will be created
        if (S_ISREG(st.st_mode)) continue;
        if (S_ISLNK(st.st_mode) && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && p == path) continue;
        return p + ": exists and is not a regular file; refusing to replace it";
    }
    return {};
}

}  // namespace sluice
