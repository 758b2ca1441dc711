// Forwarding header for safetensors.h and sha256.h, which stay here until
// their replacements in src/format and src/common land (issue 19); the KLD
// suite itself lives in src/kld.
#pragma once
#include "kld/kld_common.h"

// safetensors.cpp's spelling of SLUICE_TRY (it stays unchanged until it is
// replaced by the src/format reader).
#define KLD_TRY(expr) SLUICE_TRY(expr)
