// The C API's sampler: a shell over src/sample.
#include <cstring>
#include <new>

#include "api/sampler.h"

extern "C" {

void sluice_sampling_default(sluice_sampling *p) {
    if (!p) return;
    std::memset(p, 0, sizeof(*p));
    const sluice::sample::Params d;
    p->struct_size = sizeof(sluice_sampling);
    p->temperature = d.temperature;
    p->top_k = d.top_k;
    p->top_p = d.top_p;
    p->min_p = d.min_p;
    p->repeat_penalty = d.repeat_penalty;
    p->repeat_last_n = d.repeat_last_n;
    p->seed = d.seed;
}

sluice_sampler *sluice_sampler_new(const sluice_sampling *in) {
    if (!in || in->struct_size < sizeof(uint32_t) || in->struct_size > sizeof(sluice_sampling)) return nullptr;
    sluice_sampling p;
    sluice_sampling_default(&p);
    std::memcpy(&p, in, in->struct_size);
    sluice::sample::Params q;
    q.temperature = p.temperature;
    q.top_k = p.top_k;
    q.top_p = p.top_p;
    q.min_p = p.min_p;
    q.repeat_penalty = p.repeat_penalty;
    q.repeat_last_n = p.repeat_last_n;
    q.seed = p.seed;
    if (*sluice::sample::check_params(q)) return nullptr;
    return new (std::nothrow) sluice_sampler{sluice::sample::Sampler(q)};
}

int32_t sluice_sampler_sample(sluice_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                              size_t n_history) {
    if (!s || !logits || n_vocab <= 0 || (!history && n_history > 0)) return -1;
    try {
        return s->s.sample(std::span<const float>(logits, (size_t)n_vocab),
                           std::span<const int32_t>(history, n_history));
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

void sluice_sampler_free(sluice_sampler *s) { delete s; }

}  // extern "C"
