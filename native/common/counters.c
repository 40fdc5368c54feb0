/* The counter tables, expanded from the one list in counters.h: one column each. */
#include "perfkit/counters.h"

#define PK_X_NAME(name, kind, unit, group, label) #name,
#define PK_X_UNIT(name, kind, unit, group, label) unit,
#define PK_X_GROUP(name, kind, unit, group, label) #group,
#define PK_X_LABEL(name, kind, unit, group, label) label,
#define PK_X_KIND(name, kind, unit, group, label) PK_##kind,

const char *const pk_counter_names[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_NAME) };
const char *const pk_counter_units[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_UNIT) };
const char *const pk_counter_groups[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_GROUP) };
const char *const pk_counter_labels[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_LABEL) };
const int pk_counter_kinds[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_KIND) };
