/*
 * gossip/transport_registry.c — the transports, one line each: name -> entry (its ops table,
 * whose caps are its capability flags, and the hooks that take --provider names). Adding a
 * transport is one file that defines its entry and one line here (docs/transport.md).
 */
#include "gossip/transport_impl.h"
#include "hearsay/common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const hs_transport_entry_t *const registry[] = {
    &hs_shm_entry,    /* hsshm: Hearsay's shared memory, one host */
    &hs_hybrid_entry, /* hybrid, hsshm+P: per pair of ranks, hsshm within a host, P across */
    &hs_fabric_entry, /* fabric: a libfabric provider (last: it takes any other such name) */
};

const hs_transport_entry_t *hs_transport_registry_at(int i)
{
    return i >= 0 && (size_t)i < HS_ARRAY_LEN(registry) ? registry[i] : NULL;
}

const hs_transport_entry_t *hs_transport_lookup(const char *name)
{
    if (!name || !*name || !strcmp(name, "auto")) return NULL;
    for (size_t i = 0; i < HS_ARRAY_LEN(registry); i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    for (size_t i = 0; i < HS_ARRAY_LEN(registry); i++)
        if (registry[i]->claims && registry[i]->claims(name)) return registry[i];
    return NULL;
}

const char *hs_transport_names(void)
{
    static char names[512];
    if (names[0]) return names;
    size_t w = (size_t)snprintf(names, sizeof names, "auto");
    for (size_t i = 0; i < HS_ARRAY_LEN(registry) && w < sizeof names; i++)
        w += (size_t)snprintf(names + w, sizeof names - w, ", %s",
                              registry[i]->takes ? registry[i]->takes : registry[i]->name);
    return names;
}

static const char *const cap_names[HS_TCAP_COUNT] = {
    "tagged",        "any-source", "probe",  "liveness", "peer-map", "windows",
    "float-atomics", "peer-read",  "unsent", "host",     "device",   "early-small",
};

int hs_transport_caps_str(uint32_t caps, char *buf, size_t cap)
{
    size_t w = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < HS_TCAP_COUNT; i++) {
        if (!(caps & (1u << i))) continue;
        int n = snprintf(buf + w, w < cap ? cap - w : 0, "%s%s", w ? " " : "", cap_names[i]);
        w += (size_t)n;
        if (w >= cap) return HS_ERR(-ENAMETOOLONG, "capability list longer than %zu bytes", cap);
    }
    return 0;
}

uint32_t hs_transport_caps(const hs_transport_t *t)
{
    return hs_op_caps(t);
}
