// sluice_json_schema_check on its own: it needs only src/grammar, so the
// request-body fuzzer (scripts/fuzz.sh) links it without the engine.
#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "grammar/json_schema.h"
#include "sluice/sluice.h"

using namespace sluice::grammar;

sluice_status sluice_json_schema_check(const char *schema, size_t len, char *err, size_t err_cap) {
    std::string why;
    try {
        Grammar g;
        if (!schema && len > 0) why = "the schema is NULL";
        else if (len > 0 && !compile_json_schema(std::string_view(schema, len), Limits{}, &g, &why)) why = "JSON schema " + why;
    } catch (const std::bad_alloc &) {
        why = "out of memory";
    }
    if (err && err_cap > 0) {
        size_t n = std::min(why.size(), err_cap - 1);
        std::memcpy(err, why.data(), n);
        err[n] = '\0';
    }
    return why.empty() ? SLUICE_OK : SLUICE_E_ARG;
}

