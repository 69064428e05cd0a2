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
	.name = "shm",
	.dev_open = be__shm_dev_open,
	.dev_close = be__shm_dev_close,
	.dev_query = be__shm_dev_query,
	.dev_reg_hook = be__shm_dev_reg_hook,
	.evch_create = be__shm_evch_create,
	.evch_destroy = be__shm_evch_destroy,
	.evch_fd = be__shm_evch_fd,
	.evch_get = be__shm_evch_get,
	.cq_create = be__shm_cq_create,
	.cq_destroy = be__shm_cq_destroy,
	.cq_poll = be__shm_cq_poll,
	.cq_fd = be__shm_cq_fd,
	.cq_arm = be__shm_cq_arm,
	.cq_ack = be__shm_cq_ack,
	.srq_create = be__shm_srq_create,
	.srq_destroy = be__shm_srq_destroy,
	.srq_post_recv = be__shm_srq_post_recv,
	.srq_arm_limit = be__shm_srq_arm_limit,
	.listen = be__shm_listen,
	.listener_addr = be__shm_listener_addr,
	.listener_close = be__shm_listener_close,
	.connect = be__shm_connect,
	.accept = be__shm_accept,
	.reject = be__shm_reject,
	.disconnect = be__shm_disconnect,
	.conn_destroy = be__shm_conn_destroy,
	.post_send = be__shm_post_send,
	.conn_peer_addr = be__shm_conn_peer_addr,
};
