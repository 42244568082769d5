/*
 * kagentd's API (docs/daemon-api.md, docs/openapi.yaml): the route table the daemon serves
 * (agent/daemon/daemon_routes.c). The caller of kagent_daemon_run passes it in the options.
 */
#ifndef KAGENT_DAEMON_ROUTES_H
#define KAGENT_DAEMON_ROUTES_H

#include "kagent/daemon/http_server.h"

/* Ended by an entry whose method is NULL; handler_data is the daemon. */
extern const struct kagent_http_route kagent_daemon_routes[];

#endif
