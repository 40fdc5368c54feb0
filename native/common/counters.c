/* The counter tables, expanded from the one list in counters.h. */
#include "perfkit/counters.h"

#define PK_X_NAME(name, kind, unit, label) #name,
const char *const pk_counter_names[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_NAME) };
#undef PK_X_NAME

#define PK_X_UNIT(name, kind, unit, label) unit,
const char *const pk_counter_units[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_UNIT) };
#undef PK_X_UNIT

#define PK_X_LABEL(name, kind, unit, label) label,
const char *const pk_counter_labels[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_LABEL) };
#undef PK_X_LABEL

#define PK_X_KIND(name, kind, unit, label) PK_##kind,
const int pk_counter_kinds[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_KIND) };
#undef PK_X_KIND
