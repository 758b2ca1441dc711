// The definition of the opaque sluice_sampler, shared by sampling.cpp and
// grammar.cpp. Not installed, not public.
#pragma once
#include "sample/sample.h"
#include "sluice/sluice.h"

struct sluice_sampler {
    sluice::sample::Sampler s;
};
