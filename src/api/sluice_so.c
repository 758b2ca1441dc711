/* libsluice.so's own translation unit: the library is the static archive
 * linked whole (src/api/CMakeLists.txt); this file only gives the target a
 * source and checks that the public header compiles as C. */
#include "sluice/sluice.h"
