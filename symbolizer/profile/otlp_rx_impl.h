/* Shared by otlp_rx_decode.c and otlp_rewrite.c only: the decoded request
 * with its budgeted allocator (otlp_rewrite.h), and short names for the
 * protobuf-c types. */
#ifndef OPAL_OTLP_RX_IMPL_H
#define OPAL_OTLP_RX_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "profile/otlp_rewrite.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	Req;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles ResourceProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles ScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType ValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location Location;
typedef Opentelemetry__Proto__Profiles__V1development__Line Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function Function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

struct opal_otlp_rx {
	Req *req;                 /* decoded with `pa`; additions use it too */
	ProtobufCAllocator pa;
	size_t budget, used;      /* bytes, block headers included */
	bool over_budget;         /* an allocation was refused for the budget */
};

/* The request's allocator, for what the rewrite adds (freed with the
 * request by protobuf-c). NULL over the budget or on ENOMEM. */
void *opal_otlp_rx_alloc(struct opal_otlp_rx *rx, size_t size);
void opal_otlp_rx_dealloc(struct opal_otlp_rx *rx, void *p);

#endif
