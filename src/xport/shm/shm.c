/*
 * shm.c - the shm transport's ops table ("shm"): processes on one host.
 *
 * The implementation is split by role, as in every transport's folder:
 * dev.c (device, registered regions), cm.c (connections, events, peer
 * death), cq.c (cq and srq objects), data.c (the data path) and ring.h
 * (the shared-memory layout). See shm.h for the model and
 * docs/TRANSPORTS.md for the user's view.
 */
#include "xport/shm/shm.h"

const struct be_xport_ops be__xport_shm_ops = {
	BE__XPORT_OPS(shm),
	.grant = be__shm_grant,
	.revoke = be__shm_revoke,
	.conn_rx_resume = be__shm_conn_rx_resume,
};
