/* The counter tables, expanded from the one list in counters.h. */
#include "perfkit/counters.h"

#define PK_X_NAME(name, kind, unit, group, label) #name,
const char *const pk_counter_names[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_NAME) };
#undef PK_X_NAME

#define PK_X_UNIT(name, kind, unit, group, label) unit,
const char *const pk_counter_units[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_UNIT) };
#undef PK_X_UNIT

#define PK_X_GROUP(name, kind, unit, group, label) #group,
const char *const pk_counter_groups[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_GROUP) };
#undef PK_X_GROUP

#define PK_X_LABEL(name, kind, unit, group, label) label,
const char *const pk_counter_labels[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_LABEL) };
#undef PK_X_LABEL

#define PK_X_KIND(name, kind, unit, group, label) PK_##kind,
const int pk_counter_kinds[PK_NCOUNTERS] = { PK_COUNTERS(PK_X_KIND) };
#undef PK_X_KIND
