/*
 * verbs.c - the verbs transport's ops table ("verbs"): RDMA devices
 * through libibverbs and librdmacm.
 *
 * The implementation is split by role, as in every transport's folder:
 * dev.c (devices, memory registration, async events), cm.c (event
 * channels, listeners, connection management on librdmacm), cq.c (CQs,
 * SRQs, completions), data.c (QPs, posting, held sends), map.c (a small
 * u64 hash table) and verbs.h (the objects). These files, and no others
 * in the library, include the infiniband/ and rdma/ headers; they build
 * only when libibverbs and librdmacm are present.
 */
#include "xport/addr.h"
#include "xport/verbs/verbs.h"

const struct be_xport_ops be__xport_verbs_ops = {
	BE__XPORT_OPS(verbs),
	.addr_canon = be__inet_canon,
	.addr_dev = be__verbs_addr_dev,
	.dev_name = be__verbs_dev_name,
	.grant = be__verbs_grant,
	.revoke = be__verbs_revoke,
};
