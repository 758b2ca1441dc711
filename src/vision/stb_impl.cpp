// The one translation unit that compiles Debian's stb_image (libstb-dev),
// the decoder the reference engine uses, so PNG and JPEG pixels match. The
// loaders VISION.md §3 leaves out (HDR, linear float, PIC, PNM) are compiled
// out; stdio is too: image.cpp reads files itself, with a size bound.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PIC
#define STBI_NO_PNM
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
// Third-party code: its warnings are off for this file (src/vision/CMakeLists.txt).
#include <stb_image.h>

#include "vision/stb_shim.h"

namespace sluice::vision::stb {

bool info(const unsigned char *data, int len, int *w, int *h, int *comp) {
    return stbi_info_from_memory(data, len, w, h, comp) != 0;
}

unsigned char *load_rgb(const unsigned char *data, int len, int *w, int *h) {
    int comp = 0;
    return stbi_load_from_memory(data, len, w, h, &comp, 3);
}

void free_pixels(unsigned char *p) { stbi_image_free(p); }

const char *failure_reason() {
    const char *r = stbi_failure_reason();
    return r ? r : "unknown reason";
}

}  // namespace sluice::vision::stb
