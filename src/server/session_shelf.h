// Prompt reuse across conversations: which sessions the server keeps aside
// and when it switches. A server that alternates between conversations (an
// agent and its sub-agents, several chats) would otherwise rewind the live
// session to the short prefix they share (a system prompt, or nothing) and
// evaluate the returning conversation's whole history again. Before each
// prompt: if a kept session shares a longer prefix with it than the live
// one does, the live one is kept aside and that one is restored; else, if
// the prompt would cut the live session back by many tokens, the live one
// is kept aside first. Kept sessions are bounded by the model's byte limit,
// least recently used first out. The sessions themselves are the model's
// (Keeper); this class only decides.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

namespace sluice::server {

// What the model saves and restores (SluiceModel: sluice_session_*).
class Keeper {
public:
    struct Kept {
        virtual ~Kept() = default;
        std::vector<int32_t> tokens;
        uint64_t bytes = 0;
    };
    virtual ~Keeper() = default;
    // A copy of the live session; nullptr when it cannot be kept, with
    // *full set when only the limit stood in the way (the shelf then frees
    // the least recently used and asks again).
    virtual std::unique_ptr<Kept> keep(bool *full) = 0;
    // Makes a kept copy the live session; false leaves the live one as it was.
    virtual bool resume(const Kept &k) = 0;
};

struct ShelfStats {
    uint64_t kept = 0, resumed = 0, dropped = 0;  // saves, restores, evictions
    size_t held = 0;
    uint64_t bytes = 0;
};

class SessionShelf {
public:
    // Tokens a switch or a keep must win or save, at least: below that the
    // live session's own rewind costs less than the copy.
    static constexpr size_t kMinTokens = 32;

    // Called before a prompt is matched against the live session (whose
    // tokens are `live`); may keep the live session aside and restore
    // another, after which `live` holds the new live session's tokens.
    void before_prompt(Keeper &k, std::vector<int32_t> *live, const std::vector<int32_t> &prompt);
    ShelfStats stats() const;

private:
    bool keep_live(Keeper &k, const std::vector<int32_t> &live);
    std::list<std::unique_ptr<Keeper::Kept>> kept_;  // most recently used first
    ShelfStats st_;
};

// Length of the common prefix, at most prompt.size() - 1 (the last prompt
// token is always evaluated, for its logits).
size_t shared_prefix(const std::vector<int32_t> &have, const std::vector<int32_t> &prompt);

}  // namespace sluice::server
