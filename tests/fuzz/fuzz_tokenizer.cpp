// libFuzzer harness: tokenizer files and chat.json. The input is a rank file
// (tiktoken.model), a specials file (specials.json or a Hugging Face
// tokenizer_config.json) and a chat.json, cut by fuzz::kSep. Whatever loads
// is exercised: encode/decode of a fixed text, the chat template rendered
// and checked against the tokenizer.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const auto part = fuzz::split(data, size, 3);
    auto fmt = sluice::tok::parse_chat_json(part[2], "fuzz/chat.json");
    auto tok = sluice::tok::Tokenizer::from_text(part[0], part[1], {}, "fuzz/tiktoken.model");
    if (!tok) return 0;
    const sluice::tok::Tokenizer &t = tok.value();
    const std::string text = "Hello <|im_end|> wörld 123 \xF0\x9F\x98\x80 \xff";
    std::vector<sluice::tok::Token> ids = t.encode_markup(text);
    (void)t.decode(ids);
    ids.push_back(t.n_vocab());  // out of range: an error, never a read past the tables
    (void)t.decode(ids);
    sluice::tok::StreamDecoder sd(t);
    std::string out;
    for (auto id : ids) (void)sd.push(id, out);
    if (fmt) {
        (void)sluice::tok::check_chat_format(t, fmt.value());
        const sluice::tok::Message msgs[] = {{sluice::tok::Role::system, "s"}, {sluice::tok::Role::user, "u"}};
        (void)sluice::tok::render_chat(t, fmt.value(), msgs);
    }
    return 0;
}
