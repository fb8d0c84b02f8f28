// The fixed rules of JSON Schema grammars (json_schema_primitives.h).
#include "grammar/json_schema_primitives.h"

#include "grammar/gbnf_emit.h"

namespace slab::grammar::detail {

// Rules every grammar may share, emitted once each where used (in this order).
const std::vector<std::pair<std::string, std::string>> kJsonPrimitives = {
    {"json-value", "json-object | json-array | json-string | json-number | json-boolean | json-null"},
    {"json-object", "\"{\" ws ( json-member ( \",\" ws json-member )* )? \"}\""},
    {"json-member", "json-string ws \":\" ws json-value ws"},
    {"json-array", "\"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\""},
    {"json-string", "\"\\\"\" json-char* \"\\\"\""},
    {"json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] | json-u-escape"},
    {"json-u-escape",
     "\"\\\\u\" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
     "[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} )"},
    {"json-nonascii-escape", json_nonascii_escape_body()},
    {"json-number", "\"-\"? json-int ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?"},
    {"json-int", "\"0\" | [1-9] [0-9]*"},
    {"json-nonnegative-number", "json-int ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?"},
    {"json-positive-number", "( [1-9] [0-9]* ( \".\" [0-9]+ )? | \"0.\" \"0\"* [1-9] [0-9]* ) ( [eE] [-+]? [0-9]+ )?"},
    {"json-integer", "\"-\"? json-int"},
    {"json-boolean", "\"true\" | \"false\""},
    {"json-null", "\"null\""},
    // Calendar dates of years 0001..9999: each month's length, February 29 in leap years only.
    {"json-date",
     "json-year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
     "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
     "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | json-leap-year \"-02-29\""},
    {"json-year", "\"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9]{2} | [1-9] [0-9]{3}"},
    {"json-leap-year",
     "[0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\""},
    {"json-time",
     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
     "( [zZ] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
    {"json-email-atom", "[-A-Za-z0-9!#$%&'*+=?^_`{|}~]+"},
    {"json-email-label", "[A-Za-z0-9] ( [-A-Za-z0-9]* [A-Za-z0-9] )?"},
    {"json-ipv4-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]"},
};

// Which primitives a primitive uses (so that using one pulls in the rest).
const std::map<std::string, std::vector<std::string>> kJsonPrimitiveDependencies = {
    {"json-value", {"json-object", "json-array", "json-string", "json-number", "json-boolean", "json-null"}},
    {"json-object", {"ws", "json-member"}},
    {"json-member", {"json-string", "ws", "json-value"}},
    {"json-array", {"ws", "json-value"}},
    {"json-string", {"json-char"}},
    {"json-char", {"json-u-escape"}},
    {"json-number", {"json-int"}},
    {"json-nonnegative-number", {"json-int"}},
    {"json-integer", {"json-int"}},
};

const std::map<std::string, std::pair<std::string, std::vector<std::string>>> kJsonFormats = {
    {"date", {"json-date", {"json-date", "json-year", "json-leap-year"}}},
    {"time", {"json-time", {"json-time"}}},
    {"date-time", {"json-date [tT] json-time", {"json-date", "json-year", "json-leap-year", "json-time"}}},
    {"uuid",
     {"[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}", {}}},
    {"email",
     {"json-email-atom ( \".\" json-email-atom )* \"@\" json-email-label ( \".\" json-email-label )+",
      {"json-email-atom", "json-email-label"}}},
    {"ipv4",
     {"json-ipv4-octet \".\" json-ipv4-octet \".\" json-ipv4-octet \".\" json-ipv4-octet", {"json-ipv4-octet"}}},
};

}  // namespace slab::grammar::detail
