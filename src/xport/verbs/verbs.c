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
	.name = "verbs",
	.dev_open = be__verbs_dev_open,
	.dev_close = be__verbs_dev_close,
	.dev_query = be__verbs_dev_query,
	.dev_reg_hook = be__verbs_dev_reg_hook,
	.evch_create = be__verbs_evch_create,
	.evch_destroy = be__verbs_evch_destroy,
	.evch_fd = be__verbs_evch_fd,
	.evch_get = be__verbs_evch_get,
	.cq_create = be__verbs_cq_create,
	.cq_destroy = be__verbs_cq_destroy,
	.cq_poll = be__verbs_cq_poll,
	.cq_fd = be__verbs_cq_fd,
	.cq_arm = be__verbs_cq_arm,
	.cq_ack = be__verbs_cq_ack,
	.srq_create = be__verbs_srq_create,
	.srq_destroy = be__verbs_srq_destroy,
	.srq_post_recv = be__verbs_srq_post_recv,
	.srq_arm_limit = be__verbs_srq_arm_limit,
	.listen = be__verbs_listen,
	.listener_addr = be__verbs_listener_addr,
	.listener_close = be__verbs_listener_close,
	.connect = be__verbs_connect,
	.accept = be__verbs_accept,
	.reject = be__verbs_reject,
	.disconnect = be__verbs_disconnect,
	.conn_destroy = be__verbs_conn_destroy,
	.post_send = be__verbs_post_send,
	.conn_peer_addr = be__verbs_conn_peer_addr,
	.addr_canon = be__inet_canon,
};
