#include "common/checked_file.h"
#include "server/images.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>

namespace sluice::server {

bool request_has_images(const GenRequest &r) {
    for (const ChatMessage &m : r.messages)
        for (const ContentPart &p : m.parts)
            if (p.image) return true;
    return false;
}

bool base64_decode(std::string_view in, std::string *out) {
    auto val = [](unsigned char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    size_t n = in.size();
    while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) n--;
    if ((in.size() != n && in.size() % 4 != 0) || n % 4 == 1) return false;
    out->clear();
    out->reserve(n / 4 * 3 + 2);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const int v = val((unsigned char)in[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out->push_back((char)((acc >> bits) & 0xFF));
        }
    }
    return true;
}

namespace {

ApiError image_error(std::string msg) { return bad_request(std::move(msg), "image_url", "invalid_image_url"); }

bool resolve_one(ContentPart *p, bool allow_local, ApiError *err) {
    const std::string &u = p->url;
    auto starts = [&](const char *pre) {
        const size_t n = std::char_traits<char>::length(pre);
        if (u.size() < n) return false;
        for (size_t i = 0; i < n; i++)
            if (std::tolower((unsigned char)u[i]) != pre[i]) return false;
        return true;
    };
    if (starts("data:")) {
        const size_t comma = u.find(',');
        if (comma == std::string::npos) return *err = image_error("image_url is a data: URL without ','"), false;
        const std::string head = u.substr(5, comma - 5);
        if (head.find(";base64") == std::string::npos)
            return *err = image_error("only base64 data: URLs are supported"), false;
        if (!base64_decode(std::string_view(u).substr(comma + 1), &p->bytes))
            return *err = image_error("image_url is not valid base64"), false;
        if (p->bytes.empty()) return *err = image_error("image_url decoded to no bytes"), false;
        return true;
    }
    if (starts("http://") || starts("https://"))
        return *err = image_error("remote images are not fetched; send the image as a base64 data: URL"), false;
    std::string path = starts("file://") ? u.substr(7) : u;
    if (!allow_local)
        return *err = image_error("local image paths are disabled; send a base64 data: URL, or start the server "
                                  "with --allow-local-images"),
               false;
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode))
        return *err = image_error("image not found: " + path), false;
    if ((uint64_t)sb.st_size > kMaxImageBytes)
        return *err = image_error("image file is larger than " + std::to_string(kMaxImageBytes) + " bytes: " + path),
               false;
    std::string bytes;
    if (Status rs = read_input_file(path, kMaxImageBytes, &bytes); !rs)
        return *err = image_error("cannot read image: " + rs.message()), false;
    p->bytes = std::move(bytes);
    if (p->bytes.empty()) return *err = image_error("image file is empty: " + path), false;
    return true;
}

}  // namespace

bool resolve_images(GenRequest *r, bool allow_local, ApiError *err) {
    for (ChatMessage &m : r->messages)
        for (ContentPart &p : m.parts)
            if (p.image && !resolve_one(&p, allow_local, err)) return false;
    return true;
}

}  // namespace sluice::server
