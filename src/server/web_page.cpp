// The chat page (see web_page.h): web_page.html as a string literal.
#include "server/web_page.h"

namespace sluice::server {

const std::string &web_page_html() {
    static const std::string page =
#include "web_page.inc"
        ;
    return page;
}

}  // namespace sluice::server
