// libFuzzer harness: an HTTP request body through the server's request
// parser (chat and completion endpoints), then the UTF-8 sanitizer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view body(reinterpret_cast<const char *>(data), size);
    for (auto kind : {sluice::server::Endpoint::chat, sluice::server::Endpoint::completion}) {
        sluice::server::GenRequest r;
        sluice::server::ApiError e;
        (void)sluice::server::parse_request(kind, body, &r, &e);
    }
    (void)sluice::server::utf8_sanitize(body);
    return 0;
}
