/*
 * generate: stream text from a prompt with the installed libsluice.
 *
 *     generate MODEL "prompt" [N]
 *
 * Opens the container, tokenizes the prompt (BOS first), samples N tokens
 * (default 32; greedy, so the output repeats run to run) and prints each
 * token's text as soon as it is complete. Errors go to stderr with the
 * library's explanation; the exit code is 1.
 */
#include <sluice/sluice.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(sluice_ctx *ctx, const char *what, sluice_status st) {
    fprintf(stderr, "generate: %s: %s: %s\n", what, sluice_status_name(st), sluice_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL PROMPT [N]\n", argv[0]);
        return 2;
    }
    const int n_new = argc > 3 ? atoi(argv[3]) : 32;
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    sluice_ctx *ctx = NULL;
    sluice_status st = sluice_open(argv[1], &cfg, &ctx);
    if (st != SLUICE_OK) {
        int rc = fail(ctx, "open", st);
        sluice_close(ctx);
        return rc;
    }
    int rc = 0;
    const size_t len = strlen(argv[2]);
    int32_t *ids = malloc((len + 2) * sizeof *ids); /* never more tokens than bytes, plus BOS */
    float *logits = malloc((size_t)sluice_n_vocab(ctx) * sizeof *logits);
    sluice_detok *dt = NULL;
    sluice_sampler *sampler = NULL;
    size_t n = 0;
    if (!ids || !logits) {
        fprintf(stderr, "generate: out of memory\n");
        rc = 1;
        goto done;
    }
    ids[0] = sluice_token_bos(ctx);
    if ((st = sluice_tokenize(ctx, argv[2], len, ids + 1, len + 1, &n)) != SLUICE_OK) {
        rc = fail(ctx, "tokenize", st);
        goto done;
    }
    n += 1;
    if ((st = sluice_eval(ctx, ids, n, logits)) != SLUICE_OK) {
        rc = fail(ctx, "prompt", st);
        goto done;
    }
    sluice_sampling sp;
    sluice_sampling_default(&sp);
    sp.temperature = 0.0f; /* greedy */
    sampler = sluice_sampler_new(&sp);
    dt = sluice_detok_new(ctx);
    if (!sampler || !dt) {
        rc = fail(ctx, "sampler / detokenizer", SLUICE_E_UNSUPPORTED);
        goto done;
    }
    char buf[256];
    const int32_t eos = sluice_token_eos(ctx);
    for (int i = 0; i < n_new; i++) {
        int32_t t = sluice_sampler_sample(sampler, logits, sluice_n_vocab(ctx), NULL, 0);
        if (t < 0 || t == eos) break;
        size_t w = 0;
        if (!sluice_token_is_control(ctx, t) && sluice_detok_push(dt, t, buf, sizeof buf, &w) == SLUICE_OK) {
            fwrite(buf, 1, w, stdout);
            fflush(stdout); /* streaming: each piece as it completes */
        }
        if ((st = sluice_eval(ctx, &t, 1, logits)) != SLUICE_OK) {
            rc = fail(ctx, "decode", st);
            goto done;
        }
    }
    size_t w = 0;
    if (sluice_detok_flush(dt, buf, sizeof buf, &w) == SLUICE_OK) fwrite(buf, 1, w, stdout);
    fputc('\n', stdout);
done:
    sluice_detok_free(dt);
    sluice_sampler_free(sampler);
    free(logits);
    free(ids);
    sluice_close(ctx);
    return rc;
}
