// The chat page served at GET /: one self-contained HTML file (inline
// style and script, no external requests, no build step). It streams
// /v1/chat/completions, shows the model's thinking in a collapsible block
// and its tool calls. The text is in web_page.html, embedded at build time.
#pragma once
#include <string>

namespace sluice::server {

const std::string &web_page_html();

}  // namespace sluice::server
