// The real engine behind the server's Model interface: a client of
// include/sluice/sluice.h only.
#pragma once
#include <memory>
#include <string>

#include "server/model.h"
#include "sluice/sluice.h"

namespace sluice::server {

// Takes ownership of an open context. Text functions need the container's
// tokenizer.model; check() says, before serving, whether they work.
// vision: the context was opened with sluice_config.vision (the server's
// --vision); without it, image requests are refused as vision_disabled.
std::unique_ptr<Model> make_sluice_model(sluice_ctx *ctx, bool vision = false);
// Opens nothing; reports why a context cannot serve text (no tokenizer,
// no chat template), or returns true.
bool sluice_model_check(Model &m, std::string *err);

}  // namespace sluice::server
