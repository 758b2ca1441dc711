// ASCII whitespace trimming as the XTML grammar defines it (space, \t..\r):
// one definition for the renderer and the reply parser, so both sides
// agree on what a blank attribute or header is.
#pragma once
#include <string>

namespace sluice::server {
inline std::string trim(const std::string &s) {
    size_t a = 0, b = s.size();
    while (a < b && (s[a] == ' ' || (s[a] >= 9 && s[a] <= 13))) a++;
    while (b > a && (s[b - 1] == ' ' || (s[b - 1] >= 9 && s[b - 1] <= 13))) b--;
    return s.substr(a, b - a);
}
}  // namespace sluice::server
