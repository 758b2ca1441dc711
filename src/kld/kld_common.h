// Shared plumbing for the KLD suite (KLD.md §7): error categories with the
// distinct exit codes of §7.9, SHA-256, atomic file writes, and JSON text in
// the exact form Python's json.dumps(indent=2, sort_keys=True) produces, so
// manifests we write are byte-compatible with the festr2 tools.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "common/status.h"

namespace sluice::kld {

using json = nlohmann::json;
// ordered_json keeps insertion order; used where Python sorts keys anyway
// is not wanted (safetensors headers, which must list dtype/shape/offsets).
using ojson = nlohmann::ordered_json;

// The failure categories of KLD.md §7.9, each with its own exit code. A kld
// error is a sluice::Status; each category has its own sluice_status code,
// so the CLI maps a library error to its exit code without string matching:
//   usage     SLUICE_E_ARG          a bad option or option value
//   identity  SLUICE_E_UNSUPPORTED  operands of different experiments (suite
//                                   or token hash, vocab, shape, window set)
//   format    SLUICE_E_FORMAT       malformed file or manifest
//   io        SLUICE_E_IO           missing/unreadable/short file
//   nonfinite SLUICE_E_RANGE        NaN or +inf in an operand
//   resource  SLUICE_E_NOMEM        RAM or disk plan over the cap
//   engine    SLUICE_E_STATE        the inference engine callback failed
enum class Code : int {
    ok = 0,
    usage = 2,
    identity = 3,
    format = 4,
    io = 5,
    nonfinite = 6,
    resource = 7,
    engine = 8,
};

// A failed Status of category c. Library code returns these; it never
// prints or exits.
Status err(Code c, std::string msg);
// The category of s (a Status from the engine hook included).
Code code_of(const Status& s);
const char* code_name(Code c);
inline int exit_code(const Status& s) { return static_cast<int>(code_of(s)); }
// A Status from src/format or src/common (the safetensors reader and
// writer, SHA-256) in the KLD categories: I/O stays I/O (exit 5), any other
// failure is a format error (exit 4) -- an argument error from the writer
// is this program's bug, not the user's usage.
Status from_status(const Status& s);

// ---- SHA-256 (common/sha256.h) ----------------------------------------
using ::sluice::Sha256;
using ::sluice::sha256_hex;
Status sha256_file(const std::string& path, std::string* hex, uint64_t* size = nullptr);

// ---- files ------------------------------------------------------------
Status read_file(const std::string& path, std::string* out);
// Writes path.tmp, fsyncs, renames onto path: never a partial final file.
Status write_file_atomic(const std::string& path, std::string_view bytes);
bool file_exists(const std::string& path);
Status make_dirs(const std::string& path);
std::string join_path(const std::string& a, const std::string& b);
// Removes leftover "*.tmp" files of an interrupted run in dir.
void remove_tmp_files(const std::string& dir);

// ---- receipts ----------------------------------------------------------
// A compare receipt whose candidate failed its SHA-256 check (sluice.integrity
// "failed") measured bytes nobody vouches for: report and paired refuse it
// (exit 3, identity) naming the receipt, never rank it (docs/KLD.md).
Status refuse_failed_integrity(const json& receipt, const std::string& path);

// ---- JSON -------------------------------------------------------------
// Python json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=ascii) + "\n".
std::string dump_py(const json& j, bool ascii = true);
// Compact Python json.dumps(obj, separators=(",",":")) of an int array.
std::string compact_int_array(const std::vector<int32_t>& ids);
Status parse_json(const std::string& text, const std::string& what, json* out);
// The same, also accepting the Infinity / -Infinity / NaN literals that
// Python's json (and dump_py) write for non-finite floats: a receipt whose
// mean KL is +inf is still a receipt.
Status parse_json_py(const std::string& text, const std::string& what, json* out);

// ---- window selection -------------------------------------------------
// "0-7,16,24" → sorted unique indices, each < count.
Status parse_window_list(const std::string& spec, int count, std::vector<int>* out);

std::string utc_now_iso();

}  // namespace sluice::kld
