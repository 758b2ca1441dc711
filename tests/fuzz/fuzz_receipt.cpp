// libFuzzer harness: a `kld compare` receipt as `kld report` loads it
// (issue 32). Whatever the bytes, build_report either refuses with a Status
// or builds a report; a receipt whose integrity check failed (any value of
// sluice.integrity but "verified" / "not checked ...") is never ranked.
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "kld/report/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const std::string path = fuzz::put("receipt.json", std::string_view(reinterpret_cast<const char *>(data), size));
    sluice::kld::ReportInput in;
    in.receipt = path;
    sluice::kld::ReportOptions opt;
    sluice::kld::Report rep;
    const sluice::Status st = sluice::kld::build_report({in}, opt, &rep);
    if (st.is_ok()) {
        const auto j = nlohmann::json::parse(std::string_view(reinterpret_cast<const char *>(data), size), nullptr, false);
        // A ranked receipt must not be one marked failed.
        if (!sluice::kld::refuse_failed_integrity(j, path).is_ok()) std::abort();
        volatile size_t n = sluice::kld::report_html(rep).size();
        (void)n;
    }
    return 0;
}
