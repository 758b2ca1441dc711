// Image references in chat requests (VISION.md §9): data: URLs (base64),
// and file: URLs or bare paths when the server allows local images. Remote
// http(s) images are never fetched.
#pragma once
#include <string>

#include "server/request.h"

namespace sluice::server {

constexpr size_t kMaxImageBytes = 64u << 20;  // one decoded image reference

bool request_has_images(const GenRequest &r);
// Replaces every image part's reference by the file's bytes (part.bytes).
// Runs on the HTTP thread, before the request takes a queue slot.
bool resolve_images(GenRequest *r, bool allow_local, ApiError *err);
// Strict RFC 4648 base64 (padding optional, no whitespace). False on any
// other byte.
bool base64_decode(std::string_view in, std::string *out);

}  // namespace sluice::server
