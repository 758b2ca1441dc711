// A narrow wrapper over stb_image (compiled once, in stb_impl.cpp), so no
// other file sees its macros.
#pragma once

namespace sluice::vision::stb {
bool info(const unsigned char *data, int len, int *w, int *h, int *comp);
// 8-bit RGB, w*h*3 bytes; nullptr on failure (see failure_reason).
unsigned char *load_rgb(const unsigned char *data, int len, int *w, int *h);
void free_pixels(unsigned char *p);
const char *failure_reason();
}  // namespace sluice::vision::stb
